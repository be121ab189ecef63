package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// arow is one result row of acquire_one(), check_one() and acquire(), with
// the event's Seq.
type arow struct {
	ev                      string
	idx                     int32
	lock                    string
	slots, running, waiting int32
	ref, kind               string
	token, at, expires, dur int64
	queued                  bool
	ticket, ttl, hold       int64
	weight                  int32 // the hold's (granted, reentered, expired), else the one asked
	seq                     int64
}

// scanAcquire runs q, a call of check_one() or acquire_one(), whose rows
// are acquire_row: their last column says whether the lock's row is fast
// after a grant (acquire_one()'s hint; false from check_one()).
func (s *Store) scanAcquire(ctx context.Context, q string, args []any) (rows []arow, fast bool, err error) {
	err = s.c.query(ctx, q, args, func(scan func(...any) error) error {
		var r arow
		if err := scan(&r.ev, &r.idx, &r.lock, &r.slots, &r.running, &r.waiting, &r.ref, &r.kind, &r.token,
			&r.at, &r.expires, &r.dur, &r.queued, &r.ticket, &r.ttl, &r.hold, &r.weight, &r.seq, &fast); err != nil {
			return err
		}
		rows = append(rows, r)
		return nil
	})
	if err == nil && len(rows) == 0 {
		err = errors.New("pgstore: acquire returned no row")
	}
	return rows, fast, err
}

// acquisition is one Acquire call.
type acquisition struct {
	req     *store.AcquireRequest
	names   []string
	op      int64
	reached bool   // a statement of it may have reached the server
	unpend  func() // ends its pending mark (dispatcher.pend), if it has one
}

