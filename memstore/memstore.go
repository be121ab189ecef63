// Package memstore keeps locks in the memory of one process: the default
// store of sleeplock, with no set-up. Every lock shares one mutex, held for a
// few hundred nanoseconds at most per operation; the uncontended path reads
// no clock and allocates nothing.
//
// Leases with a TTL expire on the store's clock (the system clock unless
// WithClock gives another); a lease with no TTL lasts until it is released.
// Times of leases with no TTL are not recorded unless the Locks has a
// notifier or the store was made WithTimes: reading the clock costs more than
// the whole grant.
package memstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	clock  Clock
	times  bool
	mu     sync.Mutex
	locks  map[string]*lock // defined locks and family members in use
	fams   map[string]*family
	token  int64
	seq    atomic.Uint64 // Event.Seq: store-wide, so it also grows across a family member's forget
	closed bool
}

type family struct {
	pattern string
	slots   int
}

type lock struct {
	name    string
	slots   int
	fam     *family // non-nil for a family member: forgotten when idle
	defined bool    // defined by name (not only a member)
	gone    bool    // forgotten: a Slot naming it must look the name up
	holders []holder
	queue   []*waiter
	nexp    int // holders with an expiry
	stop    func() bool
	timerAt time.Time
}

type holder struct {
	ref       store.Ref
	kind      string
	token     int64
	count     int
	ttl, hold time.Duration
	acquired  time.Time
	expires   time.Time
	watch     []func(error)
}

type waiter struct {
	req   store.AcquireRequest
	locks []*lock // in the caller's order
	one   [1]*lock
	since time.Time
	ready chan struct{}
	grant store.Grant
	done  bool  // granted
	err   error // set, with ready closed, when the store closed
}

// New returns an empty memory store.
func New(opts ...Option) *Store {
	s := &Store{clock: systemClock{}, locks: make(map[string]*lock), fams: make(map[string]*family)}
	for _, o := range opts {
		o(s)
	}
	return s
}

var _ store.Store = (*Store)(nil)
var _ store.Watcher = (*Store)(nil)

// op carries what one operation learns while the mutex is held.
type op struct {
	s      *Store
	ev     store.Emitter
	now    time.Time
	hasNow bool
	fire   []firing
}

type firing struct {
	fs     []func(error)
	reason error
}

func (o *op) clock() time.Time {
	if !o.hasNow {
		o.now, o.hasNow = o.s.clock.Now(), true
	}
	return o.now
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

func (o *op) finish() {
	for _, f := range o.fire {
		for _, fn := range f.fs {
			fn(f.reason)
		}
	}
}

// Define implements store.Store.
func (s *Store) Define(ctx context.Context, name string, slots int, ev store.Emitter) (bool, error) {
	if err := store.CheckDefinition(name, slots); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, store.ErrClosed
	}
	o := op{s: s, ev: ev}
	if strings.HasSuffix(name, store.FamilySuffix) {
		if f := s.fams[name]; f != nil {
			if f.slots != slots {
				return false, &store.ConflictError{Name: name, Slots: f.slots, Requested: slots}
			}
			return false, nil
		}
		s.fams[name] = &family{pattern: name, slots: slots}
		o.emit(store.Event{Type: store.EventCreated, Lock: name, Slots: slots})
		return true, nil
	}
	if lk := s.locks[name]; lk != nil {
		if lk.defined {
			if lk.slots != slots {
				return false, &store.ConflictError{Name: name, Slots: lk.slots, Requested: slots}
			}
			return false, nil
		}
		// A family member in use becomes a lock of its own.
		lk.defined, lk.fam = true, nil
		o.emit(store.Event{Type: store.EventCreated, Lock: name, Slots: slots, Running: len(lk.holders), Waiting: len(lk.queue)})
		s.setSlots(&o, lk, slots)
		return true, nil
	}
	s.locks[name] = &lock{name: name, slots: slots, defined: true}
	o.emit(store.Event{Type: store.EventCreated, Lock: name, Slots: slots})
	return true, nil
}

