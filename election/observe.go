package election

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// EventType says what changed.
type EventType uint8

// The events of Observe.
const (
	// Elected: a new term began (a new token).
	Elected EventType = iota + 1
	// Changed: the leader proclaimed another value in the same term.
	Changed
	// Vacant: nobody leads (resigned with nobody waiting, or the lease
	// expired).
	Vacant
)

func (t EventType) String() string {
	switch t {
	case Elected:
		return "elected"
	case Changed:
		return "changed"
	case Vacant:
		return "vacant"
	}
	return "unknown"
}

// Event is a change of an election's leadership.
type Event struct {
	Type EventType
	// Leader is the leader after the change (the zero Leader for Vacant).
	// Its Expires is as of the event: renewals do not make events.
	Leader Leader
	// Token is the token of the current term, or for Vacant of the last
	// term this observer knew of (0 when none). It never goes down.
	Token int64
}

// message is an announcement of an election's state, as the store
// carries it to observers.
type message struct {
	Token   int64  `json:"t"`
	Vacant  bool   `json:"v,omitempty"`
	ID      string `json:"i,omitempty"`
	Value   string `json:"k,omitempty"`
	Since   int64  `json:"s,omitempty"` // µs since the epoch, store's clock
	Expires int64  `json:"x,omitempty"` // µs since the epoch, store's clock
	Left    int64  `json:"l,omitempty"` // µs until the lease expires
	Waiting int    `json:"w,omitempty"`
	Seq     int64  `json:"q,omitempty"` // the leader's proclaims in the term (view.seq)
}

// pos is where a state stands in an election's history, by which an
// observer orders what it hears: first the term's token; within a term,
// the leader's proclaims (seq); and a term's end above every state of the
// term. A state announced from a read of another term's leader (Resign's)
// stands at the start of that term: a read cannot tell its proclaims.
type pos struct {
	token int64
	ended bool // the vacancy after term token
	seq   int64
}