// Acquire implements store.Store. A try, a grant and a refusal are one
// statement each, and so is every check of a waiting caller; when the
// store's hint of the lock is stale (it saw the lock fast, and the bare
// UPDATE finds it held, queued or spilled) the first step is two: the bare
// UPDATE, which changes nothing, then acquire_one() (see fastHints). A waiter is
// woken by a notification when its lock may have a slot for it (see
// WithListenDSN), and checks again on a timer: its node's heads of queue
// every DefaultListenPoll or at the next expiry of a blocking lease, every
// waiter after 1ms, 2ms, … up to WithPollInterval while the store has no
// LISTEN connection.
func (s *Store) Acquire(ctx context.Context, req store.AcquireRequest) (store.Grant, error) {
	if err := s.check(ctx); err != nil {
		return store.Grant{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Grant{}, err
	}
	if req.Wait {
		// A waiting acquisition may queue: Close waits for it to end,
		// its place in the queue taken out, before it closes the pool.
		if !s.d.enter() {
			return store.Grant{}, store.ErrClosed
		}
		defer s.d.active.Done()
	}
	a := &acquisition{req: &req, names: req.Names(), op: rand.Int64N(1<<62) + 1}
	rows, err := s.firstTry(ctx, a)
	if a.unpend != nil {
		defer a.unpend()
	}
	if err != nil {
		return store.Grant{}, s.abandon(ctx, a, err)
	}
	a.reached = true
	if ctx.Err() != nil {
		// The context ended while the statement was in flight: even a
		// grant the server answered is given back (a cancelled wait for
		// synchronous replication commits only locally, see Keep), as a
		// slot granted while a waiting caller is cancelled is.
		return store.Grant{}, s.abandon(ctx, a, ctx.Err())
	}
	if rows[0].ev != "queued" {
		return s.outcome(ctx, a, rows)
	}
	return s.wait(ctx, a, rows)
}

// firstTry sends an acquisition's first statement: for one lock without
// StaleAfter, the bare UPDATE when the lock was last seen fast and then,
// when that granted nothing, acquire_one(); otherwise check_one()
// without a ticket.
func (s *Store) firstTry(ctx context.Context, a *acquisition) ([]arow, error) {
	if len(a.names) > 1 || a.req.StaleAfter > 0 {
		a.unpend = s.d.pend(a.op)
		args := s.checkOneArgs(a, 0)
		var rows []arow
		err := s.attempt(ctx, a, func() (err error) {
			rows, _, err = s.scanAcquire(ctx, s.q.checkOne, args.values())
			return err
		})
		return rows, err
	}
	rows, err := s.acquireFast(ctx, a)
	if err != nil || len(rows) > 0 {
		return rows, err
	}
	a.unpend = s.d.pend(a.op)
	return s.acquireOne(ctx, a)
}

// attempt runs f, a statement of acquisition a, with the store's retries,
// and notes when it may have reached the server (abandon then undoes it).
func (s *Store) attempt(ctx context.Context, a *acquisition, f func() error) error {
	return s.retry(ctx, false, func() error {
		err := f()
		if err != nil && !notSent(err) {
			a.reached = true
		}
		return err
	})
}

// acquireFast grants a lock the store last saw fast (see fastHints) by
// one UPDATE of its row: acquire_fast.sql (with the event's columns, withEvents, with
// events), acquire_slot.sql for a lock of several slots, or
// acquire_weighted.sql for a weighted request. No rows: not granted,
// nothing changed.
func (s *Store) acquireFast(ctx context.Context, a *acquisition) ([]arow, error) {
	req := a.req
	if !s.fast.is(req.Name) {
		return nil, nil
	}
	if req.Weighted() {
		return s.acquireWeighted(ctx, a)
	}
	if s.fast.isWeightedInRow(req.Name) {
		// (a load, not a store, on the hot path: no cache line shared by
		// every caller written each time)
		s.fast.setWeightedInRow(req.Name, false)
	}
	many := s.fast.isMany(req.Name)
	// (an event of a slot in the arrays needs the lock's counts:
	// acquire_one(), which grants there too)
	if many && req.Events != nil {
		return nil, nil
	}
	length, back := lease(req.TTL, req.Hold)
	ref := req.Ref.String()
	fa := fastArgs{name: req.Name, ref: ref, kind: req.Kind, ttl: micros(req.TTL), hold: micros(req.Hold), op: a.op,
		lease: length, back: back}
	q, args := s.q.acquireFast, fa.values()
	switch {
	case many:
		q = s.q.acquireSlot
	case req.Events != nil:
		q, args = s.q.acquireFastEvents, append(args, patterns(req.Name))
	}
	var rows []arow
	err := s.attempt(ctx, a, func() error {
		rows = rows[:0]
		return s.c.query(ctx, q, args, func(scan func(...any) error) error {
			rows = append(rows, arow{ev: "granted", idx: 1, lock: req.Name, running: 1, ref: ref, kind: req.Kind,
				ttl: micros(req.TTL), hold: micros(req.Hold), weight: 1})
			p := &rows[len(rows)-1]
			if req.Events != nil {
				return scan(&p.token, asTime(&p.at), asTime(&p.expires), &p.slots, &p.seq)
			}
			return scan(&p.token, asTime(&p.at), asTime(&p.expires))
		})
	})
	return rows, err
}

// acquireWeighted grants a weighted request of a lock the store last saw
// fast by one UPDATE of its row, when the row holds nothing:
// acquire_weighted.sql (with the event's columns, withEvents, with
// events). The hold is the row's holder in scalar mode, of the weight the
// statement returns (the lock's slots for WeightAll); the row held nothing
// else, so the slots in use are that weight. No rows: not granted, nothing
// changed.
func (s *Store) acquireWeighted(ctx context.Context, a *acquisition) ([]arow, error) {
	req := a.req
	length, back := lease(req.TTL, req.Hold)
	ref := req.Ref.String()
	fa := fastArgs{name: req.Name, ref: ref, kind: req.Kind, ttl: micros(req.TTL), hold: micros(req.Hold), op: a.op,
		lease: length, back: back}
	q, args := s.q.acquireWeighted, append(fa.values(), patterns(req.Name), int64(req.WeightOf(0)))
	if req.Events != nil {
		q = s.q.acquireWeightedEvents
	}
	var rows []arow
	err := s.attempt(ctx, a, func() error {
		rows = rows[:0]
		return s.c.query(ctx, q, args, func(scan func(...any) error) error {
			rows = append(rows, arow{ev: "granted", idx: 1, lock: req.Name, ref: ref, kind: req.Kind,
				ttl: micros(req.TTL), hold: micros(req.Hold)})
			p := &rows[len(rows)-1]
			var err error
			if req.Events != nil {
				err = scan(&p.token, asTime(&p.at), asTime(&p.expires), &p.weight, &p.slots, &p.seq)
			} else {
				err = scan(&p.token, asTime(&p.at), asTime(&p.expires), &p.weight)
			}
			p.running = p.weight
			return err
		})
	})
	if err == nil && len(rows) > 0 {
		s.fast.setWeightedInRow(req.Name, true)
	}
	return rows, err
}

// acquireOne sends acquire_one(), which settles every case of one lock,
// and notes what it says of the lock's row for the next call.
func (s *Store) acquireOne(ctx context.Context, a *acquisition) ([]arow, error) {
	req := a.req
	length, back := lease(req.TTL, req.Hold)
	args := acquireOneArgs{name: req.Name, ref: req.Ref.String(), kind: req.Kind, ttl: micros(req.TTL),
		hold: micros(req.Hold), counted: req.Counted, wait: req.Wait, op: a.op, wttl: micros(s.cfg.waiterTTL),
		pats: patterns(req.Name), lease: length, back: back, node: s.d.node, weight: int64(req.WeightOf(0)),
		sample: s.fast.samplePeek(a.names, time.Now().UnixNano())}
	q := s.q.acquireOne
	if !req.Wait {
		q = s.q.acquireOneTry // a refusal decided on the lock's row first
	}
	var rows []arow
	var fast bool
	err := s.attempt(ctx, a, func() (err error) {
		rows, fast, err = s.scanAcquire(ctx, q, args.values())
		return err
	})
	if err != nil {
		return nil, err
	}
	if r := &rows[0]; r.ev == "queued" {
		s.fast.contended(req.Name)
	} else {
		s.fast.set(req.Name, fast)
		if r.ev == "granted" {
			// a weighted grant that leaves the row fast is its scalar holder
			s.fast.setWeightedInRow(req.Name, fast && req.Weighted())
		}
	}
	if r := &rows[0]; r.slots > 0 {
		s.fast.setMany(req.Name, r.slots > 1 && r.slots <= slotModeMax)
	}
	return rows, nil
}

// checkOneArgs are the arguments of a's check_one(): ticket 0 for its
// first call, its place in the queue for the checks of its waiter.
func (s *Store) checkOneArgs(a *acquisition, ticket int64) checkOneArgs {
	req := a.req
	return checkOneArgs{names: textArray(a.names), ref: req.Ref.String(), kind: req.Kind, ttl: micros(req.TTL),
		hold: micros(req.Hold), counted: req.Counted, wait: req.Wait, op: a.op, ticket: ticket,
		wttl: micros(s.cfg.waiterTTL), stale: micros(max(req.StaleAfter, 0)), node: s.d.node, whole: req.ReenterAll,
		weights: weightsOf(req, len(a.names)), sample: s.fast.samplePeek(a.names, time.Now().UnixNano())}
}

// weightsOf is the weight asked of each of n locks of req, as an intArray.
func weightsOf(req *store.AcquireRequest, n int) string {
	ws := make([]int64, n)
	for i := range ws {
		ws[i] = int64(req.WeightOf(i))
	}
	return intArray(ws)
}

// wait waits for the grant of an acquisition that queued (rows: its
// queueing), checking when woken, when a release hands it the lock, or on
// its timer.
func (s *Store) wait(ctx context.Context, a *acquisition, rows []arow) (store.Grant, error) {
	req := a.req
	s.emitRows(req.Events, req, rows)
	w := &waiter{op: a.op, names: a.names, wake: make(chan struct{}, 1), up: make(chan struct{}, 1),
		handed: make(chan handoff, 1)}
	if !s.d.join(w) {
		return store.Grant{}, s.abandon(ctx, a, store.ErrClosed)
	}
	defer s.d.leave(w)
	s.d.queued(w, rows[0].ticket, slotsOf(rows))
	args := s.checkOneArgs(a, rows[0].ticket)
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
			return s.handedOver(ctx, a, h)
		case <-w.up:
			// It may have become a head of this node's queue: a head keeps
			// a timer, and a release hands it its slot.
			s.rearm(timer, w, delay, hint)
			continue
		case <-w.wake:
		case <-timer.C:
			delay = min(delay*2, s.cfg.poll)
		}
		rows, err := s.poll(ctx, &args)
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
			args.ticket = 0
			rows, err = s.poll(ctx, &args)
			if err != nil {
				return store.Grant{}, s.abandon(ctx, a, err)
			}
			if rows[0].ev == "queued" {
				s.emitRows(req.Events, req, rows)
				args.ticket = rows[0].ticket
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
		if ctx.Err() != nil {
			// Granted as ctx ended: see handedOver.
			return store.Grant{}, s.abandon(ctx, a, ctx.Err())
		}
		return s.outcome(ctx, a, rows)
	}
}

