package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// Define implements store.Store: a Reconcile of one entry.
func (s *Store) Define(ctx context.Context, name string, slots int, ev store.Emitter) (bool, error) {
	r, err := s.Reconcile(ctx, []store.Definition{{Name: name, Slots: slots}}, store.ReconcileOptions{}, ev)
	return len(r.Created) == 1, err
}

// define makes the definition name unless it exists with the same slots.
func (t *txn) define(name string, slots int, ev store.Emitter) (bool, error) {
	var have int
	found, err := t.queryRow("SELECT slots FROM defs WHERE name = ?", []any{name}, &have)
	if err != nil {
		return false, err
	}
	if found {
		if have != slots {
			return false, &store.ConflictError{Name: name, Slots: have, Requested: slots}
		}
		return false, nil
	}
	family := strings.HasSuffix(name, store.FamilySuffix)
	if err := t.exec("INSERT INTO defs (name, slots, family) VALUES (?, ?, ?)", name, slots, family); err != nil {
		return false, err
	}
	t.changed = true
	e := store.Event{Type: store.EventCreated, Lock: name, Slots: slots}
	if !family {
		l, err := t.load(name, ev)
		if err != nil {
			return false, err
		}
		e.Running, e.Waiting = l.used(), len(l.queue)
	}
	return true, t.emit(ev, e)
}

// Resize implements store.Store.
func (s *Store) Resize(ctx context.Context, name string, slots int, ev store.Emitter) error {
	if err := store.CheckDefinition(name, slots); err != nil {
		return err
	}
	return s.do(ctx, func(t *txn) error { return t.resize(name, slots, ev) })
}

// resize sets the slots of the definition name.
func (t *txn) resize(name string, slots int, ev store.Emitter) error {
	var have int
	var family bool
	found, err := t.queryRow("SELECT slots, family FROM defs WHERE name = ?", []any{name}, &have, &family)
	if err != nil {
		return err
	}
	if !found {
		return store.NotResizable(name)
	}
	if have == slots {
		return nil
	}
	if err := t.exec("UPDATE defs SET slots = ? WHERE name = ?", slots, name); err != nil {
		return err
	}
	t.changed = true
	e := store.Event{Type: store.EventResized, Lock: name, Slots: slots}
	if !family {
		l, err := t.load(name, ev)
		if err != nil {
			return err
		}
		e.Running, e.Waiting = l.used(), len(l.queue)
	}
	return t.emit(ev, e)
}

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, req store.AcquireRequest) (store.Grant, error) {
	var g store.Grant
	var ticket int64
	first := func(t *txn) error {
		locks, err := t.loadAll(req.Names(), req.Events)
		if err != nil {
			return err
		}
		ref := req.Ref.String()
		if req.ReenterAll {
			if err := t.partly(ref, locks, req.Events); err != nil {
				return err
			}
		}
		for i, l := range locks {
			if need := store.Need(req.WeightOf(i), l.slots); need > l.slots && l.find(ref, 0) < 0 {
				return &store.WeightError{Lock: l.name, Weight: need, Slots: l.slots}
			}
		}
		ok := true
		for i, l := range locks {
			if l.find(ref, 0) >= 0 {
				continue
			}
			n := l.ahead(len(l.queue)) + store.Need(req.WeightOf(i), l.slots)
			free, err := t.free(l, n, req.StaleAfter, req.Events)
			if err != nil {
				return err
			}
			if n > free {
				ok = false
				if !req.Wait {
					return t.refuse(l, req.WeightOf(i), req.Events)
				}
			}
		}
		if ok {
			g, err = t.grantAll(&req, locks, 0)
			return err
		}
		ticket, err = t.enqueue(&req, locks)
		return err
	}
	err := s.do(ctx, first)
	for err != nil && req.Wait && isBusy(err) && ctx.Err() == nil {
		// A caller that waits for a slot also waits out a database that
		// other processes' transactions keep busy past the busy timeout:
		// only its context bounds its wait.
		err = s.do(ctx, first)
	}
	if err != nil {
		// What first granted or queued was rolled back.
		return store.Grant{}, err
	}
	if ticket == 0 {
		return g, nil
	}
	return s.wait(ctx, &req, ticket)
}