// Resize implements store.Store.
func (s *Store) Resize(ctx context.Context, name string, slots int, ev store.Emitter) error {
	if err := store.CheckDefinition(name, slots); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	o := op{s: s, ev: ev}
	if strings.HasSuffix(name, store.FamilySuffix) {
		f := s.fams[name]
		if f == nil {
			s.mu.Unlock()
			return store.NotResizable(name)
		}
		f.slots = slots
		o.emit(store.Event{Type: store.EventResized, Lock: name, Slots: slots})
		for _, lk := range s.locks {
			if lk.fam == f {
				s.setSlots(&o, lk, slots)
			}
		}
	} else {
		lk := s.locks[name]
		if lk == nil || !lk.defined {
			s.mu.Unlock()
			return store.NotResizable(name)
		}
		s.setSlots(&o, lk, slots)
	}
	s.mu.Unlock()
	o.finish()
	return nil
}

func (s *Store) setSlots(o *op, lk *lock, slots int) {
	if lk.slots == slots {
		return
	}
	lk.slots = slots
	if lk.fam == nil {
		o.emit(store.Event{Type: store.EventResized, Lock: lk.name, Slots: slots, Running: len(lk.holders), Waiting: len(lk.queue)})
	}
	s.pump(o, lk)
}

// lookup finds a lock, creating a family member on first use when create.
func (s *Store) lookup(name string, create bool) (*lock, *family, error) {
	if lk := s.locks[name]; lk != nil {
		return lk, nil, nil
	}
	var fam *family
	if len(s.fams) > 0 {
		store.FamilyOf(name, func(p string) bool {
			fam = s.fams[p]
			return fam == nil
		})
	}
	if fam == nil {
		return nil, nil, store.NotFound(name)
	}
	if !create {
		return nil, fam, nil
	}
	lk := &lock{name: name, slots: fam.slots, fam: fam}
	s.locks[name] = lk
	return lk, fam, nil
}

// covered returns NotFound for the first name of h that no definition or
// family covers, else nil.
func (s *Store) covered(h *store.Handle) error {
	var err error
	h.Each(func(l store.Lock) {
		if err == nil && s.locks[l.Name] == nil {
			_, _, err = s.lookup(l.Name, false)
		}
	})
	return err
}

// forget drops a family member that nobody holds or waits for.
func (s *Store) forget(lk *lock) {
	if lk.fam != nil && !lk.defined && len(lk.holders) == 0 && len(lk.queue) == 0 {
		if lk.stop != nil {
			lk.stop()
			lk.stop = nil
		}
		if s.locks[lk.name] == lk {
			delete(s.locks, lk.name)
		}
		lk.gone = true
	}
}

func (lk *lock) find(ref store.Ref, token int64) int {
	for i := range lk.holders {
		h := &lk.holders[i]
		if (token == 0 || h.token == token) && h.ref == ref {
			return i
		}
	}
	if !ref.Generated() {
		// A generated ref may be named by its text.
		for i := range lk.holders {
			h := &lk.holders[i]
			if (token == 0 || h.token == token) && h.ref.Generated() && h.ref.Equal(ref) {
				return i
			}
		}
	}
	return -1
}

// free returns the free slots of lk, first taking over leases that may be
// taken over (see takeover) when need slots are wanted and fewer are free.
func (s *Store) free(o *op, lk *lock, need int, staleAfter time.Duration) int {
	free := lk.slots - len(lk.holders)
	if free >= need || lk.nexp == 0 {
		return free
	}
	now := o.clock()
	for i := 0; i < len(lk.holders); {
		h := &lk.holders[i]
		if at := takeover(h, staleAfter); !at.IsZero() && !at.After(now) {
			gone := *h
			s.removeHolder(lk, i)
			why := "taken over after its TTL"
			if gone.expires.After(now) {
				why = "taken over as stale"
			}
			o.lost(gone.watch, fmt.Errorf("%w: %s", store.ErrLeaseLost, why))
			o.emit(store.Event{Type: store.EventExpired, Lock: lk.name, Slots: lk.slots, Running: len(lk.holders),
				Waiting: len(lk.queue), Ref: o.refText(gone.ref), Kind: gone.kind, Token: gone.token, Held: since(now, gone.acquired)})
			continue
		}
		i++
	}
	return lk.slots - len(lk.holders)
}

