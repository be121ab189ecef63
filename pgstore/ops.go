package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/store"
)

func (s *Store) check(ctx context.Context) error {
	if ctx == nil {
		return store.Invalid(store.ErrInvalidConfig, "nil", "a context is needed")
	}
	if s == nil || s.c == nil {
		return store.Invalid(store.ErrInvalidConfig, "nil", "a pgstore.Store must be made by New, NewSQL or Open")
	}
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

func emit(ev store.Emitter, e store.Event) {
	if ev != nil {
		ev.Emit(e)
	}
}

// Define implements store.Store in one statement.
func (s *Store) Define(ctx context.Context, name string, slots int, ev store.Emitter) (bool, error) {
	if err := store.CheckDefinition(name, slots); err != nil {
		return false, err
	}
	if err := s.check(ctx); err != nil {
		return false, err
	}
	var created bool
	var have, running, waiting, old int32
	var at, seq, seq2 int64
	err := s.retry(ctx, false, func() error {
		return queryOne(ctx, s.c, s.q.define, []any{name, int64(slots), strings.HasSuffix(name, store.FamilySuffix)},
			&created, &have, &running, &waiting, &at, &old, &seq, &seq2)
	})
	if err != nil {
		return false, fmt.Errorf("pgstore: define %q: %w", name, err)
	}
	if !created {
		if int(have) != slots {
			return false, &store.ConflictError{Name: name, Slots: int(have), Requested: slots}
		}
		return false, nil
	}
	t := fromMicros(at)
	emit(ev, store.Event{Type: store.EventCreated, Lock: name, Slots: slots, Running: int(running), Waiting: int(waiting), Time: t,
		Seq: uint64(seq)})
	if old != 0 && int(old) != slots {
		// A family member in use became a lock of its own with other slots.
		emit(ev, store.Event{Type: store.EventResized, Lock: name, Slots: slots, Running: int(running), Waiting: int(waiting), Time: t,
			Seq: uint64(seq2)})
	}
	return true, nil
}

// Resize implements store.Store in one statement. Waiters see the new slots
// at their next check; this store's own are woken.
func (s *Store) Resize(ctx context.Context, name string, slots int, ev store.Emitter) error {
	if err := store.CheckDefinition(name, slots); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	var old, running, waiting int32
	var family bool
	var at, seq int64
	err := s.retry(ctx, true, func() error {
		return queryOne(ctx, s.c, s.q.resize, []any{name, int64(slots)}, &old, &family, &running, &waiting, &at, &seq)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return store.NotResizable(name)
	}
	if err != nil {
		return fmt.Errorf("pgstore: resize %q: %w", name, err)
	}
	if family || int(old) != slots {
		emit(ev, store.Event{Type: store.EventResized, Lock: name, Slots: slots, Running: int(running), Waiting: int(waiting),
			Time: fromMicros(at), Seq: uint64(seq)})
	}
	if slots > int(old) {
		s.d.wakeAll()
	}
	return nil
}

// arow is one result row of the acquire function, with the event's Seq.
type arow struct {
	ev                      string
	idx                     int32
	lock                    string
	slots, running, waiting int32
	ref, kind               string
	token, at, expires, dur int64
	queued                  bool
	ticket, ttl, hold       int64
	seq                     int64
}

func (s *Store) callAcquireQ(ctx context.Context, q string, args []any) ([]arow, error) {
	var out []arow
	err := s.c.query(ctx, q, args, func(scan func(...any) error) error {
		var r arow
		if err := scan(&r.ev, &r.idx, &r.lock, &r.slots, &r.running, &r.waiting, &r.ref, &r.kind, &r.token,
			&r.at, &r.expires, &r.dur, &r.queued, &r.ticket, &r.ttl, &r.hold, &r.seq); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	if err == nil && len(out) == 0 {
		err = errors.New("pgstore: acquire returned no row")
	}
	return out, err
}

// callAcquireSlow runs acquire1slow.sql: the rows of callAcquireQ, and
// whether the lock's row is fast after a grant (its last column).
func (s *Store) callAcquireSlow(ctx context.Context, args []any) ([]arow, bool, error) {
	var out []arow
	var fast bool
	err := s.c.query(ctx, s.q.acquireSlow, args, func(scan func(...any) error) error {
		var r arow
		if err := scan(&r.ev, &r.idx, &r.lock, &r.slots, &r.running, &r.waiting, &r.ref, &r.kind, &r.token,
			&r.at, &r.expires, &r.dur, &r.queued, &r.ticket, &r.ttl, &r.hold, &r.seq, &fast); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	if err == nil && len(out) == 0 {
		err = errors.New("pgstore: acquire returned no row")
	}
	return out, fast, err
}

// acquisition is one Acquire call.
type acquisition struct {
	req     *store.AcquireRequest
	names   []string
	op      int64
	reached bool // a statement of it may have reached the server
}

// Acquire implements store.Store. A try, a grant and a refusal are one
// statement each, and so is every check of a waiting caller. A waiter is
// woken by a notification when its lock may have a slot for it (see
// WithListenDSN), and checks again on a timer: its node's heads of queue
// every DefaultListenPoll or at the next expiry of a blocking lease, every
// waiter after 1ms, 2ms, … up to WithPollInterval while the store has no
// LISTEN connection.
func (s *Store) Acquire(ctx context.Context, req store.AcquireRequest) (store.Grant, error) {
	if err := s.check(ctx); err != nil {
		return store.Grant{}, err
	}
	if req.Weighted() {
		return store.Grant{}, fmt.Errorf("%w: weights (issue 21) on the PostgreSQL store", store.ErrUnsupported)
	}
	if err := ctx.Err(); err != nil {
		return store.Grant{}, err
	}
	a := &acquisition{req: &req, names: req.Names(), op: rand.Int64N(1<<62) + 1}
	// The arguments of the general function, for several locks, StaleAfter
	// and the checks of a waiting caller; a single lock's first call needs
	// none.
	args := func() []any {
		return []any{textArray(a.names), req.Ref.String(), req.Kind, micros(req.TTL), micros(req.Hold),
			req.Counted, req.Wait, a.op, int64(0), micros(s.cfg.waiterTTL), micros(max(req.StaleAfter, 0)), s.d.node}
	}
	call := func(q string, args []any) ([]arow, error) {
		var rows []arow
		err := s.retry(ctx, false, func() error {
			var err error
			rows, err = s.callAcquireQ(ctx, q, args)
			if err != nil && !notSent(err) {
				a.reached = true
			}
			return err
		})
		return rows, err
	}
	var rows []arow
	var err error
	if len(a.names) == 1 && req.StaleAfter <= 0 {
		length, back := lease(req.TTL, req.Hold)
		ref := req.Ref.String()
		many := s.fast.isMany(req.Name)
		// (an event of a slot in the arrays needs the lock's counts: the
		// slow statement, which grants there too)
		if s.fast.is(req.Name) && (!many || req.Events == nil) {
			// The lock was last seen fast (see fastHints): one UPDATE of
			// its row grants it when it is free, or one of its free slots.
			q, fast := s.q.acquireOne, []any{req.Name, ref, req.Kind, micros(req.TTL), micros(req.Hold), a.op, length, back}
			switch {
			case many:
				q = s.q.acquireMany
			case req.Events != nil:
				q, fast = s.q.acquireOneEv, append(fast, patterns(req.Name))
			}
			err = s.retry(ctx, false, func() error {
				rows = rows[:0]
				err := s.c.query(ctx, q, fast, func(scan func(...any) error) error {
					rows = append(rows, arow{ev: "granted", idx: 1, lock: req.Name, running: 1, ref: ref, kind: req.Kind,
						ttl: micros(req.TTL), hold: micros(req.Hold)})
					p := &rows[len(rows)-1]
					if req.Events != nil {
						return scan(&p.token, &p.at, &p.expires, &p.slots, &p.seq)
					}
					return scan(&p.token, &p.at, &p.expires)
				})
				if err != nil && !notSent(err) {
					a.reached = true
				}
				return err
			})
		}
		if err == nil && len(rows) == 0 {
			one := []any{req.Name, ref, req.Kind, micros(req.TTL), micros(req.Hold), req.Counted, req.Wait,
				a.op, micros(s.cfg.waiterTTL), patterns(req.Name), length, back, s.d.node}
			var fast bool
			err = s.retry(ctx, false, func() error {
				var err error
				rows, fast, err = s.callAcquireSlow(ctx, one)
				if err != nil && !notSent(err) {
					a.reached = true
				}
				return err
			})
			if err == nil {
				if r := &rows[0]; r.ev == "queued" {
					s.fast.contended(req.Name)
				} else {
					s.fast.set(req.Name, fast)
				}
				if r := &rows[0]; r.slots > 0 {
					s.fast.setMany(req.Name, r.slots > 1)
				}
			}
		}
	} else {
		rows, err = call(s.q.check, args())
	}
	if err != nil {
		return store.Grant{}, s.abandon(ctx, a, err)
	}
	a.reached = true
	if rows[0].ev != "queued" {
		return s.outcome(ctx, a, rows)
	}
	s.emitRows(req.Events, &req, rows)
	w := &waiter{op: a.op, names: a.names, wake: make(chan struct{}, 1), up: make(chan struct{}, 1),
		handed: make(chan handoff, 1)}
	if !s.d.join(w) {
		return store.Grant{}, s.abandon(ctx, a, store.ErrClosed)
	}
	defer s.d.leave(w)
	s.d.queued(w, rows[0].ticket, slotsOf(rows))
	wargs := args()
	wargs[8] = rows[0].ticket
	delay := time.Millisecond // the next pause while polling
	var hint time.Duration    // until the next expiry of a blocking lease
	// The first check: a head of this node's queue keeps a timer (see
	// rearm); a grant a release makes for it meanwhile comes by
	// notification, also one that came before it was registered.
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	s.rearm(timer, w, delay, 0)
	for {
		select {
		case <-ctx.Done():
			return store.Grant{}, s.abandon(ctx, a, ctx.Err())
		case <-s.d.done:
			return store.Grant{}, s.abandon(ctx, a, store.ErrClosed)
		case h := <-w.handed:
			// A release granted it: the notification carries the grant. A
			// release of this store that may have made it emits first.
			s.d.tookGrant(a.names[0], req.Ref.String())
			s.d.afterReleases(ctx, a.names[0])
			return s.outcome(ctx, a, []arow{{ev: "granted", idx: 1, lock: a.names[0], slots: int32(h.slots),
				running: int32(h.running), waiting: int32(h.waiting), ref: req.Ref.String(), kind: req.Kind,
				token: h.token, at: h.at, expires: h.expires, dur: h.waited, ticket: h.ticket, ttl: micros(req.TTL),
				hold: micros(req.Hold), seq: h.seq}})
		case <-w.up:
			// It may have become a head of this node's queue: a head keeps
			// a timer, and a release hands it its slot.
			s.rearm(timer, w, delay, hint)
			continue
		case <-w.wake:
		case <-timer.C:
			delay = min(delay*2, s.cfg.poll)
		}
		rows, err := s.poll(ctx, wargs)
		if err != nil {
			return store.Grant{}, s.abandon(ctx, a, err)
		}
		switch r := &rows[0]; r.ev {
		case "waiting":
			s.d.setSlots(w, r.lock, int(r.slots))
			hint = 0
			if r.expires > 0 && r.at > 0 {
				hint = time.Duration(r.expires-r.at)*time.Microsecond + time.Millisecond
			}
			s.rearm(timer, w, delay, hint)
			continue
		case "gone":
			// Our place in the queue expired (this process paused longer
			// than the waiter TTL): queue again, at the back.
			wargs[8] = int64(0)
			rows, err = s.poll(ctx, wargs)
			if err != nil {
				return store.Grant{}, s.abandon(ctx, a, err)
			}
			if rows[0].ev == "queued" {
				s.emitRows(req.Events, &req, rows)
				wargs[8] = rows[0].ticket
				s.d.queued(w, rows[0].ticket, slotsOf(rows))
				delay = time.Millisecond
				s.rearm(timer, w, delay, 0)
				continue
			}
		}
		if len(a.names) == 1 && rows[0].ev == "granted" {
			s.d.tookGrant(a.names[0], req.Ref.String()) // maybe a handoff it missed
			s.d.afterReleases(ctx, a.names[0])          // as for a handoff
		}
		return s.outcome(ctx, a, rows)
	}
}

// poll runs a check of a waiter; it is safe to run again whatever became
// of an earlier run (a grant whose answer was lost is found by the next).
func (s *Store) poll(ctx context.Context, args []any) ([]arow, error) {
	var rows []arow
	err := s.retry(ctx, true, func() error {
		var err error
		rows, err = s.callAcquireQ(ctx, s.q.check, args)
		return err
	})
	return rows, err
}

// listenPoll is DefaultListenPoll but in tests.
var listenPoll = func() *atomic.Int64 {
	var v atomic.Int64
	v.Store(int64(DefaultListenPoll))
	return &v
}()

// rearm sets the timer of waiter w: none when w is not at the head of this
// node's queue (the waiters ahead wake it as they leave), the poll delay
// while no LISTEN connection is up, else DefaultListenPoll or until the
// next expiry of a blocking lease.
func (s *Store) rearm(t *time.Timer, w *waiter, delay, hint time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	if !s.d.head(w) {
		return
	}
	if s.d.listening.Load() {
		delay = time.Duration(listenPoll.Load())
		if hint > 0 && hint < delay {
			delay = hint
		}
	}
	t.Reset(delay)
}

func slotsOf(rows []arow) map[string]int {
	m := make(map[string]int, len(rows))
	for _, r := range rows {
		m[r.lock] = int(r.slots)
	}
	return m
}

// outcome turns the final rows of an acquisition into a grant or an error.
func (s *Store) outcome(ctx context.Context, a *acquisition, rows []arow) (store.Grant, error) {
	req := a.req
	switch r := &rows[0]; r.ev {
	case "notfound":
		return store.Grant{}, store.NotFound(r.lock)
	case "refused":
		e := &store.BusyError{Lock: r.lock, Queued: r.queued}
		if !r.queued {
			e.Kind, e.Ref, e.Expires = r.kind, r.ref, fromMicros(r.expires)
		}
		emit(req.Events, store.Event{Type: store.EventRefused, Lock: r.lock, Slots: int(r.slots), Running: int(r.running),
			Waiting: int(r.waiting), Holder: e.Kind, Time: fromMicros(r.at)})
		return store.Grant{}, e
	case "cancelled":
		return store.Grant{}, s.abandon(ctx, a, errors.New("pgstore: acquisition cancelled"))
	}
	g := store.Grant{Ref: req.Ref, Kind: req.Kind, TTL: req.TTL, Hold: req.Hold, Reentered: true}
	n := 0
	for i := range rows {
		r := &rows[i]
		if r.ev != "granted" && r.ev != "reentered" {
			continue
		}
		l := store.Lock{Name: r.lock, Token: r.token}
		exp := fromMicros(r.expires)
		if r.ev == "granted" {
			g.Reentered = false
		}
		if n == 0 {
			g.Lock, g.Acquired, g.Expires = l, fromMicros(r.at), exp
		} else {
			g.More = append(g.More, l)
			if !exp.IsZero() && (g.Expires.IsZero() || exp.Before(g.Expires)) {
				g.Expires = exp
			}
		}
		n++
	}
	if n != len(a.names) {
		return store.Grant{}, s.abandon(ctx, a, fmt.Errorf("pgstore: acquire granted %d of %d locks", n, len(a.names)))
	}
	if g.Reentered && len(a.names) == 1 {
		g.Kind, g.TTL, g.Hold = rows[len(rows)-1].kind, time.Duration(rows[len(rows)-1].ttl)*time.Microsecond,
			time.Duration(rows[len(rows)-1].hold)*time.Microsecond
	}
	s.emitRows(req.Events, req, rows)
	return g, nil
}

// emitRows emits the events an acquire's rows stand for.
func (s *Store) emitRows(ev store.Emitter, req *store.AcquireRequest, rows []arow) {
	for i := range rows {
		r := &rows[i]
		e := store.Event{Lock: r.lock, Slots: int(r.slots), Running: int(r.running), Waiting: int(r.waiting),
			Ref: r.ref, Kind: r.kind, Token: r.token, Time: fromMicros(r.at), Seq: uint64(r.seq)}
		switch r.ev {
		case "expired":
			e.Type, e.Held = store.EventExpired, time.Duration(r.dur)*time.Microsecond
			s.ended(r.lock, r.ref, r.token, fmt.Errorf("%w: taken over after its TTL", store.ErrLeaseLost))
		case "granted":
			e.Type, e.Waited = store.EventAcquired, time.Duration(r.dur)*time.Microsecond
		case "queued":
			e.Type = store.EventWaiting
		default:
			continue
		}
		emit(ev, e)
	}
}

// abandon gives up acquisition a after err (the context ended, the store
// closed, the connection failed, …): unless none of its statements reached
// the server, whatever they may still do or have done is undone (a bounded
// number of tries), so no slot is leaked and no place in the queue is
// kept. It returns ctx's error when ctx ended, store.ErrClosed when the
// store closed, else err (matching ErrUnreachable for a connection that
// could not be had back).
func (s *Store) abandon(ctx context.Context, a *acquisition, err error) error {
	switch {
	case ctx.Err() != nil:
		err = ctx.Err()
	case errors.Is(err, store.ErrClosed):
		err = store.ErrClosed
	default:
		err = unreachable(err)
	}
	if !a.reached {
		return err // nothing reached the server
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var rows []rrow
	uerr := s.retry(uctx, true, func() error {
		var e error
		rows, e = s.callRelease(uctx, s.q.undo, []any{textArray(a.names), a.req.Ref.String(), a.op})
		return e
	})
	if uerr != nil {
		// Its waiter row, if any, would live as long as this store's
		// node: the heartbeat tries again.
		s.d.undoLater(a.op)
		if errors.Is(err, store.ErrClosed) || ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("%w (a slot it may have been granted expires with its TTL)", err)
	}
	s.emitReleased(a.req.Events, rows, fmt.Errorf("%w: granted while its acquisition was abandoned", store.ErrLeaseLost))
	return err
}

// rrow is one result row of the release and undo functions, with the
// event's Seq.
type rrow struct {
	ev                      string
	idx                     int32
	lock                    string
	slots, running, waiting int32
	ref, kind               string
	token, at, dur          int64
	seq                     int64
}

func (s *Store) callRelease(ctx context.Context, q string, args []any) ([]rrow, error) {
	var out []rrow
	err := s.c.query(ctx, q, args, func(scan func(...any) error) error {
		var r rrow
		if err := scan(&r.ev, &r.idx, &r.lock, &r.slots, &r.running, &r.waiting, &r.ref, &r.kind, &r.token, &r.at, &r.dur,
			&r.seq); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// releaseOne releases a lease of one lock: one UPDATE of the lock's row
// when the lock was last seen fast (see fastHints) and its holder is there,
// else release_one(), which settles every case.
func (s *Store) releaseOne(ctx context.Context, h *store.Handle, events bool) ([]rrow, error) {
	ref := h.Ref.String()
	many := s.fast.isMany(h.Name)
	if s.fast.is(h.Name) && (!many || !events) {
		var rows []rrow
		q, args := s.q.releaseOne, []any{h.Name, h.Token, ref}
		switch {
		case many:
			q = s.q.releaseMany
		case events:
			q, args = s.q.releaseOneEv, []any{h.Name, h.Token, ref, patterns(h.Name)}
		}
		err := s.c.query(ctx, q, args, func(scan func(...any) error) error {
			rows = append(rows, rrow{ev: "released", idx: 1, lock: h.Name, ref: ref})
			r := &rows[len(rows)-1]
			return scan(&r.kind, &r.token, &r.at, &r.dur, &r.slots, &r.seq)
		})
		if err != nil || len(rows) > 0 {
			return rows, err
		}
		// Its row was taken from under the hint: another caller queued,
		// or took another slot.
		s.fast.contended(h.Name)
	}
	pats := "{}"
	if events {
		pats = patterns(h.Name)
	}
	rows, err := s.callRelease(ctx, s.q.releaseSlow, []any{h.Name, h.Token, ref, events, pats, s.d.node})
	if err != nil {
		return nil, err
	}
	if len(rows) > 0 && rows[0].ev == "released" && rows[0].running == 0 && rows[0].waiting == 0 {
		s.fast.set(h.Name, true) // nothing left: the lock's row is fast again
	}
	// Grants this release made for this store's waiters (migration 008):
	// committed, since the statement's answer came after its commit.
	// A row 'fast': the lock's row stays fast, its slots in its arrays
	// (migration 009).
	return slices.DeleteFunc(rows, func(r rrow) bool {
		switch r.ev {
		case "handed":
			s.d.notified(r.ref)
		case "fast":
			s.fast.set(h.Name, true)
		default:
			return false
		}
		return true
	}), nil
}

func (s *Store) emitReleased(ev store.Emitter, rows []rrow, reason error) {
	for i := range rows {
		if r := &rows[i]; r.ev == "released" {
			s.ended(r.lock, r.ref, r.token, reason)
			emit(ev, store.Event{Type: store.EventReleased, Lock: r.lock, Slots: int(r.slots), Running: int(r.running),
				Waiting: int(r.waiting), Ref: r.ref, Kind: r.kind, Token: r.token, Held: time.Duration(r.dur) * time.Microsecond,
				Time: fromMicros(r.at), Seq: uint64(r.seq)})
		}
	}
}

func handleArgs(h *store.Handle) (names, tokens string) {
	var ns []string
	var ts []int64
	h.Each(func(l store.Lock) {
		ns = append(ns, l.Name)
		ts = append(ts, l.Token)
	})
	return textArray(ns), intArray(ts)
}

// undefined returns store.NotFound for the first lock of h that no
// definition covers, nil when each is covered. It runs only after a call
// found h not held: the common paths pay nothing for it.
func (s *Store) undefined(ctx context.Context, h *store.Handle) error {
	names, _ := handleArgs(h)
	var name string
	err := s.retry(ctx, true, func() error { return queryOne(ctx, s.c, s.q.undefined, []any{names}, &name) })
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return store.NotFound(name)
}

// Release implements store.Store in one statement.
func (s *Store) Release(ctx context.Context, h store.Handle, ev store.Emitter) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if ev != nil && len(h.More) == 0 {
		// A waiter of this store that this release hands the lock to
		// emits its acquired event after this release's event.
		defer s.d.releasing(h.Name)()
	}
	var rows []rrow
	err := s.retry(ctx, false, func() error {
		var err error
		if len(h.More) == 0 {
			rows, err = s.releaseOne(ctx, &h, ev != nil)
		} else {
			names, tokens := handleArgs(&h)
			rows, err = s.callRelease(ctx, s.q.release, []any{names, tokens, h.Ref.String(), nil, ev != nil})
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: release: %w", err)
	}
	if len(rows) > 0 && rows[0].ev == "notfound" {
		return store.NotFound(rows[0].lock)
	}
	reason := store.ErrReleased
	if h.Token == 0 {
		reason = fmt.Errorf("%w: released by another caller naming its ref", store.ErrLeaseLost)
	}
	s.emitReleased(ev, rows, reason)
	var missing []string
	for _, r := range rows {
		if r.ev == "notheld" {
			missing = append(missing, fmt.Sprintf("%q", r.lock))
		}
	}
	if len(missing) > 0 {
		s.lostHandle(&h, "not held when its holder released it")
	}
	switch {
	case len(missing) == len(rows):
		return store.ErrNotHeld
	case len(missing) > 0:
		return fmt.Errorf("%w: %s", store.ErrNotHeld, strings.Join(missing, ", "))
	}
	return nil
}

// ReleaseStale implements store.Store in one statement.
func (s *Store) ReleaseStale(ctx context.Context, h store.Handle, staleAfter time.Duration, ev store.Emitter) (bool, error) {
	if err := s.check(ctx); err != nil {
		return false, err
	}
	names, tokens := handleArgs(&h)
	var rows []rrow
	err := s.retry(ctx, false, func() error {
		var err error
		rows, err = s.callRelease(ctx, s.q.release, []any{names, tokens, h.Ref.String(), micros(max(staleAfter, 0)), ev != nil})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("pgstore: release stale: %w", err)
	}
	if len(rows) > 0 && rows[0].ev == "notfound" {
		return false, store.NotFound(rows[0].lock)
	}
	s.emitReleased(ev, rows, fmt.Errorf("%w: released as stale", store.ErrLeaseLost))
	return len(rows) > 0, nil
}

// Keep implements store.Store in one statement.
func (s *Store) Keep(ctx context.Context, h store.Handle, ttl, hold time.Duration) (time.Time, error) {
	if err := s.check(ctx); err != nil {
		return time.Time{}, err
	}
	var ok bool
	var now, exp int64
	err := s.retry(ctx, true, func() error {
		if len(h.More) == 0 {
			length, back := lease(ttl, hold)
			err := queryOne(ctx, s.c, s.q.keepOne, []any{h.Name, h.Token, h.Ref.String(), micros(ttl), micros(hold), length, back},
				&ok, &now, &exp)
			if errors.Is(err, sql.ErrNoRows) {
				ok, err = false, nil
			}
			return err
		}
		names, tokens := handleArgs(&h)
		return queryOne(ctx, s.c, s.q.keep, []any{names, tokens, h.Ref.String(), micros(ttl), micros(hold)}, &ok, &now, &exp)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("pgstore: keep: %w", err)
	}
	if !ok {
		if err := s.undefined(ctx, &h); err != nil {
			return time.Time{}, err
		}
		s.lostHandle(&h, "taken over or released by another holder")
		return time.Time{}, store.ErrNotHeld
	}
	return fromMicros(exp), nil
}

// Held implements store.Store in one statement. A lease past its expiry
// is not held, taken over or not.
func (s *Store) Held(ctx context.Context, h store.Handle) (store.Status, error) {
	if err := s.check(ctx); err != nil {
		return store.Status{}, err
	}
	var held bool
	var now, renewed, exp int64
	q, args := s.q.heldOne, []any{h.Name, h.Token, h.Ref.String()}
	if len(h.More) > 0 {
		names, tokens := handleArgs(&h)
		q, args = s.q.held, []any{names, tokens, h.Ref.String()}
	}
	err := s.retry(ctx, true, func() error { return queryOne(ctx, s.c, q, args, &held, &now, &renewed, &exp) })
	if err != nil {
		return store.Status{}, fmt.Errorf("pgstore: held: %w", err)
	}
	held = held && (exp == 0 || exp > now)
	st := store.Status{Held: held, Now: fromMicros(now)}
	if held {
		st.Renewed, st.Expires = fromMicros(renewed), fromMicros(exp)
	} else if err := s.undefined(ctx, &h); err != nil {
		return store.Status{}, err
	}
	return st, nil
}

type jsonHolder struct {
	Ref      string `json:"ref"`
	Kind     string `json:"kind"`
	Token    int64  `json:"token"`
	Count    int    `json:"count"`
	Acquired int64  `json:"acquired"`
	Renewed  int64  `json:"renewed"`
	Expires  int64  `json:"expires"`
}

type jsonWaiter struct {
	Ref   string   `json:"ref"`
	Kind  string   `json:"kind"`
	Since int64    `json:"since"`
	Locks []string `json:"locks"`
}

func (s *Store) states(ctx context.Context, names any, detail bool) ([]store.State, error) {
	var out []store.State
	err := s.c.query(ctx, s.q.states, []any{names, detail}, func(scan func(...any) error) error {
		var st store.State
		var slots, running, waiting int32
		var now int64
		var holders, queue string
		if err := scan(&st.Name, &slots, &st.Family, &running, &waiting, &now, &holders, &queue); err != nil {
			return err
		}
		st.Slots, st.Running, st.Waiting, st.Now = int(slots), int(running), int(waiting), fromMicros(now)
		st.Leases = st.Running // every hold takes one slot here (weights: issue 21)
		if holders != "" {
			var hs []jsonHolder
			if err := json.Unmarshal([]byte(holders), &hs); err != nil {
				return err
			}
			for _, h := range hs {
				st.Holders = append(st.Holders, store.Holder{Ref: h.Ref, Kind: h.Kind, Token: h.Token, Count: h.Count, Weight: 1,
					Acquired: fromMicros(h.Acquired), Renewed: fromMicros(h.Renewed), Expires: fromMicros(h.Expires)})
			}
		}
		if queue != "" {
			var ws []jsonWaiter
			if err := json.Unmarshal([]byte(queue), &ws); err != nil {
				return err
			}
			for _, w := range ws {
				st.Queue = append(st.Queue, store.Waiter{Ref: w.Ref, Kind: w.Kind, Since: fromMicros(w.Since), Locks: w.Locks, Weight: 1})
			}
		}
		out = append(out, st)
		return nil
	})
	return out, err
}

// State implements store.Store in one statement.
func (s *Store) State(ctx context.Context, name string, detail bool) (store.State, error) {
	if err := s.check(ctx); err != nil {
		return store.State{}, err
	}
	sts, err := s.states(ctx, name, detail)
	if err != nil {
		return store.State{}, fmt.Errorf("pgstore: state of %q: %w", name, err)
	}
	if len(sts) == 0 {
		return store.State{}, store.NotFound(name)
	}
	return sts[0], nil
}

// List implements store.Store in one statement.
func (s *Store) List(ctx context.Context, detail bool) ([]store.State, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	sts, err := s.states(ctx, nil, detail)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list: %w", err)
	}
	sort.Slice(sts, func(i, j int) bool { return sts[i].Name < sts[j].Name })
	return sts, nil
}

// Guard implements store.Guarder: inside tx (a pgx.Tx or a *sql.Tx) it
// checks that h's ref still holds every lock of h (with h's tokens) and
// locks those holder rows (FOR KEY SHARE) until tx ends, so the lease cannot
// be taken over or released before tx commits; renewals go on. When the
// lease is lost the error matches store.ErrLeaseLost, and tx should be
// rolled back.
func (s *Store) Guard(ctx context.Context, tx any, h store.Handle) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	var c conn
	switch t := tx.(type) {
	case pgx.Tx:
		c = pgxConn{t}
	case *sql.Tx:
		c = sqlConn{q: t}
	default:
		return fmt.Errorf("%w: Guard needs a pgx.Tx or a *sql.Tx, not %T", store.ErrUnsupported, tx)
	}
	names, tokens := handleArgs(&h)
	args := []any{names, tokens, h.Ref.String()}
	// A hold in its lock's row becomes a holder row first, in a
	// transaction of the store's own (migration 006).
	err := s.retry(ctx, true, func() error { return queryOne(ctx, s.c, s.q.spillHeld, args, new(int64)) })
	if err != nil {
		return fmt.Errorf("pgstore: guard: %w", err)
	}
	var n int64
	if err := queryOne(ctx, c, s.q.guard, args, &n); err != nil {
		return fmt.Errorf("pgstore: guard: %w", err)
	}
	if want := 1 + len(h.More); int(n) != want {
		// In a REPEATABLE READ or SERIALIZABLE transaction that ran a
		// statement before Guard, the holder row may be newer than tx's
		// snapshot: moved there by this Guard, or by any operation that
		// took the lock's row since (a waiter queueing, another slot's
		// grant). A lease still held is then not lost.
		var iso string
		if err := queryOne(ctx, c, s.q.isolation, nil, &iso); err == nil && iso != "read committed" {
			if st, err := s.Held(ctx, h); err == nil && st.Held {
				return fmt.Errorf("%w: Guard of %q: the transaction's snapshot predates the lease's holder row; "+
					"call Guard before the first statement of a REPEATABLE READ or SERIALIZABLE transaction",
					store.ErrUnsupported, h.Name)
			}
		}
		return fmt.Errorf("%w: %q is no longer held by its ref (token %d)", store.ErrLeaseLost, h.Name, h.Token)
	}
	return nil
}