// handedOver returns the grant a release made for waiting acquisition a,
// which its notification (or the release's answer) carries. A release of
// this store that may have made it emits first. A grant taken as ctx ends
// is given back, and ctx's error returned.
func (s *Store) handedOver(ctx context.Context, a *acquisition, h handoff) (store.Grant, error) {
	req := a.req
	s.d.tookGrant(a.names[0], req.Ref.String())
	s.d.afterReleases(ctx, a.names[0])
	if ctx.Err() != nil {
		// The context ended before the grant was taken (the wait's select
		// may pick the handoff when both are ready): the caller was
		// cancelled first, so the slot goes back, as x/sync's semaphore
		// does (golang/go#63615).
		return store.Grant{}, s.abandon(ctx, a, ctx.Err())
	}
	return s.outcome(ctx, a, []arow{{ev: "granted", idx: 1, lock: a.names[0], slots: int32(h.slots),
		running: int32(h.running), waiting: int32(h.waiting), ref: req.Ref.String(), kind: req.Kind,
		token: h.token, at: h.at, expires: h.expires, dur: h.waited, ticket: h.ticket, ttl: micros(req.TTL),
		hold: micros(req.Hold), weight: int32(store.Need(req.WeightOf(0), int(h.slots))), seq: h.seq}})
}