// partly refuses a request of ref when ref holds some of locks but not all
// (see store.AcquireRequest.ReenterAll), naming the first it holds.
func (t *txn) partly(ref string, locks []*lk, ev store.Emitter) error {
	var first *lk
	n := 0
	for _, l := range locks {
		if l.find(ref, 0) >= 0 {
			if n++; first == nil {
				first = l
			}
		}
	}
	if n == 0 || n == len(locks) {
		return nil
	}
	h := &first.holders[first.find(ref, 0)]
	e := &store.BusyError{Lock: first.name, Kind: h.kind, Ref: h.ref, Expires: fromMicros(h.expires)}
	t.stat(first).refusals++
	if err := t.emit(ev, store.Event{Type: store.EventRefused, Lock: first.name, Slots: first.slots, Running: first.used(),
		Waiting: len(first.queue), Holder: e.Kind}); err != nil {
		return err
	}
	return e
}

func (t *txn) loadAll(names []string, ev store.Emitter) ([]*lk, error) {
	locks := make([]*lk, 0, len(names))
	for _, n := range names {
		l, err := t.load(n, ev)
		if err != nil {
			return nil, err
		}
		locks = append(locks, l)
	}
	return locks, nil
}

// enqueue adds req to the queue of every lock and returns its ticket.
func (t *txn) enqueue(req *store.AcquireRequest, locks []*lk) (int64, error) {
	me := t.s.me
	var ticket int64
	if _, err := t.queryRow(`INSERT INTO waiters (owner, ref, kind, locks, since, alive, pid, pstart, host)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING ticket`,
		[]any{t.s.id, req.Ref.String(), req.Kind, jsonList(req.Names()), t.now, t.now, me.pid, me.start, me.host},
		&ticket); err != nil {
		return 0, err
	}
	t.changed, t.s.queued = true, true
	for i, l := range locks {
		w := req.WeightOf(i)
		if err := t.exec("INSERT INTO queue (lock, ticket, weight) VALUES (?, ?, ?)", l.name, ticket, w); err != nil {
			return 0, err
		}
		l.queue = append(l.queue, ticket)
		if w != 1 {
			if l.asked == nil {
				l.asked = map[int64]int{}
			}
			l.asked[ticket] = w
		}
		if err := t.emit(req.Events, store.Event{Type: store.EventWaiting, Lock: l.name, Slots: l.slots,
			Running: l.used(), Waiting: len(l.queue), Ref: req.Ref.String(), Kind: req.Kind, Weight: w}); err != nil {
			return 0, err
		}
	}
	return ticket, nil
}

// pollResult is what one check of a waiter found.
type pollResult struct {
	g       store.Grant
	granted bool
	wake    int64 // µs: check again by then (0: no deadline)
	far     bool  // at least twice the slots of a lock wait ahead: no hurry
	pids    []int // processes of this host holding the locks: check again when one ends
}

// poll checks whether the waiter with *ticket can be granted, and grants
// it when so. A waiter whose row is gone (its lease ran out while this
// process was stopped) queues again at the back.
func (s *Store) poll(ctx context.Context, req *store.AcquireRequest, ticket *int64) (pollResult, error) {
	// A check on a snapshot first: of the waiters woken by a change, only
	// the one that can be granted (or that finds a row to clean up) takes
	// the write lock.
	r, err := s.pollWith(ctx, s.read, req, ticket)
	if errors.Is(err, errNeedWrite) {
		r, err = s.pollWith(ctx, s.do, req, ticket)
	}
	return r, err
}