// takeover is when h may be taken over by a request with staleAfter: at its
// expiry, or staleAfter after its last renewal when that is sooner. A lease
// with no TTL is never taken over (zero).
func takeover(h *holder, staleAfter time.Duration) time.Time {
	if h.expires.IsZero() {
		return time.Time{}
	}
	if staleAfter > 0 {
		if at := renewed(h).Add(staleAfter); at.Before(h.expires) {
			return at
		}
	}
	return h.expires
}

func (o *op) refText(r store.Ref) string {
	if o.ev == nil {
		return ""
	}
	return r.String()
}

func (o *op) lost(fs []func(error), reason error) {
	if len(fs) > 0 {
		o.fire = append(o.fire, firing{fs: fs, reason: reason})
	}
}

func since(now, t time.Time) time.Duration {
	if t.IsZero() || now.IsZero() {
		return 0
	}
	return now.Sub(t)
}

func (s *Store) removeHolder(lk *lock, i int) {
	if !lk.holders[i].expires.IsZero() {
		lk.nexp--
	}
	last := len(lk.holders) - 1
	lk.holders[i] = lk.holders[last] // holders are unordered; State sorts them
	lk.holders[last] = holder{}
	lk.holders = lk.holders[:last]
}

// ReleasePlain releases a lease that AcquirePlain granted: Release of
// that lease without a notifier.
func (s *Store) ReleasePlain(slot Slot, name string, ref store.Ref, token int64) error {
	s.mu.Lock()
	lk := slot.lk
	if lk == nil || lk.gone {
		lk = s.locks[name]
	}
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	i := -1
	if lk != nil {
		i = lk.find(ref, token)
	}
	if i < 0 {
		s.mu.Unlock()
		return store.ErrNotHeld
	}
	if len(lk.holders[i].watch) == 0 && lk.holders[i].count == 1 {
		s.removeHolder(lk, i)
		if len(lk.queue) == 0 {
			s.forget(lk)
			s.mu.Unlock()
			return nil
		}
		o := op{s: s}
		s.pump(&o, lk)
		s.mu.Unlock()
		o.finish()
		return nil
	}
	o := op{s: s}
	h := store.Handle{Lock: store.Lock{Name: name, Token: token}, Ref: ref}
	err := s.release(&o, &h, store.ErrReleased)
	s.mu.Unlock()
	o.finish()
	return err
}

func (s *Store) addHolder(o *op, lk *lock, req *store.AcquireRequest) store.Lock {
	now := o.stamp(req.TTL)
	h := s.newHolder(lk, req.Ref)
	h.kind, h.ttl, h.hold, h.acquired = req.Kind, req.TTL, req.Hold, now
	if req.TTL > 0 {
		h.expires = now.Add(lease(req.TTL, req.Hold))
		lk.nexp++
	}
	return store.Lock{Name: lk.name, Token: h.token}
}

// newHolder adds a holder record for ref with a new token to lk, reusing
// the slot past the end of holders in place when there is one (removeHolder
// leaves it zeroed), and returns it.
func (s *Store) newHolder(lk *lock, ref store.Ref) *holder {
	s.token++
	n := len(lk.holders)
	if n < cap(lk.holders) {
		lk.holders = lk.holders[:n+1]
	} else {
		lk.holders = append(lk.holders, holder{})
	}
	h := &lk.holders[n]
	h.ref, h.token, h.count = ref, s.token, 1
	return h
}

func lease(ttl, hold time.Duration) time.Duration {
	if hold > 0 && hold < ttl {
		return hold
	}
	return ttl
}

// renew dates h as taken now with ttl and hold.
func (s *Store) renew(o *op, lk *lock, h *holder, ttl, hold time.Duration) {
	if !h.expires.IsZero() {
		lk.nexp--
	}
	h.ttl, h.hold, h.expires = ttl, hold, time.Time{}
	if ttl > 0 {
		h.expires = o.clock().Add(lease(ttl, hold))
		lk.nexp++
	}
}

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, req store.AcquireRequest) (store.Grant, error) {
	if err := ctx.Err(); err != nil {
		return store.Grant{}, err
	}
	s.mu.Lock()
	return s.acquireLocked(ctx, req)
}

