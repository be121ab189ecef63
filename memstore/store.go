// Package memstore keeps locks in the memory of one process: the default
// store of sleeplock, with no set-up.
//
// Each lock has its own mutex, so unrelated locks never wait for each other.
// Operations that span several locks (AcquireAll and its waiters, families,
// List, Close) also take the store's mutex, and a lock with a waiter for
// several locks is changed only under it; the order is always the store's
// mutex first, then any number of lock mutexes, and a caller that holds one
// lock mutex without the store's never waits for another. The uncontended
// path reads no clock and allocates nothing, and on a defined lock with few
// slots it takes no mutex: such a lock keeps the holders of package
// sleeplock's plain leases (no options, no TTL, no notifier) in one word
// while nobody waits.
//
// Leases with a TTL expire on the store's clock (the system clock unless
// WithClock gives another); a lease with no TTL lasts until it is released.
// Times of leases with no TTL are not recorded unless the Locks has a
// notifier or the store was made WithTimes: reading the clock costs more than
// the whole grant.
//
// Stats counts exactly (a defined lock's grants are its fencing tokens).
// Hold times are sampled, 1 grant in HoldSampling by token, and by time
// from the first Stats read on: the next grant of a lock after a read,
// at most one every HoldSampleEvery (see HoldSampling). Wait times
// are recorded from the store's first Stats read on: before it, a grant
// that queued is counted in the wait histogram's first bucket, as one
// that did not wait, so that a store whose Stats nobody reads reads no
// clock when it hands a slot over (on two cores the read cost the
// contended path a third of its throughput). A metrics package that
// scrapes (promevents, otelevents) reads it at its first scrape.
package memstore

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sleeplock/sleeplock/internal/announce"
	"github.com/sleeplock/sleeplock/store"
)

// Option configures a Store.
type Option func(*Store)

// WithClock makes the store read time from c.
func WithClock(c Clock) Option { return func(s *Store) { s.clock = c } }

// WithTimes makes the store record acquisition times of every lease, also
// of leases with no TTL when no notifier asks for durations.
func WithTimes() Option { return func(s *Store) { s.times = true } }

// Store is the memory store. Its zero value is not usable; call New.
type Store struct {
	clock    Clock
	sysClock bool // clock is the system clock (see waitClock)
	times    bool

	// locks maps a name to its *lock: defined locks and family members in
	// use. Read without any mutex; entries are added under mu and removed
	// (a family member forgotten) under the lock's own mutex.
	locks names

	mu     sync.Mutex         // the store's mutex: see the package doc
	fams   map[string]*family // under mu
	closed atomic.Bool        // set under mu; read under a lock's mutex
	// timeWaits: a Stats read has been made, so grants that queued are
	// timed from now on (see waited).
	timeWaits atomic.Bool

	tmu    sync.Mutex           // guards timers; taken under a lock's mutex
	timers map[*lock]*lockTimer // the expiry timers of locks that have one

	seq  atomic.Uint64 // Event.Seq, store-wide so it also grows across a family member's forget
	lost sync.Map      // lostKey → *lostLease: what a plain lease may still ask for

	rngMu   sync.Mutex
	rngFree []store.RefRange // ranges of forgotten lock records: see newRange
	floor   atomic.Int64     // the highest token of a forgotten lock: new locks start there

	samples [sampleSlots]sample // timed grants: see HoldSampling

	ann announce.Set // listeners of Announce
}

// New returns an empty memory store.
func New(opts ...Option) *Store {
	s := &Store{clock: systemClock{}, fams: make(map[string]*family)}
	for _, o := range opts {
		if o != nil { // a nil Option changes nothing
			o(s)
		}
	}
	if s.clock == nil {
		s.clock = systemClock{} // WithClock(nil)
	}
	_, s.sysClock = s.clock.(systemClock)
	return s
}

var _ store.Store = (*Store)(nil)
var _ store.Watcher = (*Store)(nil)

