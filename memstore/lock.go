package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// lock is a defined lock or a family member in use. Its fields are guarded
// by mu, multi also by the store's mutex (it changes only under both).
type lock struct {
	mu      sync.Mutex
	token   int64           // the last fencing token granted: see nextToken
	refs    store.RefSource // the refs of plain leases
	name    string
	slots   int32
	nexp    int32 // holders with an expiry
	multi   int32 // queued waiters that wait for other locks too
	defined bool  // defined by name; else a member of the family familyOf finds
	gone    bool  // forgotten: whoever finds it looks the name up again
	timed   bool  // has a timer in the store's timers
	// holders are unordered (State sorts them). Past their length, up to
	// their capacity, the slice keeps released records for reuse.
	holders []*holder
	queue   *waitQueue // nil until a caller first waits
	// The first holders slice and record live in the lock record itself,
	// so a one-slot lock's grant touches one object (see newHolder).
	first [1]*holder
	own   holder
}

// holder is the record of one hold of a lock. A plain lease of package
// sleeplock keeps a pointer to it (Slot), so a record is reused for
// another hold only when nothing can mistake it for its old one: the old
// hold was released by its holder and nobody asked for its context.
type holder struct {
	ref   store.Ref
	token int64
	count int32 // re-entrant holds
	idx   int32 // index in lk.holders; -1 once ended
	x     *holderExt
}

// holderExt holds what most holds do not have.
type holderExt struct {
	kind      string
	ttl, hold time.Duration
	acquired  time.Time // zero when not recorded
	expires   time.Time // zero: never
	watch     []func(error)
	ctx       context.Context // the plain lease's context, once asked for
	cancel    context.CancelCauseFunc
	cause     error // why the hold ended, once it has
}

func (h *holder) ext() *holderExt {
	if h.x == nil {
		h.x = &holderExt{}
	}
	return h.x
}

func (h *holder) expires() time.Time {
	if h.x == nil {
		return time.Time{}
	}
	return h.x.expires
}

func (h *holder) acquired() time.Time {
	if h.x == nil {
		return time.Time{}
	}
	return h.x.acquired
}

func (h *holder) kind() string {
	if h.x == nil {
		return ""
	}
	return h.x.kind
}

// nextToken returns a new fencing token of lk. Tokens grow per lock: each
// lock counts its own grants (no memory shared with other locks), starting
// from the store's floor, the highest token of any lock record forgotten
// before this one was made, so a family member that is forgotten and made
// again never grants a token it granted before.
func (lk *lock) nextToken() int64 {
	lk.token++
	return lk.token
}

// newHolder adds a holder record for ref with a new token to lk.
func (lk *lock) newHolder(ref store.Ref) *holder {
	token := lk.nextToken()
	if cap(lk.holders) == 0 {
		lk.first[0] = &lk.own // a spare record, as released ones are
		lk.holders = lk.first[:0]
	}
	n := len(lk.holders)
	var h *holder
	if n < cap(lk.holders) {
		lk.holders = lk.holders[:n+1]
		h = lk.holders[n]
	}
	if h == nil {
		h = &holder{}
		if n < cap(lk.holders) {
			lk.holders[n] = h
		} else {
			lk.holders = append(lk.holders, h)
		}
	}
	h.ref, h.token, h.count, h.idx = ref, token, 1, int32(n)
	return h
}

// remove takes h out of lk's holders; keep leaves its record past their
// end for reuse.
func (lk *lock) remove(h *holder, keep bool) {
	i, last := h.idx, int32(len(lk.holders)-1)
	if i != last {
		lk.holders[i] = lk.holders[last]
		lk.holders[i].idx = i
	}
	lk.holders[last] = nil
	if keep {
		lk.holders[last] = h
	}
	lk.holders = lk.holders[:last]
	h.idx = -1
}

// end removes h from lk's holders for reason, and has its watchers and
// context told once the operation lets go.
func (o *op) end(lk *lock, h *holder, reason error) {
	if h.x == nil {
		if reason == store.ErrReleased { //nolint:errorlint // the sentinel itself: released by its holder
			lk.remove(h, true)
		} else {
			lk.remove(h, false)
			h.x = &holderExt{cause: reason}
		}
		return
	}
	x := h.x
	if !x.expires.IsZero() {
		lk.nexp--
	}
	x.cause = reason
	if len(x.watch) > 0 || x.cancel != nil {
		o.fire = append(o.fire, firing{fs: x.watch, f: x.cancel, reason: reason})
		x.watch = nil
	}
	keep := reason == store.ErrReleased && x.ctx == nil //nolint:errorlint // as above
	if keep {
		h.x = nil
	}
	lk.remove(h, keep)
}

// find returns the record of ref's hold on lk (with token, unless 0).
func (lk *lock) find(ref store.Ref, token int64) *holder {
	for _, h := range lk.holders {
		if (token == 0 || h.token == token) && h.ref == ref {
			return h
		}
	}
	if !ref.Generated() {
		// A generated ref may be named by its text.
		for _, h := range lk.holders {
			if (token == 0 || h.token == token) && h.ref.Generated() && h.ref.Equal(ref) {
				return h
			}
		}
	}
	return nil
}

// load returns the lock named name, or nil.
func (s *Store) load(name string) *lock {
	return s.locks.Load(name)
}

// get returns the lock named name, creating a family member on first use
// when create. It reports NotFound for a name nothing covers, and a nil
// lock with no error for a family member not in use (create false). It
// must not be called with a lock's mutex held (it may take the store's),
// unless global, which says the store's mutex is held.
func (s *Store) get(name string, create, global bool) (*lock, error) {
	if lk := s.load(name); lk != nil {
		return lk, nil
	}
	if !global {
		s.mu.Lock()
		defer s.mu.Unlock()
		if lk := s.load(name); lk != nil {
			return lk, nil
		}
	}
	fam := s.familyOf(name)
	if fam == nil {
		return nil, store.NotFound(name)
	}
	if !create {
		return nil, nil
	}
	lk := &lock{name: name, slots: int32(fam.slots), token: s.floor.Load()}
	s.locks.Store(name, lk)
	return lk, nil
}

// familyOf returns the family that covers name, or nil; the store's mutex
// is held.
func (s *Store) familyOf(name string) *family {
	var fam *family
	if len(s.fams) > 0 {
		store.FamilyOf(name, func(p string) bool {
			fam = s.fams[p]
			return fam == nil
		})
	}
	return fam
}

// forget drops a family member that nobody holds or waits for; lk's mutex
// is held.
func (s *Store) forget(lk *lock) {
	if lk.defined || len(lk.holders) > 0 || len(lk.waits()) > 0 || lk.gone {
		return
	}
	s.stopTimer(lk)
	lk.gone = true
	s.raiseFloor(lk.token) // before the name is free to be made again
	s.locks.CompareAndDelete(lk.name, lk)
}

// covered returns NotFound for the first name of h that no definition or
// family covers, else nil. The store's mutex is held (global).
func (s *Store) covered(h *store.Handle) error {
	var err error
	h.Each(func(l store.Lock) {
		if err == nil {
			_, err = s.get(l.Name, false, true)
		}
	})
	return err
}

// raiseFloor makes the store's token floor at least t.
func (s *Store) raiseFloor(t int64) {
	for {
		f := s.floor.Load()
		if f >= t || s.floor.CompareAndSwap(f, t) {
			return
		}
	}
}