// Slot names the lock of a plain lease (AcquirePlain), so that its release
// needs no lookup by name. The zero Slot names none.
type Slot struct{ lk *lock }

// AcquirePlain is the fast path of package sleeplock: Acquire of one lock
// for ref, a new generated ref, with no kind, no TTL and no notifier. It
// returns the granted token and the lock's Slot for ReleasePlain.
func (s *Store) AcquirePlain(ctx context.Context, name string, ref store.Ref, wait bool) (Slot, int64, error) {
	if err := ctx.Err(); err != nil {
		return Slot{}, 0, err
	}
	s.mu.Lock()
	if lk := s.locks[name]; lk != nil && !s.closed && !s.times && len(lk.queue) == 0 && len(lk.holders) < lk.slots {
		token := s.newHolder(lk, ref).token
		s.mu.Unlock()
		return Slot{lk}, token, nil
	}
	g, err := s.acquireLocked(ctx, store.AcquireRequest{Name: name, Ref: ref, Wait: wait})
	return Slot{}, g.Token, err
}

// acquireLocked is Acquire with s.mu held; it releases s.mu.
func (s *Store) acquireLocked(ctx context.Context, req store.AcquireRequest) (store.Grant, error) {
	if s.closed {
		s.mu.Unlock()
		return store.Grant{}, store.ErrClosed
	}
	o := op{s: s, ev: req.Events}
	if len(req.More) == 0 {
		lk, _, err := s.lookup(req.Name, true)
		if err != nil {
			s.mu.Unlock()
			return store.Grant{}, err
		}
		if i := lk.find(req.Ref, 0); i >= 0 {
			g := s.reenter(&o, lk, i, &req)
			s.mu.Unlock()
			return g, nil
		}
		if len(lk.queue) < s.free(&o, lk, len(lk.queue)+1, req.StaleAfter) {
			g := store.Grant{Lock: s.addHolder(&o, lk, &req), Ref: req.Ref, Kind: req.Kind, TTL: req.TTL, Hold: req.Hold}
			h := &lk.holders[len(lk.holders)-1]
			g.Acquired, g.Expires = h.acquired, h.expires
			if o.ev != nil {
				o.emit(store.Event{Type: store.EventAcquired, Lock: lk.name, Slots: lk.slots, Running: len(lk.holders),
					Waiting: len(lk.queue), Ref: o.refText(req.Ref), Kind: req.Kind, Token: g.Token})
			}
			s.mu.Unlock()
			o.finish()
			return g, nil
		}
		if !req.Wait {
			err := s.refuse(&o, lk)
			s.forget(lk)
			s.mu.Unlock()
			o.finish()
			return store.Grant{}, err
		}
		return s.wait(ctx, &o, &req, nil, lk)
	}
	return s.acquireAll(ctx, &o, &req)
}

func (s *Store) reenter(o *op, lk *lock, i int, req *store.AcquireRequest) store.Grant {
	h := &lk.holders[i]
	if req.Counted {
		h.count++
	}
	if req.TTL > 0 {
		s.renew(o, lk, h, req.TTL, req.Hold)
	}
	return store.Grant{Lock: store.Lock{Name: lk.name, Token: h.token}, Ref: h.ref, Kind: h.kind, TTL: h.ttl, Hold: h.hold,
		Acquired: h.acquired, Expires: h.expires, Reentered: true}
}

func (s *Store) refuse(o *op, lk *lock) error {
	e := &store.BusyError{Lock: lk.name}
	if len(lk.holders) < lk.slots {
		e.Queued = true
	}
	if len(lk.holders) > 0 && !e.Queued {
		h := &lk.holders[0]
		e.Kind, e.Ref, e.Expires = h.kind, h.ref.String(), h.expires
	}
	o.emit(store.Event{Type: store.EventRefused, Lock: lk.name, Slots: lk.slots, Running: len(lk.holders), Waiting: len(lk.queue), Holder: e.Kind})
	return e
}

