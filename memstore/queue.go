package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// waiter is a caller in the queue of one lock or, for AcquireAll, of each
// of several. A plain waiter (one lock, a generated ref, nothing else) has
// no req and comes from a pool; the releaser that frees its slot grants it
// and wakes it (a direct hand-off: the woken caller holds the slot already).
type waiter struct {
	ref   store.Ref
	req   *store.AcquireRequest // nil for a plain waiter
	locks []*lock               // in the caller's order
	one   [1]*lock
	// When it queued: since, on the clock of an op that reads it (events,
	// WithTimes); else queued, on the wait clock (waitNano; 0: not read),
	// for its wait in Stats and its Since in State (see queuedAt).
	since  time.Time
	queued time.Duration
	ready  chan struct{} // one token: granted, or err set
	h      *holder       // the grant's record of locks[0]
	grant  store.Grant   // the grant, for a waiter with a req
	done   bool          // granted
	heavy  bool          // req asks a weight other than 1 of some lock (or pw, a plain waiter's, is not 1)
	pw     int32         // a plain waiter's weight, when heavy
	err    error         // set, with ready signalled, when the store closed
}

var waiters = sync.Pool{New: func() any { return &waiter{ready: make(chan struct{}, 1)} }}

func (w *waiter) signal() { w.ready <- struct{}{} }

// weight returns the weight w asks of lk (WeightAll: every slot).
func (w *waiter) weight(lk *lock) int {
	if !w.heavy {
		return 1
	}
	if w.req == nil {
		return int(w.pw)
	}
	for i, l := range w.locks {
		if l == lk {
			return w.req.WeightOf(i)
		}
	}
	return 1
}

// need returns the slots w asks of lk.
func (w *waiter) need(lk *lock) int { return store.Need(w.weight(lk), int(lk.slots)) }

// ahead returns the slots the first i waiters of lk's queue ask of it:
// for the whole queue (a caller about to join it) from the queue's sums,
// without a walk.
func (lk *lock) ahead(i int) int {
	q := lk.queue
	if q == nil || q.heavy == 0 {
		return i
	}
	if i == len(q.ws) {
		return i - int(q.heavy) + q.weights + q.all*int(lk.slots)
	}
	n := 0
	for _, w := range lk.waits()[:i] {
		n += w.need(lk)
	}
	return n
}

func (w *waiter) staleAfter() time.Duration {
	if w.req == nil {
		return 0
	}
	return w.req.StaleAfter
}

// wait queues w on its locks and waits; called with the op's mutexes
// held, returns with them let go.
func (s *Store) wait(ctx context.Context, o *op, w *waiter) (store.Grant, error) {
	if err := s.park(ctx, o, w); err != nil {
		return store.Grant{}, err
	}
	if w.req != nil {
		return w.grant, nil
	}
	return store.Grant{Lock: store.Lock{Name: w.locks[0].name, Token: w.h.token}, Ref: w.ref}, nil
}

// park queues w on its locks and sleeps until w is granted (nil), the
// store closes or ctx ends; called with the op's mutexes held, returns
// with them let go.
func (s *Store) park(ctx context.Context, o *op, w *waiter) error {
	switch {
	case o.ev != nil || s.times:
		w.since = o.clock()
	case w.queued == 0: // else read before the mutex was taken (queuedSince)
		w.queued = s.waitNano() // parking costs more: its wait is timed (Stats), and recorded nowhere else
	}
	multi := len(w.locks) > 1
	for _, lk := range w.locks {
		lk.enqueue(w)
		if multi {
			lk.queue.multi++
		}
		if o.ev != nil {
			o.emit(store.Event{Type: store.EventWaiting, Lock: lk.name, Slots: int(lk.slots), Running: lk.used(),
				Waiting: len(lk.waits()), Ref: o.refText(w.ref), Kind: w.req.Kind, Weight: w.weight(lk)})
		}
	}
	for _, lk := range w.locks {
		// A lock whose slots are all held and whose holders cannot be
		// taken over grants nobody, and needs no timer: the queue was
		// granted all it could be before w came.
		if multi || lk.nexp > 0 || int(lk.slots) > lk.used() {
			s.pump(o, lk)
		}
	}
	o.done()

	if ctx.Done() == nil {
		<-w.ready // nothing can cancel the wait
	} else {
		select {
		case <-w.ready:
			if w.err == nil && ctx.Err() != nil {
				// Granted as ctx ended: the caller was cancelled first
				// (it cannot tell), so the grant goes back to the queue,
				// as x/sync's semaphore does (golang/go#63615).
				w.signal()
				return s.cancelWait(ctx, w)
			}
		case <-ctx.Done():
			return s.cancelWait(ctx, w)
		}
	}
	return w.err
}