func (s *Store) pollWith(ctx context.Context, run func(context.Context, func(*txn) error) error,
	req *store.AcquireRequest, ticket *int64) (pollResult, error) {
	var r pollResult
	was := *ticket
	err := run(ctx, func(t *txn) error {
		r, *ticket = pollResult{}, was // a try again after a busy database starts afresh
		var alive, since int64
		found, err := t.queryRow("SELECT alive, since FROM waiters WHERE ticket = ?", []any{*ticket}, &alive, &since)
		if err != nil {
			return err
		}
		wttl := s.cfg.waiterTTL.Microseconds()
		if found && alive+wttl <= t.now {
			if err := t.dropWaiter(*ticket); err != nil {
				return err
			}
			found = false
		}
		if found && t.now-alive >= wttl/3 {
			if err := t.exec("UPDATE waiters SET alive = ? WHERE ticket = ?", t.now, *ticket); err != nil {
				return err
			}
			alive = t.now
		}
		locks, err := t.loadAll(req.Names(), req.Events)
		if err != nil {
			return err
		}
		if !found {
			if *ticket, err = t.enqueue(req, locks); err != nil {
				return err
			}
			alive, since = t.now, t.now
		}
		r.wake = alive + wttl/3
		ref := req.Ref.String()
		for i, l := range locks {
			if w := req.WeightOf(i); w != store.WeightAll && w > l.slots && l.find(ref, 0) < 0 {
				// A Resize left the lock too small for this waiter.
				if err := t.dropWaiter(*ticket); err != nil {
					return err
				}
				return &store.WeightError{Lock: l.name, Weight: w, Slots: l.slots, Resized: true}
			}
		}
		ok := true
		for i, l := range locks {
			if l.find(ref, 0) >= 0 {
				continue
			}
			p := slices.Index(l.queue, *ticket)
			n := store.Need(req.WeightOf(i), l.slots)
			if p >= 0 {
				n += l.ahead(p)
			}
			free, err := t.free(l, n, req.StaleAfter, req.Events)
			if err != nil {
				return err
			}
			if p < 0 || n > free {
				ok = false
				if at := t.wakeAt(l, req.StaleAfter); at > 0 && at < r.wake {
					r.wake = at
				}
				if p >= 2*l.slots {
					r.far = true
				}
				for i := range l.holders {
					if h := &l.holders[i]; h.host == s.me.host && h.pid != s.me.pid && s.me.checks {
						r.pids = append(r.pids, h.pid)
					}
				}
			}
		}
		if !ok {
			return nil
		}
		if err := t.dropWaiter(*ticket); err != nil {
			return err
		}
		r.g, err = t.grantAll(req, locks, since)
		r.granted = err == nil
		return err
	})
	if err != nil {
		// Granted (or queued again) only if the transaction committed: a
		// grant whose COMMIT failed (the file could not be written) was
		// rolled back, and its token will be given to another; so was a
		// new ticket, whose number another waiter may get.
		r.g, r.granted, *ticket = store.Grant{}, false, was
	}
	return r, err
}

// wait waits in the queue with ticket until the request is granted, ctx
// ends or the store closes.
func (s *Store) wait(ctx context.Context, req *store.AcquireRequest, ticket int64) (store.Grant, error) {
	changed := s.changes() // before addWaiter: the poller's first read wakes us
	s.addWaiter()
	defer s.removeWaiter()
	near := false // counted in s.near
	defer func() {
		if near {
			s.near.Add(-1)
		}
	}()
	for {
		r, err := s.poll(ctx, req, &ticket)
		if near == r.far { // near changed
			near = !r.far
			if near {
				if s.near.Add(1) == 1 {
					select {
					case s.kick <- struct{}{}:
					default:
					}
				}
			} else {
				s.near.Add(-1)
			}
		}
		if r.granted {
			if ctx.Err() != nil {
				// Granted as ctx ended: the caller was cancelled first
				// (it cannot tell), so the grant goes back to the queue.
				h := r.g.Handle()
				_ = s.Release(context.WithoutCancel(ctx), h, req.Events)
				return store.Grant{}, ctx.Err()
			}
			return r.g, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return store.Grant{}, s.leave(ctx, ticket)
			}
			if isBusy(err) {
				// Still queued behind a busy database: look again.
				continue
			}
			_ = s.leaveQueue(ctx, ticket)
			return store.Grant{}, err
		}
		until := time.Until(time.UnixMicro(r.wake))
		wakeOn := changed
		if r.far {
			// Far from the head: changes are for others; look again
			// now and then.
			wakeOn = nil
			until = min(until, slowPoll)
		}
		wake := time.NewTimer(until)
		var pidTick <-chan time.Time
		var tk *time.Ticker
		if len(r.pids) > 0 && !r.far {
			tk = time.NewTicker(10 * time.Millisecond)
			pidTick = tk.C
		}
		stop := func() {
			if tk != nil {
				tk.Stop()
			}
			wake.Stop()
		}
	sleep:
		for {
			select {
			case <-wakeOn:
				break sleep
			case <-wake.C:
				break sleep
			case <-pidTick:
				if s.anyGone(r.pids) {
					break sleep
				}
			case <-ctx.Done():
				stop()
				return store.Grant{}, s.leave(ctx, ticket)
			case <-s.closing:
				stop()
				return store.Grant{}, store.ErrClosed
			}
		}
		stop()
		changed = s.changes()
	}
}