// op is one operation: the locks it holds and what it learns while it
// holds them (the clock, watchers to call once it lets go).
type op struct {
	s      *Store
	ev     store.Emitter
	global bool    // the store's mutex is held
	lk     *lock   // the lock whose mutex the operation took first
	more   []*lock // further lock mutexes held (global only)
	now    time.Time
	hasNow bool
	// expiring: the hold the operation ends is taken over (see free).
	expiring bool
	// wait: how long the grants being made waited, when waited (see
	// grantAll).
	wait    time.Duration
	hasWait bool
	fire    []firing
	// Waiters granted by the operation, woken as it lets go (see done).
	wake     *waiter
	wakeMore []*waiter
	// waitNow: the wait clock's reading that times the waits of the
	// grants it makes, when it has no other (see waited).
	waitNow time.Duration
}

type firing struct {
	fs     []func(error)
	f      func(error)
	reason error
}

// enter takes lk's mutex for an operation that may change lk: alone when
// no waiter of lk waits for other locks too, else after the store's mutex
// (global). It reports false, holding nothing, when lk was forgotten (the
// caller looks the name up again).
func (o *op) enter(lk *lock) bool {
	lk.lockMu()
	if lk.gone {
		lk.mu.Unlock()
		return false
	}
	if !lk.multi() {
		o.lk = lk
		return true
	}
	lk.mu.Unlock() // frozen: no thaw with a waiter of several locks
	o.s.mu.Lock()
	lk.lockMu()
	if lk.gone {
		lk.mu.Unlock()
		o.s.mu.Unlock()
		return false
	}
	o.global, o.lk = true, lk
	return true
}

// enterGlobal takes the store's mutex.
func (o *op) enterGlobal() {
	o.s.mu.Lock()
	o.global = true
}

// enterOpen is enterGlobal on an open store: on a closed one it leaves
// again and reports ErrClosed.
func (o *op) enterOpen() error {
	o.enterGlobal()
	if o.s.closed.Load() {
		o.done()
		return store.ErrClosed
	}
	return nil
}

// lock takes lk's mutex in a global operation, unless held already.
func (o *op) lock(lk *lock) {
	if lk == o.lk {
		return
	}
	for _, l := range o.more {
		if l == lk {
			return
		}
	}
	if o.lk == nil {
		o.lk = lk
	} else {
		o.more = append(o.more, lk)
	}
	lk.lockMu()
}

// lockName looks up (or makes, when create) the lock name and takes its
// mutex in a global operation. A lock forgotten meanwhile (by an operation
// that needs no store mutex) is looked up again. nil, nil: a family member
// not in use (create false).
func (o *op) lockName(name string, create bool) (*lock, error) {
	for {
		lk, err := o.s.get(name, create, true)
		if lk == nil {
			return nil, err
		}
		o.lock(lk)
		if !lk.gone {
			return lk, nil
		}
	}
}

// unlock lets go of every mutex held.
func (o *op) unlock() {
	for _, l := range o.more {
		o.s.unlockMu(l)
	}
	o.more = o.more[:0]
	if o.lk != nil {
		o.s.unlockMu(o.lk)
		o.lk = nil
	}
	if o.global {
		o.s.mu.Unlock()
		o.global = false
	}
}

// done wakes the waiters the operation granted, lets go of every mutex
// and calls the watchers the operation ended.
//
// The wake comes before the unlock, for FIFO as callers see it. A caller
// that found the lock's mutex held sleeps on it before it reaches the
// queue; the unlock readies it in the place where the runtime runs the
// goroutine readied last, and a wake after the unlock would push it out
// of that place to the back of the run queue, behind the chain of
// granted waiters that each grant readies in turn — later arrivals then
// reach the queue first (overtakes ×5 the semaphore's at p99). Woken
// first, the granted waiter (whose slot is its own already: it loses
// nothing) waits in the run queue instead, and the caller that waited for
// the mutex reaches the queue next, as the semaphore's order has it.
func (o *op) done() {
	if o.wake != nil {
		o.wake.signal()
		o.wake = nil
		for _, w := range o.wakeMore {
			w.signal()
		}
		o.wakeMore = nil
	}
	o.unlock()
	for _, f := range o.fire {
		for _, fn := range f.fs {
			fn(f.reason)
		}
		if f.f != nil {
			f.f(f.reason)
		}
	}
	o.fire = nil
}