func (s *Store) acquireAll(ctx context.Context, o *op, req *store.AcquireRequest) (store.Grant, error) {
	locks := make([]*lock, 0, 1+len(req.More))
	var firstErr error
	for _, name := range req.Names() {
		lk, _, err := s.lookup(name, true)
		if err != nil {
			firstErr = err
			break
		}
		locks = append(locks, lk)
	}
	if firstErr != nil {
		for _, lk := range locks {
			s.forget(lk)
		}
		s.mu.Unlock()
		return store.Grant{}, firstErr
	}
	ok := true
	for _, lk := range locks {
		if lk.find(req.Ref, 0) < 0 && len(lk.queue) >= s.free(o, lk, len(lk.queue)+1, req.StaleAfter) {
			ok = false
			if !req.Wait {
				err := s.refuse(o, lk)
				for _, l := range locks {
					s.forget(l)
				}
				s.mu.Unlock()
				o.finish()
				return store.Grant{}, err
			}
		}
	}
	if ok {
		g := s.grantAll(o, req, locks, time.Time{})
		s.mu.Unlock()
		o.finish()
		return g, nil
	}
	return s.wait(ctx, o, req, locks, nil)
}

// grantAll gives req a slot of every lock (its existing hold where it has
// one) and returns the grant.
func (s *Store) grantAll(o *op, req *store.AcquireRequest, locks []*lock, queued time.Time) store.Grant {
	g := store.Grant{Ref: req.Ref, Kind: req.Kind, TTL: req.TTL, Hold: req.Hold, Reentered: true}
	if len(locks) > 1 {
		g.More = make([]store.Lock, 0, len(locks)-1)
	}
	for n, lk := range locks {
		var l store.Lock
		var h *holder
		if i := lk.find(req.Ref, 0); i >= 0 {
			r := s.reenter(o, lk, i, req)
			l, h = r.Lock, &lk.holders[i]
		} else {
			g.Reentered = false
			l = s.addHolder(o, lk, req)
			h = &lk.holders[len(lk.holders)-1]
			o.emit(store.Event{Type: store.EventAcquired, Lock: lk.name, Slots: lk.slots, Running: len(lk.holders),
				Waiting: len(lk.queue), Ref: o.refText(req.Ref), Kind: req.Kind, Token: l.Token, Waited: since(h.acquired, queued)})
		}
		if n == 0 {
			g.Lock, g.Acquired, g.Expires = l, h.acquired, h.expires
		} else {
			g.More = append(g.More, l)
			if !h.expires.IsZero() && (g.Expires.IsZero() || h.expires.Before(g.Expires)) {
				g.Expires = h.expires
			}
		}
	}
	return g
}