func (s *Store) anyGone(pids []int) bool {
	for _, pid := range pids {
		if st, exited, ok := startTime(pid); !ok || exited || st == 0 {
			return true
		}
	}
	return false
}

// leave takes a waiter whose caller gave up out of the queue and returns
// the caller's error.
func (s *Store) leave(ctx context.Context, ticket int64) error {
	if errors.Is(s.leaveQueue(ctx, ticket), store.ErrClosed) {
		return store.ErrClosed
	}
	return ctx.Err()
}

// leaveQueue deletes the waiter with ticket, whose caller gave up. When
// that fails (the file cannot be written now), the store's next write
// transaction deletes it: else the row would keep its place at the head of
// the queue until its waiter TTL ran out.
func (s *Store) leaveQueue(ctx context.Context, ticket int64) error {
	err := s.do(context.WithoutCancel(ctx), func(t *txn) error { return t.dropWaiter(ticket) })
	if err != nil && !errors.Is(err, store.ErrClosed) {
		s.mu.Lock()
		s.left = append(s.left, ticket)
		s.mu.Unlock()
	}
	return err
}

// checkNames reports the first name of h that no definition covers.
func (t *txn) checkNames(h *store.Handle) error {
	var err error
	h.Each(func(l store.Lock) {
		if err == nil {
			_, err = t.slotsOf(l.Name)
		}
	})
	return err
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, h store.Handle, ev store.Emitter) error {
	return s.do(ctx, func(t *txn) error {
		if err := t.checkNames(&h); err != nil {
			return err
		}
		return t.release(&h, ev, endByRef)
	})
}

// release releases h's holds. A lock of h named without a token (0) is
// released as ended by another caller, why (endByRef, endStale): its
// holder's process is told (see watchEnded).
func (t *txn) release(h *store.Handle, ev store.Emitter, why string) error {
	var missing []string
	freed := 0
	var err error
	ref := h.Ref.String()
	h.Each(func(x store.Lock) {
		if err != nil {
			return
		}
		var l *lk
		if l, err = t.load(x.Name, ev); err != nil {
			return
		}
		i := l.find(ref, x.Token)
		if i < 0 {
			missing = append(missing, fmt.Sprintf("%q", x.Name))
			return
		}
		freed++
		if hd := &l.holders[i]; hd.count > 1 {
			hd.count--
			err = t.exec("UPDATE holders SET count = count - 1 WHERE lock = ? AND ref = ?", l.name, ref)
			return
		}
		if x.Token != 0 {
			err = t.drop(l, i, ev, store.EventReleased, store.ErrReleased)
			return
		}
		err = t.dropTelling(l, i, ev, store.EventReleased, endReason(why, l.name), why)
	})
	switch {
	case err != nil:
		return err
	case freed == 0:
		return store.ErrNotHeld
	case len(missing) > 0:
		return fmt.Errorf("%w: %s", store.ErrNotHeld, strings.Join(missing, ", "))
	}
	return nil
}