func (o *op) clock() time.Time {
	if !o.hasNow {
		o.now, o.hasNow = o.s.clock.Now(), true
	}
	return o.now
}

// waited returns how long a caller that queued at t waited, or -1 (not
// timed) until the store's first Stats read: a wait is timed for Stats
// alone, and nothing else reads it. The counts stay exact (a grant's
// count is its token); an untimed grant is in the wait histogram's first
// bucket, as a grant that did not wait. Without the op's clock reading
// it reads the wait clock (waitClock), once for all the grants of the
// operation.
//
// Timing the grant costs the contended path a third of its throughput on
// two cores (bench/README.md, "Issue 30"), wherever the read is made: a
// store whose Stats nobody reads does not pay it. The read is made under
// the lock's mutex, with the grant: made after the mutex is let go (on
// the releaser's way out, once the granted waiter is woken), it measured
// slower, not faster ("Weights, fourth round").
func (o *op) waited(t time.Time) time.Duration {
	if !o.s.timeWaits.Load() {
		return -1
	}
	if o.hasNow {
		return since(o.now, t)
	}
	return since(waitTime(o.waitClock()), t)
}

// waitedFor is waited for the waiter w, granted now, once the store
// times waits (timeWaits): a plain waiter's reading of the wait clock
// (queued) is subtracted from the op's as it is, with no time.Time made
// of either.
func (o *op) waitedFor(w *waiter) time.Duration {
	if w.queued == 0 || o.hasNow {
		return o.waited(w.queuedAt())
	}
	return o.waitClock() - w.queued
}

// waitClock returns the op's reading of the wait clock (waitNano), read
// once for all the grants it makes.
func (o *op) waitClock() time.Duration {
	if o.waitNow == 0 {
		o.waitNow = o.s.waitNano()
	}
	return o.waitNow
}

// stamp returns the time to record for a grant: the clock when it is
// needed, else the zero time.
func (o *op) stamp(ttl time.Duration) time.Time {
	if ttl > 0 || o.ev != nil || o.s.times || o.hasNow {
		return o.clock()
	}
	return time.Time{}
}

func (o *op) emit(e store.Event) {
	if o.ev == nil {
		return
	}
	e.Time = o.clock()
	if e.Type != store.EventRefused && e.Type != store.EventLost {
		e.Seq = o.s.seq.Add(1)
	}
	o.ev.Emit(e)
}

func (o *op) refText(r store.Ref) string {
	if o.ev == nil {
		return ""
	}
	return r.String()
}

func since(now, t time.Time) time.Duration {
	if t.IsZero() || now.IsZero() {
		return 0
	}
	return now.Sub(t)
}

// Close implements store.Store: later calls fail with ErrClosed, timers
// stop and callers waiting in a queue return ErrClosed. Leases are not
// released.
func (s *Store) Close() error {
	if s == nil || s.fams == nil {
		return errNoStore
	}
	o := op{s: s}
	o.enterGlobal()
	defer o.done()
	s.closed.Store(true)
	s.locks.Range(func(lk *lock) bool {
		lk.lockMu()
		s.stopTimer(lk)
		for _, w := range lk.waits() {
			if !w.done && w.err == nil {
				w.err = store.ErrClosed
				w.signal()
			}
		}
		if lk.queue != nil {
			clear(lk.queue.ws)
			lk.queue.ws = lk.queue.ws[:0]
			lk.queue.weights, lk.queue.all, lk.queue.heavy, lk.queue.multi = 0, 0, 0, 0
		}
		lk.hintQueued(false)
		if lk.indexed {
			lk.unindex(nil, true) // let the lock go with the store
		}
		lk.mu.Unlock() // no thaw: the store is closed
		return true
	})
	return nil
}