// wait queues req on locks (or on the one lock single) and waits; called
// with s.mu held, returns with it released.
func (s *Store) wait(ctx context.Context, o *op, req *store.AcquireRequest, locks []*lock, single *lock) (store.Grant, error) {
	w := &waiter{req: *req, locks: locks, ready: make(chan struct{})}
	if single != nil {
		w.one[0] = single
		w.locks = w.one[:]
		locks = w.locks
	}
	if o.ev != nil || s.times {
		w.since = o.clock()
	}
	for _, lk := range locks {
		lk.queue = append(lk.queue, w)
		o.emit(store.Event{Type: store.EventWaiting, Lock: lk.name, Slots: lk.slots, Running: len(lk.holders),
			Waiting: len(lk.queue), Ref: o.refText(req.Ref), Kind: req.Kind})
	}
	for _, lk := range locks {
		s.pump(o, lk)
	}
	s.mu.Unlock()
	o.finish()

	select {
	case <-w.ready:
		if w.err != nil {
			return store.Grant{}, w.err
		}
		return w.grant, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	o2 := op{s: s, ev: req.Events}
	if w.done {
		// Granted while the context ended: give the slots back, so the
		// next waiter gets them.
		h := w.grant.Handle()
		_ = s.release(&o2, &h, store.ErrReleased)
	} else {
		for _, lk := range locks {
			lk.dequeue(w)
		}
		for _, lk := range locks {
			s.pump(&o2, lk)
		}
		for _, lk := range locks {
			s.forget(lk)
		}
	}
	s.mu.Unlock()
	o2.finish()
	return store.Grant{}, ctx.Err()
}

func (lk *lock) dequeue(w *waiter) {
	if len(lk.queue) > 0 && lk.queue[0] == w {
		// The head, as grants take it: drop it without moving the rest.
		lk.queue[0] = nil
		lk.queue = lk.queue[1:]
		if len(lk.queue) == 0 {
			lk.queue = nil
		}
		return
	}
	for i, x := range lk.queue {
		if x == w {
			copy(lk.queue[i:], lk.queue[i+1:])
			lk.queue[len(lk.queue)-1] = nil
			lk.queue = lk.queue[:len(lk.queue)-1]
			return
		}
	}
}

func (lk *lock) position(w *waiter) int {
	for i, x := range lk.queue {
		if x == w {
			return i
		}
	}
	return -1
}

// pump grants waiters of lk (and of locks their grants touch) in FIFO
// order: a waiter is granted a lock when it holds it already or fewer
// waiters are ahead of it than slots are free, and it is granted only when
// that holds for every lock it waits for.
func (s *Store) pump(o *op, first *lock) {
	work := []*lock{first}
	for len(work) > 0 {
		lk := work[len(work)-1]
		work = work[:len(work)-1]
		for i := 0; i < len(lk.queue); {
			w := lk.queue[i]
			if i >= s.free(o, lk, i+1, w.req.StaleAfter) && lk.find(w.req.Ref, 0) < 0 {
				break
			}
			if !s.grantable(o, w, lk) {
				i++
				continue
			}
			for _, l := range w.locks {
				l.dequeue(w)
			}
			w.grant = s.grantAll(o, &w.req, w.locks, w.since)
			w.done = true
			close(w.ready)
			for _, l := range w.locks {
				if l != lk {
					work = append(work, l)
				}
			}
		}
		s.arm(o, lk)
	}
}

func (s *Store) grantable(o *op, w *waiter, at *lock) bool {
	for _, lk := range w.locks {
		if lk == at || lk.find(w.req.Ref, 0) >= 0 {
			continue
		}
		p := lk.position(w)
		if p < 0 || p >= s.free(o, lk, p+1, w.req.StaleAfter) {
			return false
		}
	}
	return true
}

// arm sets a timer for the earliest expiry of lk's holders while callers
// wait for lk, so a lease that is not renewed is taken over on time.
func (s *Store) arm(o *op, lk *lock) {
	if len(lk.queue) == 0 || lk.nexp == 0 {
		if lk.stop != nil {
			lk.stop()
			lk.stop = nil
		}
		return
	}
	// The head of the queue is the first to take a slot over; a time
	// already past is not armed (pump has just judged it: nobody needed it).
	now := o.clock()
	stale := lk.queue[0].req.StaleAfter
	var at time.Time
	for i := range lk.holders {
		if e := takeover(&lk.holders[i], stale); !e.IsZero() && e.After(now) && (at.IsZero() || e.Before(at)) {
			at = e
		}
	}
	if at.IsZero() {
		if lk.stop != nil {
			lk.stop()
			lk.stop = nil
		}
		return
	}
	if lk.stop != nil && lk.timerAt.Equal(at) {
		return
	}
	if lk.stop != nil {
		lk.stop()
	}
	lk.timerAt = at
	lk.stop = s.clock.AfterFunc(at.Sub(now), func() {
		s.mu.Lock()
		if s.locks[lk.name] != lk || s.closed {
			s.mu.Unlock()
			return
		}
		lk.stop = nil
		o := op{s: s}
		if len(lk.queue) > 0 {
			o.ev = lk.queue[0].req.Events
		}
		s.pump(&o, lk)
		s.forget(lk)
		s.mu.Unlock()
		o.finish()
	})
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, h store.Handle, ev store.Emitter) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	if err := s.covered(&h); err != nil {
		s.mu.Unlock()
		return err
	}
	o := op{s: s, ev: ev}
	reason := store.ErrReleased
	if h.Token == 0 {
		reason = fmt.Errorf("%w: released by another caller naming its ref", store.ErrLeaseLost)
	}
	err := s.release(&o, &h, reason)
	s.mu.Unlock()
	o.finish()
	return err
}