// after reports whether p is newer than q.
func (p pos) after(q pos) bool {
	switch {
	case p.token != q.token:
		return p.token > q.token
	case p.ended != q.ended:
		return p.ended
	}
	return !p.ended && p.seq > q.seq
}

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// encode returns the announcement of v; last is the token of the term
// that ended when v is vacant.
func encode(v view, last int64) string {
	m := message{Token: last, Vacant: true}
	if v.leads {
		l := v.leader
		m = message{Token: l.Token, ID: l.ID, Value: l.Value, Since: micros(l.Since), Expires: micros(l.Expires),
			Left: v.left.Microseconds(), Waiting: l.Waiting, Seq: v.seq}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(m) != nil {
		return ""
	}
	return string(bytes.TrimSpace(b.Bytes()))
}

// decode reads an announcement: the view and where it stands.
func decode(s string) (view, pos, bool) {
	var m message
	if json.Unmarshal([]byte(s), &m) != nil || m.Token <= 0 || m.Seq < 0 {
		return view{}, pos{}, false
	}
	if m.Vacant {
		return view{}, pos{token: m.Token, ended: true}, true
	}
	return view{leads: true, left: time.Duration(m.Left) * time.Microsecond, seq: m.Seq, leader: Leader{ID: m.ID, Value: m.Value,
		Token: m.Token, Since: fromMicros(m.Since), Expires: fromMicros(m.Expires), Waiting: m.Waiting}}, pos{token: m.Token, seq: m.Seq}, true
}

// announce tells the observers of every process sharing the store of v.
func (e *Election) announce(ctx context.Context, v view) {
	e.announceMsg(ctx, encode(v, 0))
}

// announceMsg sends msg (empty: "read the state") to the observers. It is
// best effort: an observer that misses it reads the state when its
// leader's lease would expire.
func (e *Election) announceMsg(ctx context.Context, msg string) {
	a, ok := e.locks.Store().(store.Announcer)
	if !ok {
		return
	}
	if ctx == nil || ctx.Err() != nil {
		parent := context.Background()
		if ctx != nil {
			parent = context.WithoutCancel(ctx)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(parent, time.Second)
		defer cancel()
	}
	_ = a.Announce(ctx, e.name, msg)
}

// Observe returns a channel of the election's changes. The first event is
// the current state (Elected, or Vacant); then every change: a new term
// (Elected), a new value (Changed), nobody leading (Vacant). Changes that
// come faster than the receiver takes them are coalesced into the latest,
// so the last event always equals what Leader says, and tokens in events
// never go down. The channel is closed when ctx ends (or the store is
// closed); nothing is left running.
//
// Changes come from the store's push (store.Announcer: a notification on
// PostgreSQL, a PUBLISH on Redis, the file's change watch on SQLite, a
// direct call in memory), so an observer costs no store read per change on
// PostgreSQL, on Redis and in memory. It reads the state when it starts, when a leader's lease would
// expire (one read per two thirds of a TTL while a leader lives: renewals
// send nothing), every TTL while nobody leads, and when the push says
// something changed without saying what (SQLite, a lost connection).
//
// Announcements may arrive in another order than the changes (a leader's
// Resign announces what it read after its release, and the next leader
// may have resigned by the time it arrives). Each says where it stands:
// its term's token; within a term, the leader's proclaims; a term's end
// above both. An observer drops one that is not newer than what it knows,
// so a state never follows a newer one. A vacancy that an observer read
// does not say which term ended: the next announced leader costs one read.
func (e *Election) Observe(ctx context.Context) <-chan Event {
	out := make(chan Event)
	if e.usable(ctx) != nil {
		close(out)
		return out
	}
	o := &observer{e: e, out: out, msgs: make(chan string, 16), kick: make(chan struct{}, 1)}
	if a, ok := e.locks.Store().(store.Announcer); ok {
		o.stop = a.Listen(e.name, o.heard)
	}
	go o.run(ctx)
	return out
}

// observer is one Observe call.
type observer struct {
	e    *Election
	out  chan<- Event
	msgs chan string
	kick chan struct{} // a message was dropped: read the state
	stop func()

	cur view
	at  pos // where cur stands: at.token is the largest token known
	// guess: cur is a vacancy read from the store, which does not say
	// which term ended; at.token is only a lower bound of it.
	guess     bool
	sent      bool // an event was delivered
	last      view // the state last delivered
	pending   bool
	readAfter time.Time
}

// heard takes an announcement (the store's listener goroutine): never
// blocks; when full, the observer reads the state instead.
func (o *observer) heard(msg string) {
	select {
	case o.msgs <- msg:
	default:
		select {
		case o.kick <- struct{}{}:
		default:
		}
	}
}

func (o *observer) run(ctx context.Context) {
	defer close(o.out)
	if o.stop != nil {
		defer o.stop()
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	mustRead, backoff := true, 10*time.Millisecond
	for {
		if mustRead {
			v, err := o.e.read(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, store.ErrClosed):
				return
			case err != nil:
				o.readAfter = time.Now().Add(backoff)
				backoff = min(2*backoff, o.e.ttl)
			default:
				backoff = 10 * time.Millisecond
				o.read(v)
			}
			mustRead = false
		}
		timer.Reset(time.Until(o.readAfter))
		var send chan<- Event
		var ev Event
		if o.pending {
			send, ev = o.out, o.event()
		}
		select {
		case <-ctx.Done():
			return
		case send <- ev:
			o.pending, o.sent, o.last = false, true, o.cur
		case m := <-o.msgs:
			if v, p, ok := decode(m); ok {
				mustRead = !o.heardState(v, p)
			} else {
				mustRead = true
			}
		case <-o.kick:
			mustRead = true
		case <-timer.C:
			mustRead = true
		}
	}
}

// read takes a state read from the store. A read is newer than all that
// the observer heard before it began, so it is taken as it is, except
// that tokens never go down; a leader's proclaims that it cannot tell are
// taken as those already heard in its term.
func (o *observer) read(v view) {
	o.readAfter = time.Now().Add(o.e.ttl) // unless take says otherwise
	switch {
	case v.leads && v.leader.Token < o.at.token:
		return
	case v.leads:
		p := pos{token: v.leader.Token}
		if o.at.token == p.token && !o.at.ended {
			p.seq = o.at.seq
		}
		o.take(v, p, false)
	default:
		o.take(v, pos{token: o.at.token, ended: true}, true)
	}
}

// heardState takes an announced state standing at p, only when p is newer
// than what the observer knows: an announcement made from an older state,
// arriving after a newer one, changes nothing. After a vacancy that the
// observer read, which does not say which term ended, an announced leader
// of a term not older than the last one known cannot be placed: heardState
// then returns false, and the observer reads the state instead.
func (o *observer) heardState(v view, p pos) bool {
	switch {
	case !o.guess:
		if p.after(o.at) {
			o.take(v, p, false)
		}
	case v.leads:
		return p.token < o.at.token // older: nothing to take
	case p.token > o.at.token:
		o.take(v, p, true) // vacant either way: only the token is learnt
	}
	return true
}

// take makes v, standing at p, the observer's state; guess says whether p
// is only a lower bound (a vacancy read).
func (o *observer) take(v view, p pos, guess bool) {
	o.cur, o.at, o.guess = v, p, guess
	// When to read next: as the leader's lease would expire, or every TTL.
	next := o.e.ttl
	if v.leads && v.left > 0 {
		next = v.left + min(v.left/16, time.Second)
	}
	o.readAfter = time.Now().Add(next)
	o.pending = !o.sent || o.last.leads != v.leads || (v.leads && (o.last.leader.Token != v.leader.Token || o.last.leader.Value != v.leader.Value))
}

// event returns the event of the current state against the last one
// delivered.
func (o *observer) event() Event {
	switch {
	case !o.cur.leads:
		return Event{Type: Vacant, Token: o.at.token}
	case o.sent && o.last.leads && o.last.leader.Token == o.cur.leader.Token:
		return Event{Type: Changed, Leader: o.cur.leader, Token: o.cur.leader.Token}
	}
	return Event{Type: Elected, Leader: o.cur.leader, Token: o.cur.leader.Token}
}
