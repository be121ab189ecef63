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
			Left: v.left.Microseconds(), Waiting: l.Waiting}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(m) != nil {
		return ""
	}
	return string(bytes.TrimSpace(b.Bytes()))
}

// decode reads an announcement: the view and the token it is about.
func decode(s string) (view, int64, bool) {
	var m message
	if json.Unmarshal([]byte(s), &m) != nil || m.Token <= 0 {
		return view{}, 0, false
	}
	if m.Vacant {
		return view{}, m.Token, true
	}
	return view{leads: true, left: time.Duration(m.Left) * time.Microsecond, leader: Leader{ID: m.ID, Value: m.Value,
		Token: m.Token, Since: fromMicros(m.Since), Expires: fromMicros(m.Expires), Waiting: m.Waiting}}, m.Token, true
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

	known     bool // cur holds what was read or heard
	cur       view
	token     int64 // the largest token known
	sent      bool  // an event was delivered
	last      view  // the state last delivered
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
				o.apply(v, 0, true)
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
			if v, tok, ok := decode(m); ok {
				o.apply(v, tok, false)
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

// apply takes a state read (read true) or announced about token tok.
func (o *observer) apply(v view, tok int64, read bool) {
	switch {
	case v.leads && v.leader.Token < o.token:
		return // older than what is known: tokens never go down
	case !v.leads && !read && o.cur.leads && tok < o.cur.leader.Token:
		return // the end of an older term
	}
	o.known, o.cur = true, v
	if v.leads {
		o.token = v.leader.Token
	} else if tok > o.token {
		o.token = tok
	}
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
		return Event{Type: Vacant, Token: o.token}
	case o.sent && o.last.leads && o.last.leader.Token == o.cur.leader.Token:
		return Event{Type: Changed, Leader: o.cur.leader, Token: o.cur.leader.Token}
	}
	return Event{Type: Elected, Leader: o.cur.leader, Token: o.cur.leader.Token}
}