// cancelWait takes w out of the queue after ctx ended, or gives back what
// it was granted meanwhile, so the next waiter gets it.
func (s *Store) cancelWait(ctx context.Context, w *waiter) error {
	o := op{s: s}
	if w.req != nil {
		o.ev = w.req.Events
	}
	if len(w.locks) > 1 {
		o.enterGlobal()
		for _, lk := range w.locks {
			o.lock(lk)
		}
	} else if !o.enter(w.locks[0]) {
		// Gone with a waiter: a Delete ended the wait (w.err) first.
		<-w.ready
		if w.err == nil {
			panic("memstore: a lock with a waiter was forgotten")
		}
		return w.err
	}
	switch {
	case w.err != nil:
		<-w.ready
		o.done()
		return w.err
	case w.done:
		<-w.ready
		if w.req == nil {
			s.releaseHolder(&o, w.locks[0], w.h, store.ErrReleased)
		} else {
			h := w.grant.Handle()
			_ = s.releaseHandle(&o, &h, store.ErrReleased)
		}
	default:
		for _, lk := range w.locks {
			lk.dequeue(w)
		}
	}
	for _, lk := range w.locks {
		s.pump(&o, lk)
	}
	for _, lk := range w.locks {
		s.forget(lk)
	}
	o.done()
	return ctx.Err()
}

// waitQueue is a lock's queue: a pointer in the lock record, which most
// locks never need. The queue is a window of one array that grants take
// from the front and arrivals add to at the back; an arrival that finds
// the window at the array's end moves it to the front when at least half
// the array is free, so a busy lock's queue allocates nothing once its
// array is as long as the longest queue it has had.
type waitQueue struct {
	ws  []*waiter // the queue, in FIFO order
	buf []*waiter // the array ws lies in: buf[:cap(buf)]
	// The weights its heavy waiters ask (see ahead): the sum of those
	// other than WeightAll, and how many ask WeightAll (every slot, as
	// many as the lock has when asked).
	weights, all int
	// heavy counts the waiters that ask a weight other than 1, multi
	// those that wait for other locks too (multi changes only under the
	// store's mutex as well as the lock's: see lock.multi).
	heavy, multi int32
	// views are the lock's views for the plain leases of 2, 3, …
	// slots (see view): kept here, with the queue weighted grants often
	// have, so that the lock record does not grow.
	views []*weightedLock
	// refs are the refs of plain waiters (a waiter's ref names it in
	// State's queue): drawn under the lock's mutex, with no write to
	// memory that other locks share.
	refs store.RefSource
}

// waitQueue returns lk's queue record, made on first use. lk.mu is held.
func (lk *lock) waitQueue() *waitQueue {
	if lk.queue == nil {
		lk.queue = &waitQueue{}
	}
	return lk.queue
}

// keptQueue is the longest array an empty queue keeps for the next
// waiters (8 KiB); a longer one, left by a burst, is let go.
const keptQueue = 1024

// dequeue takes w out of lk's queue.
func (lk *lock) dequeue(w *waiter) {
	if len(w.locks) > 1 {
		lk.queue.multi--
	}
	if w.heavy {
		lk.queue.heavy--
		lk.queue.unweigh(w.weight(lk))
	}
	q := lk.waits()
	if len(q) > 0 && q[0] == w {
		// The head, as grants take it: drop it without moving the rest.
		q[0] = nil
		lk.queue.ws = q[1:]
		if len(q) == 1 {
			lk.hintQueued(false)
			lk.queue.ws = lk.queue.buf[:0]
			if cap(lk.queue.buf) > keptQueue {
				lk.queue.ws, lk.queue.buf = nil, nil // a burst's array goes
			}
		}
		return
	}
	for i, x := range q {
		if x == w {
			copy(q[i:], q[i+1:])
			q[len(q)-1] = nil
			lk.queue.ws = q[:len(q)-1] // not the head: others stay
			return
		}
	}
}

// enqueue puts w at the end of lk's queue.
func (lk *lock) enqueue(w *waiter) {
	q := lk.waitQueue()
	if w.heavy {
		q.heavy++
		q.weigh(w.weight(lk))
	}
	if len(q.ws) == 0 {
		lk.hintQueued(true)
	}
	if n := len(q.ws); n == cap(q.ws) {
		if cap(q.buf) == 0 || 2*n > cap(q.buf) {
			q.ws = append(q.ws, w) // a new array
			q.buf = q.ws[:0]
			return
		}
		// The window reached the array's end with half of it or more
		// free in front: slide it back to the front.
		all := q.buf[:cap(q.buf)]
		off := cap(all) - cap(q.ws)
		copy(all, q.ws)
		clear(all[n : off+n])
		q.ws = all[:n]
	}
	q.ws = append(q.ws, w)
}