// release frees what h still holds; s.mu is held.
func (s *Store) release(o *op, h *store.Handle, reason error) error {
	if len(h.More) == 0 {
		lk := s.locks[h.Name]
		if lk == nil {
			return store.ErrNotHeld
		}
		if !s.releaseOne(o, lk, h.Ref, h.Token, reason) {
			return store.ErrNotHeld
		}
		s.pump(o, lk)
		s.forget(lk)
		return nil
	}
	var missing []string
	var touched []*lock
	h.Each(func(l store.Lock) {
		lk := s.locks[l.Name]
		if lk == nil || !s.releaseOne(o, lk, h.Ref, l.Token, reason) {
			missing = append(missing, l.Name)
			return
		}
		touched = append(touched, lk)
	})
	for _, lk := range touched {
		s.pump(o, lk)
	}
	for _, lk := range touched {
		s.forget(lk)
	}
	if len(touched) == 0 {
		return store.ErrNotHeld
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s", store.ErrNotHeld, strings.Join(quoteAll(missing), ", "))
	}
	return nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func (s *Store) releaseOne(o *op, lk *lock, ref store.Ref, token int64, reason error) bool {
	i := lk.find(ref, token)
	if i < 0 {
		return false
	}
	h := &lk.holders[i]
	if h.count > 1 {
		h.count--
		return true
	}
	gone := *h
	s.removeHolder(lk, i)
	o.lost(gone.watch, reason)
	if o.ev != nil {
		now := o.clock()
		o.emit(store.Event{Type: store.EventReleased, Lock: lk.name, Slots: lk.slots, Running: len(lk.holders),
			Waiting: len(lk.queue), Ref: gone.ref.String(), Kind: gone.kind, Token: gone.token, Held: since(now, gone.acquired)})
	}
	return true
}

// Keep implements store.Store.
func (s *Store) Keep(ctx context.Context, h store.Handle, ttl, hold time.Duration) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return time.Time{}, store.ErrClosed
	}
	if err := s.covered(&h); err != nil {
		return time.Time{}, err
	}
	o := op{s: s}
	held := true
	h.Each(func(l store.Lock) {
		if lk := s.locks[l.Name]; lk == nil || lk.find(h.Ref, l.Token) < 0 {
			held = false
		}
	})
	if !held {
		return time.Time{}, store.ErrNotHeld
	}
	var exp time.Time
	h.Each(func(l store.Lock) {
		lk := s.locks[l.Name]
		hd := &lk.holders[lk.find(h.Ref, l.Token)]
		s.renew(&o, lk, hd, ttl, hold)
		exp = hd.expires
		s.arm(&o, lk)
	})
	return exp, nil
}

// Held implements store.Store.
func (s *Store) Held(ctx context.Context, h store.Handle) (store.Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.Status{}, store.ErrClosed
	}
	if err := s.covered(&h); err != nil {
		return store.Status{}, err
	}
	st := store.Status{Held: true, Now: s.clock.Now()}
	first := true
	h.Each(func(l store.Lock) {
		lk := s.locks[l.Name]
		i := -1
		if lk != nil {
			i = lk.find(h.Ref, l.Token)
		}
		if i < 0 {
			st.Held = false
			return
		}
		hd := &lk.holders[i]
		if !hd.expires.IsZero() && !hd.expires.After(st.Now) {
			st.Held = false // expired, though nobody has taken it over yet
			return
		}
		if first {
			st.Renewed, st.Expires = renewed(hd), hd.expires
			first = false
		} else if !hd.expires.IsZero() && (st.Expires.IsZero() || hd.expires.Before(st.Expires)) {
			st.Expires = hd.expires
		}
	})
	if !st.Held {
		st.Renewed, st.Expires = time.Time{}, time.Time{}
	}
	return st, nil
}

// renewed is when h was taken or last kept, dated back by ttl-hold.
func renewed(h *holder) time.Time {
	if h.expires.IsZero() {
		return h.acquired
	}
	return h.expires.Add(-h.ttl)
}

