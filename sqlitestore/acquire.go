package sqlitestore

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

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
		ok, err := s.ready(t, req, locks, *ticket, &r)
		if err != nil {
			return err
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

// ready reports whether the waiter with ticket can take every lock of req
// now. When it cannot, it moves r.wake to the time a lock's hold expires
// (when sooner), and sets r.far and the pids of this host's holders to
// watch.
func (s *Store) ready(t *txn, req *store.AcquireRequest, locks []*lk, ticket int64, r *pollResult) (bool, error) {
	ref := req.Ref.String()
	ok := true
	for i, l := range locks {
		if l.find(ref, 0) >= 0 {
			continue
		}
		p := slices.Index(l.queue, ticket)
		n := store.Need(req.WeightOf(i), l.slots)
		if p >= 0 {
			n += l.ahead(p)
		}
		free, err := t.free(l, n, req.StaleAfter, req.Events)
		if err != nil {
			return false, err
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
	return ok, nil
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
		s.countNear(&near, r.far)
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

// countNear keeps a waiter counted in s.near while it is near the head of
// its queue (not far), and kicks the change poller when it is the first.
func (s *Store) countNear(near *bool, far bool) {
	if *near != far { // unchanged
		return
	}
	*near = !far
	if !*near {
		s.near.Add(-1)
		return
	}
	if s.near.Add(1) == 1 {
		select {
		case s.kick <- struct{}{}:
		default:
		}
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