// poll runs a check of a waiter; it is safe to run again whatever became
// of an earlier run (a grant whose answer was lost is found by the next).
func (s *Store) poll(ctx context.Context, args *checkOneArgs) ([]arow, error) {
	var rows []arow
	err := s.retry(ctx, true, func() (err error) {
		rows, _, err = s.scanAcquire(ctx, s.q.checkOne, args.values())
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
// while no LISTEN connection is up, else until the next expiry of a
// blocking lease, DefaultListenPoll at the most. (A heartbeat that finds a
// stale node wakes the heads: see beat.)
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
		s.refusals.refused(r.lock)
		// A refused row carries the lock's free slots in dur; one that
		// names the caller's own hold is a ReenterAll refusal, not about
		// slots.
		w := req.WeightOf(int(r.idx) - 1)
		e := &store.BusyError{Lock: r.lock}
		if r.ref == "" || r.ref != req.Ref.String() {
			e = store.Busy(r.lock, w, int(r.slots), int(r.slots)-int(r.dur))
		}
		e.Queued = r.queued
		if !r.queued {
			e.Kind, e.Ref, e.Expires = r.kind, r.ref, fromMicros(r.expires)
		}
		emit(req.Events, store.Event{Type: store.EventRefused, Lock: r.lock, Slots: int(r.slots), Running: int(r.running),
			Waiting: int(r.waiting), Holder: e.Kind, Weight: w, Time: fromMicros(r.at)})
		return store.Grant{}, e
	case "too_heavy":
		// More slots asked than the lock has: at once, or for a waiter
		// (ticket) after a Resize; its place in the queue is gone.
		return store.Grant{}, &store.WeightError{Lock: r.lock, Weight: req.WeightOf(int(r.idx) - 1), Slots: int(r.slots),
			Resized: r.ticket > 0}
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
			g.Lock, g.Acquired, g.Expires, g.Weight = l, fromMicros(r.at), exp, int(r.weight)
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
			Ref: r.ref, Kind: r.kind, Token: r.token, Weight: int(r.weight), Time: fromMicros(r.at), Seq: uint64(r.seq)}
		switch r.ev {
		case "expired":
			e.Type, e.Held = store.EventExpired, time.Duration(r.dur)*time.Microsecond
			// timed if due (samplePeek); the next in holdSampleEvery is not
			s.fast.sampleDue(r.lock, time.Now().UnixNano())
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
		rows, e = s.scanRelease(uctx, s.q.undo, []any{textArray(a.names), a.req.Ref.String(), a.op})
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