// ReleaseStale implements store.Store.
func (s *Store) ReleaseStale(ctx context.Context, h store.Handle, staleAfter time.Duration, ev store.Emitter) (bool, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false, store.ErrClosed
	}
	if err := s.covered(&h); err != nil {
		s.mu.Unlock()
		return false, err
	}
	o := op{s: s, ev: ev}
	lk := s.locks[h.Name]
	if lk == nil {
		s.mu.Unlock()
		return false, nil
	}
	i := lk.find(h.Ref, h.Token)
	if i < 0 {
		s.mu.Unlock()
		return false, nil
	}
	hd := &lk.holders[i]
	if hd.expires.IsZero() {
		s.mu.Unlock()
		return false, nil // a lease with no TTL is never stale
	}
	now := o.clock()
	stale := !hd.expires.After(now)
	if staleAfter > 0 {
		stale = !renewed(hd).Add(staleAfter).After(now)
	}
	if !stale {
		s.mu.Unlock()
		return false, nil
	}
	h.Token = 0 // the rest go whatever their tokens, as long as the ref holds them
	for i := range h.More {
		h.More[i].Token = 0
	}
	_ = s.release(&o, &h, fmt.Errorf("%w: released as stale", store.ErrLeaseLost))
	s.mu.Unlock()
	o.finish()
	return true, nil
}

// Watch implements store.Watcher.
func (s *Store) Watch(h store.Handle, f func(reason error)) {
	s.mu.Lock()
	lk := s.locks[h.Name]
	i := -1
	if lk != nil {
		i = lk.find(h.Ref, h.Token)
	}
	if i < 0 {
		s.mu.Unlock()
		f(fmt.Errorf("%w: not held", store.ErrLeaseLost))
		return
	}
	lk.holders[i].watch = append(lk.holders[i].watch, f)
	s.mu.Unlock()
}

// State implements store.Store.
func (s *Store) State(ctx context.Context, name string, detail bool) (store.State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.State{}, store.ErrClosed
	}
	if f := s.fams[name]; f != nil {
		return store.State{Name: name, Slots: f.slots, Family: true, Now: s.clock.Now()}, nil
	}
	lk, fam, err := s.lookup(name, false)
	if err != nil {
		return store.State{}, err
	}
	if lk == nil {
		return store.State{Name: name, Slots: fam.slots, Now: s.clock.Now()}, nil
	}
	return s.state(lk, detail), nil
}

func (s *Store) state(lk *lock, detail bool) store.State {
	st := store.State{Name: lk.name, Slots: lk.slots, Running: len(lk.holders), Waiting: len(lk.queue), Now: s.clock.Now()}
	if !detail {
		return st
	}
	for i := range lk.holders {
		h := &lk.holders[i]
		st.Holders = append(st.Holders, store.Holder{Ref: h.ref.String(), Kind: h.kind, Token: h.token, Count: h.count,
			Acquired: h.acquired, Renewed: renewed(h), Expires: h.expires})
	}
	sort.Slice(st.Holders, func(i, j int) bool { return st.Holders[i].Token < st.Holders[j].Token })
	for _, w := range lk.queue {
		st.Queue = append(st.Queue, store.Waiter{Ref: w.req.Ref.String(), Kind: w.req.Kind, Since: w.since, Locks: w.req.Names()})
	}
	return st
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, detail bool) ([]store.State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	out := make([]store.State, 0, len(s.locks)+len(s.fams))
	for _, f := range s.fams {
		out = append(out, store.State{Name: f.pattern, Slots: f.slots, Family: true, Now: s.clock.Now()})
	}
	for _, lk := range s.locks {
		out = append(out, s.state(lk, detail))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Close implements store.Store: later calls fail with ErrClosed, timers
// stop and callers waiting in a queue return ErrClosed. Leases are not
// released.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, lk := range s.locks {
		if lk.stop != nil {
			lk.stop()
			lk.stop = nil
		}
		for _, w := range lk.queue {
			if !w.done && w.err == nil {
				w.err = store.ErrClosed
				close(w.ready)
			}
		}
		clear(lk.queue)
		lk.queue = lk.queue[:0]
	}
	return nil
}