// weigh adds a heavy waiter's weight to q's sums; unweigh takes it out.
func (q *waitQueue) weigh(weight int) {
	if weight == store.WeightAll {
		q.all++
	} else {
		q.weights += weight
	}
}

func (q *waitQueue) unweigh(weight int) {
	if weight == store.WeightAll {
		q.all--
	} else {
		q.weights -= weight
	}
}

// waits returns lk's queue, in FIFO order.
func (lk *lock) waits() []*waiter {
	if lk.queue == nil {
		return nil
	}
	return lk.queue.ws
}

func (lk *lock) position(w *waiter) int {
	for i, x := range lk.waits() {
		if x == w {
			return i
		}
	}
	return -1
}

// pump grants waiters of lk (and of locks their grants touch) in FIFO
// order: a waiter is granted a lock when it holds it already or the slots
// it asks and those the waiters ahead of it ask are free (so a heavy head
// blocks lighter waiters behind it), and it is granted only when
// that holds for every lock it waits for. A waiter for several locks is
// only ever queued on locks that global operations change, so pump takes
// the other locks' mutexes only when global.
func (s *Store) pump(o *op, first *lock) {
	if !first.multi() && first.nexp == 0 && !first.timed {
		// The common case: waiters of this lock alone, holders that cannot
		// be taken over and no timer. Plain waiters at the head take the
		// free slots; any other head goes the general way below.
		for {
			q := first.waits()
			if len(q) == 0 || int(first.slots) <= first.used() {
				return
			}
			if q[0].req != nil {
				break
			}
			if q[0].heavy && int(first.slots)-first.used() < q[0].need(first) {
				return // a heavy head blocks those behind it
			}
			w := q[0]
			first.dequeue(w)
			s.grantWaiter(o, w)
		}
	}
	var work []*lock
	lk := first
	for {
		for i := 0; i < len(lk.waits()); {
			w := lk.waits()[i]
			// (A plain waiter's ref is new: it holds nothing yet.)
			if n := lk.ahead(i) + w.need(lk); n > s.free(o, lk, n, w.staleAfter()) && (w.req == nil || lk.find(w.ref, 0) == nil) {
				break
			}
			if len(w.locks) > 1 && !s.grantable(o, w, lk) {
				i++
				continue
			}
			for _, l := range w.locks {
				l.dequeue(w)
				if l != lk {
					work = append(work, l)
				}
			}
			s.grantWaiter(o, w) // w is the waiter's again: not looked at after
		}
		s.arm(o, lk)
		if len(work) == 0 {
			return
		}
		lk = work[len(work)-1]
		work = work[:len(work)-1]
	}
}

// grantWaiter grants w (out of every queue now); the operation wakes it
// when it is done.
func (s *Store) grantWaiter(o *op, w *waiter) {
	if w.req == nil {
		lk := w.locks[0]
		wait := time.Duration(-1) // not timed until the first Stats read (see waited)
		if s.timeWaits.Load() {
			wait = o.waitedFor(w)
		}
		w.h = lk.newPlainHolder(wait) // its ref is its token's, not the waiter's
		if w.heavy {
			lk.setWeight(w.h, w.need(lk))
		}
		if stamp := o.stamp(0); !stamp.IsZero() {
			w.h.ext().acquired = stamp
		}
		if o.ev != nil {
			o.emit(store.Event{Type: store.EventAcquired, Lock: lk.name, Slots: int(lk.slots), Running: lk.used(),
				Waiting: len(lk.waits()), Ref: o.refText(w.ref), Token: w.h.token, Weight: w.h.weight(), Waited: since(w.h.acquired(), w.queuedAt())})
		}
	} else {
		w.grant = s.grantAll(o, w.req, w.locks, w.queuedAt())
	}
	w.done = true
	if o.wake == nil {
		o.wake = w
	} else {
		o.wakeMore = append(o.wakeMore, w)
	}
}

func (s *Store) grantable(o *op, w *waiter, at *lock) bool {
	for _, lk := range w.locks {
		if lk == at {
			continue
		}
		o.lock(lk)
		if lk.find(w.ref, 0) != nil {
			continue
		}
		p := lk.position(w)
		if p < 0 {
			return false
		}
		if n := lk.ahead(p) + w.need(lk); n > s.free(o, lk, n, w.staleAfter()) {
			return false
		}
	}
	return true
}

// queuedAt is when w queued: its since, or its queued reading of the wait
// clock (the zero time when neither was read).
func (w *waiter) queuedAt() time.Time {
	if w.queued != 0 {
		return waitTime(w.queued)
	}
	return w.since
}