// Keep implements store.Store. A lease past its expiry that nobody took
// over is still its holder's, and is renewed.
func (s *Store) Keep(ctx context.Context, h store.Handle, ttl, hold time.Duration) (time.Time, error) {
	var exp time.Time
	err := s.do(ctx, func(t *txn) error {
		exp = time.Time{}
		if err := t.checkNames(&h); err != nil {
			return err
		}
		var rows []*hrow
		var locks []*lk
		var err error
		ref := h.Ref.String()
		h.Each(func(x store.Lock) {
			if err != nil {
				return
			}
			var l *lk
			if l, err = t.load(x.Name, nil); err != nil {
				return
			}
			if i := l.find(ref, x.Token); i >= 0 {
				rows, locks = append(rows, &l.holders[i]), append(locks, l)
			}
		})
		if err != nil {
			return err
		}
		if len(rows) != 1+len(h.More) {
			t.ends = append(t.ends, ending{h.Name, ref, h.Token, lostBecause("taken over or released by another holder")})
			return store.ErrNotHeld
		}
		for i, hd := range rows {
			if err := t.renew(locks[i], hd, ttl, hold); err != nil {
				return err
			}
			if e := fromMicros(hd.expires); !e.IsZero() && (exp.IsZero() || e.Before(exp)) {
				exp = e
			}
		}
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	return exp, nil
}

// Held implements store.Store.
func (s *Store) Held(ctx context.Context, h store.Handle) (store.Status, error) {
	var st store.Status
	err := s.readOrWrite(ctx, func(t *txn) error {
		if err := t.checkNames(&h); err != nil {
			return err
		}
		st = store.Status{Held: true, Now: fromMicros(t.now)}
		var err error
		first := true
		ref := h.Ref.String()
		h.Each(func(x store.Lock) {
			if err != nil {
				return
			}
			var l *lk
			if l, err = t.load(x.Name, nil); err != nil {
				return
			}
			i := l.find(ref, x.Token)
			if i < 0 {
				st.Held = false
				return
			}
			hd := &l.holders[i]
			if !t.live(hd) {
				st.Expired = true // past its expiry, though nobody has taken it over yet
			}
			e := fromMicros(hd.expires)
			if first {
				st.Renewed, st.Expires, first = fromMicros(hd.renewed), e, false
			} else if !e.IsZero() && (st.Expires.IsZero() || e.Before(st.Expires)) {
				st.Expires = e
			}
		})
		if !st.Held {
			st.Expired, st.Renewed, st.Expires = false, time.Time{}, time.Time{}
		}
		return err
	})
	return st, err
}

// ReleaseStale implements store.Store.
func (s *Store) ReleaseStale(ctx context.Context, h store.Handle, staleAfter time.Duration, ev store.Emitter) (bool, error) {
	var ok bool
	err := s.do(ctx, func(t *txn) error {
		if err := t.checkNames(&h); err != nil {
			return err
		}
		l, err := t.load(h.Name, ev)
		if err != nil {
			return err
		}
		i := l.find(h.Ref.String(), h.Token)
		if i < 0 {
			return nil
		}
		hd := &l.holders[i]
		if hd.expires == 0 {
			return nil // a lease with no TTL is never stale
		}
		stale := hd.expires <= t.now
		if staleAfter > 0 {
			stale = hd.renewed+staleAfter.Microseconds() <= t.now
		}
		if !stale {
			return nil
		}
		all := h
		all.Token = 0 // the rest go whatever their tokens, as long as the ref holds them
		all.More = make([]store.Lock, len(h.More))
		for i, m := range h.More {
			all.More[i] = store.Lock{Name: m.Name}
		}
		if err := t.release(&all, ev, endStale); err != nil && !errors.Is(err, store.ErrNotHeld) {
			return err
		}
		ok = true
		return nil
	})
	return ok, err
}

// State implements store.Store.
func (s *Store) State(ctx context.Context, name string, detail bool) (store.State, error) {
	var st store.State
	err := s.readOrWrite(ctx, func(t *txn) error {
		var err error
		st, err = t.state(name, detail)
		return err
	})
	return st, err
}

// readOrWrite runs f on a snapshot, and again in a write transaction when
// it found something to change (a row of a dead process to delete).
func (s *Store) readOrWrite(ctx context.Context, f func(t *txn) error) error {
	err := s.read(ctx, f)
	if errors.Is(err, errNeedWrite) {
		err = s.do(ctx, f)
	}
	return err
}

func (t *txn) state(name string, detail bool) (store.State, error) {
	if strings.HasSuffix(name, store.FamilySuffix) {
		var slots int
		found, err := t.queryRow("SELECT slots FROM defs WHERE name = ? AND family", []any{name}, &slots)
		if err != nil {
			return store.State{}, err
		}
		if !found {
			return store.State{}, store.NotFound(name)
		}
		return store.State{Name: name, Slots: slots, Family: true, Now: fromMicros(t.now)}, nil
	}
	l, err := t.load(name, nil)
	if err != nil {
		return store.State{}, err
	}
	st := store.State{Name: name, Slots: l.slots, Waiting: len(l.queue), Leases: len(l.holders), Now: fromMicros(t.now)}
	for i := range l.holders {
		if t.live(&l.holders[i]) {
			st.Running += l.holders[i].weight
		} else {
			st.Expired += l.holders[i].weight
		}
	}
	if !detail {
		return st, nil
	}
	for _, h := range l.holders {
		st.Holders = append(st.Holders, store.Holder{Ref: h.ref, Kind: h.kind, Token: h.token, Count: h.count, Weight: h.weight,
			Acquired: fromMicros(h.acquired), Renewed: fromMicros(h.renewed), Expires: fromMicros(h.expires),
			Hold: time.Duration(h.hold) * time.Microsecond})
	}
	for _, ticket := range l.queue {
		var w store.Waiter
		var since int64
		var locks string
		found, err := t.queryRow("SELECT ref, kind, since, locks FROM waiters WHERE ticket = ?", []any{ticket},
			&w.Ref, &w.Kind, &since, &locks)
		if err != nil {
			return store.State{}, err
		}
		if !found {
			continue
		}
		w.Since, w.Weight = fromMicros(since), l.asks(ticket)
		if err := json.Unmarshal([]byte(locks), &w.Locks); err != nil {
			return store.State{}, &dbError{fmt.Errorf("waiter %d: %w", ticket, err)}
		}
		st.Queue = append(st.Queue, w)
	}
	return st, nil
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, detail bool) ([]store.State, error) {
	var out []store.State
	err := s.readOrWrite(ctx, func(t *txn) error {
		var names []string
		err := t.query(`SELECT name FROM defs UNION SELECT lock FROM holders UNION SELECT lock FROM queue`, nil,
			func(scan func(...any) error) error {
				var n string
				if err := scan(&n); err != nil {
					return err
				}
				names = append(names, n)
				return nil
			})
		if err != nil {
			return err
		}
		sort.Strings(names)
		out = make([]store.State, 0, len(names))
		for _, n := range names {
			st, err := t.state(n, detail)
			if err != nil {
				if isDB(err) || errors.Is(err, errNeedWrite) {
					return err
				}
				continue // a row of a lock whose definition went away
			}
			if !st.Family && !isDefined(t, n) && st.Running == 0 && st.Expired == 0 && st.Waiting == 0 {
				continue // a family member no longer in use (its rows went on the way)
			}
			out = append(out, st)
		}
		return nil
	})
	return out, err
}

func isDefined(t *txn, name string) bool {
	var x int
	found, _ := t.queryRow("SELECT 1 FROM defs WHERE name = ?", []any{name}, &x)
	return found
}

// Guard implements store.Guarder: inside tx, a *sql.Tx of a database/sql
// connection to the same file (driver "sqlite", modernc.org/sqlite), it
// checks that h's ref still holds every lock of h (with h's tokens) —
// past its expiry or not, as long as nobody took it over — with a write
// that takes SQLite's write lock for tx: no other connection can take the
// lease over or release it until tx ends. When the lease is lost the error matches
// store.ErrLeaseLost, and tx should be rolled back. Open the caller's
// database with a busy timeout (for example "file:PATH?_pragma=busy_timeout(5000)"):
// Guard waits for the write lock like any write.
func (s *Store) Guard(ctx context.Context, tx any, h store.Handle) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	t, ok := tx.(*sql.Tx)
	if !ok {
		return fmt.Errorf("%w: Guard needs a *sql.Tx on the same SQLite file, not %T", store.ErrUnsupported, tx)
	}
	if t == nil {
		return fmt.Errorf("%w: Guard needs a *sql.Tx, not a nil one", store.ErrUnsupported)
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return store.ErrClosed
	}
	var n int64
	var err error
	ref := h.Ref.String()
	h.Each(func(x store.Lock) {
		if err != nil {
			return
		}
		var res sql.Result
		res, err = t.ExecContext(ctx, `UPDATE holders SET token = token
			WHERE lock = ? AND ref = ? AND (? = 0 OR token = ?)`,
			x.Name, ref, x.Token, x.Token)
		if err == nil {
			var k int64
			k, err = res.RowsAffected()
			n += k
		}
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: guard: %w", err)
	}
	if want := 1 + len(h.More); int(n) != want {
		return fmt.Errorf("%w: %q is no longer held by its ref (token %d)", store.ErrLeaseLost, h.Name, h.Token)
	}
	return nil
}
