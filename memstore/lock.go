package memstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// lock is a defined lock or a family member in use.
//
// Its holders are recorded in one of two places. While the fast word is
// live (its frozen bit clear, see fast.go), the word is the record of the
// last token and of the holders it granted: token may lag behind the
// word's, nobody waits, plain leases are granted and released on the word
// with no mutex, and holders has only the bare records the word was made
// beside, whose slots the word counts (they change only under mu). Nobody
// holds mu while the word is live: lockMu freezes the word as soon as it
// has taken mu, and unlockMu makes it again (thaw) only just before it
// lets go. While the word is frozen, the fields below it are the record,
// guarded by mu; the queue's count of waiters for several locks (multi)
// also by the store's mutex (it changes only under both). rng and name
// are set when the lock is made and never change; st (which names the
// store) changes only when a family member becomes a defined lock.
type lock struct {
	fast    atomic.Uint64 // the fast word: see fast.go and above
	mu      sync.Mutex
	token   int64          // the last fencing token granted, while frozen: see nextToken
	rng     store.RefRange // the refs of plain leases, by token (plainRef); set when made
	name    string
	st      *lockStats // its counters: its own (defined), or its family's; and its store (see store)
	slots   int32
	nexp    int32 // holders with an expiry
	heavy   int32 // the slots holders take beyond one each: the sum of their w1
	defined bool  // defined by name; else a member of the family familyOf finds
	gone    bool  // forgotten: whoever finds it looks the name up again
	timed   bool  // has a timer in the store's timers
	indexed bool  // its holders are indexed by token in the store's byTok
	// holders are unordered (State sorts them). Past their length, up to
	// their capacity, the slice keeps released records for reuse.
	holders []*holder
	queue   *waitQueue // nil until a caller first waits or a plain lease takes a weight (view)
	// The first holders slice and record live in the lock record itself,
	// so a one-slot lock's grant touches one object (see newHolder).
	first [1]*holder
	own   holder
}

// holder is the record of one hold of a lock. Nothing outside the lock
// points at it (a plain lease of package sleeplock is its lock and token,
// see package internal/plain), so an ended record is reused for the next hold; what a plain
// lease may still ask of an ended hold is kept aside (lostLease).
type holder struct {
	ref   store.Ref
	token int64
	idx   int32 // index in lk.holders; -1 once ended
	w1    int32 // the hold's weight minus one (0 for most holds): see lock.heavy
	x     *holderExt
}

// holderExt holds what most holds do not have.
type holderExt struct {
	more      int32 // re-entrant holds beyond the first (Counted)
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

// holds returns the re-entrant holds of h: 1 unless Counted re-entered.
func (h *holder) holds() int32 {
	if h.x == nil {
		return 1
	}
	return 1 + h.x.more
}

// unhold takes one re-entrant hold off h: false when h has only one (the
// release ends it).
func (h *holder) unhold() bool {
	if x := h.x; x != nil && x.more > 0 {
		x.more--
		return true
	}
	return false
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

// used returns the slots lk's holders take, each with its weight.
func (lk *lock) used() int { return len(lk.holders) + int(lk.heavy) }

// weight returns the slots h takes.
func (h *holder) weight() int { return int(h.w1) + 1 }

// setWeight makes h, a new holder of lk, take w slots.
func (lk *lock) setWeight(h *holder, w int) {
	h.w1 = int32(w - 1)
	lk.heavy += h.w1
}

// nextToken returns a new fencing token of lk. Tokens grow per lock: each
// lock counts its own grants (no memory shared with other locks), starting
// from the store's floor, the highest token of any lock record forgotten
// before this one was made, so a family member that is forgotten and made
// again never grants a token it granted before.
//
// It counts the grant, which waited wait (negative: did not wait), in
// lk's stats, and times it when it is sampled, by token or by time
// (HoldSampling).
func (lk *lock) nextToken(wait time.Duration) int64 {
	lk.token++
	if !lk.defined || wait >= 0 { // else counted by its token (see granted)
		lk.st.granted(!lk.defined, wait)
	}
	lk.sampled(lk.token)
	lk.st.startTimed(lk, lk.token)
	return lk.token
}

// newHolder adds a holder record for ref with a new token to lk; the
// grant waited wait (negative: did not wait).
func (lk *lock) newHolder(ref store.Ref, wait time.Duration) *holder {
	token := lk.nextToken(wait)
	h := lk.newRecord()
	h.ref, h.token = ref, token
	lk.indexToken(h)
	return h
}

// newPlainHolder adds the holder record of a plain lease with a new token
// to lk: its ref is its token's (plainRef).
func (lk *lock) newPlainHolder(wait time.Duration) *holder {
	token := lk.nextToken(wait)
	h := lk.newRecord()
	h.ref, h.token = lk.plainRef(token), token
	lk.indexToken(h)
	return h
}

// newRecord adds a holder record to lk (a released one reused, or a new
// one) with its index set; the caller fills in the rest.
func (lk *lock) newRecord() *holder {
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
	h.idx = int32(n)
	return h
}

// remove takes h out of lk's holders and leaves its record past their end
// for reuse.
func (lk *lock) remove(h *holder) {
	i, last := h.idx, int32(len(lk.holders)-1)
	if i != last {
		lk.holders[i] = lk.holders[last]
		lk.holders[i].idx = i
	}
	lk.holders[last] = h
	lk.holders = lk.holders[:last]
	h.idx = -1
	lk.heavy -= h.w1
	h.w1 = 0
	if h.token&(HoldSampling-1) == 0 {
		lk.endSample(h.token)
	} else if st := lk.st; st != nil && st.timing.Load() {
		st.endTimed(lk, h.token)
	}
	if lk.indexed {
		lk.unindex(h, false)
	}
}

// end removes h from lk's holders for reason, and has its watchers and
// context told once the operation lets go.
func (o *op) end(lk *lock, h *holder, reason error) {
	lost := reason != store.ErrReleased //nolint:errorlint // the sentinel itself
	if !lk.defined || lost {            // else counted by its token (see endedHold)
		lk.st.endedHold(!lk.defined, lost, o.expiring)
	}
	x := h.x
	if x == nil {
		if lost { // a plain lease released by its holder keeps nothing (see ended)
			o.s.ended(lk, h, reason, nil)
		}
		lk.remove(h)
		return
	}
	if !x.expires.IsZero() {
		lk.nexp--
	}
	x.cause = reason
	if len(x.watch) > 0 || x.cancel != nil {
		o.fire = append(o.fire, firing{fs: x.watch, f: x.cancel, reason: reason})
		x.watch = nil
	}
	o.s.ended(lk, h, reason, x.ctx)
	h.x = nil // nobody looks at an ended record: it is reused
	lk.remove(h)
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

// multi reports whether a waiter for several locks is queued for lk;
// lk.mu or the store's mutex is held. An operation that may change such a
// lock takes the store's mutex too (see op.enter). The count lives with
// the queue, as the other counts of waiters do, so that the lock record
// stays small.
func (lk *lock) multi() bool { return lk.queue != nil && lk.queue.multi > 0 }

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
	rng := s.newRange() // before the floor is read: see newRange
	lk := &lock{name: name, slots: int32(fam.slots), token: s.floor.Load(), rng: rng, st: fam.st}
	lk.fast.Store(fastFrozen) // a family member: never made
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
	s.freeRange(lk.rng) // after the floor: see newRange
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

// Plain leases (package sleeplock's plain path) are named by their lock and
// token alone: a lease is a small value, and its ref is the token's in the
// lock's RefRange. A lock record's range is taken when it is made and,
// when a family member is forgotten, given back to the store for a later
// record: that record's tokens start above the store's floor, which the
// forget raised to the forgotten record's last token first, so the refs
// of the two never meet.

// plainRefLimit bounds the tokens of plain leases: a lock past it (after
// about 10^12 grants), or with no range, grants the general way (see
// errNotPlain).
const plainRefLimit = 1<<store.RefRangeBits - 1<<20

// plainRef is the ref of lk's plain lease of token t.
func (lk *lock) plainRef(t int64) store.Ref { return lk.rng.Ref(uint64(t)) }

// plainOK reports whether lk may grant plain leases now. lk.mu is held.
func (lk *lock) plainOK() bool { return !lk.rng.IsZero() && lk.token < plainRefLimit }

// isPlain reports whether h is the record of a plain lease.
func (lk *lock) isPlain(h *holder) bool {
	return !lk.rng.IsZero() && h.ref == lk.plainRef(h.token)
}

// byTokenIndexAt is the number of holders from which byToken keeps an
// index instead of searching. The index lives aside (tokenIndexes), so
// that the lock record stays small.
const byTokenIndexAt = 32

// tokenIndexes maps a *lock with lk.indexed to its holders by token.
var tokenIndexes sync.Map

// index returns lk's index; lk.indexed, lk.mu held.
func (lk *lock) index() map[int64]*holder {
	v, _ := tokenIndexes.Load(lk)
	return v.(map[int64]*holder) //nolint:forcetypeassert // only these are stored
}

// byToken returns the record of lk's holder with token t, or nil. lk.mu
// is held and lk frozen.
func (lk *lock) byToken(t int64) *holder {
	if lk.indexed {
		return lk.index()[t]
	}
	if len(lk.holders) >= byTokenIndexAt {
		ix := make(map[int64]*holder, len(lk.holders))
		for _, h := range lk.holders {
			ix[h.token] = h
		}
		tokenIndexes.Store(lk, ix)
		lk.indexed = true
		return ix[t]
	}
	for _, h := range lk.holders {
		if h.token == t {
			return h
		}
	}
	return nil
}

// indexToken adds h, a new holder, to lk's index when it has one.
func (lk *lock) indexToken(h *holder) {
	if lk.indexed {
		lk.index()[h.token] = h
	}
}

// unindex takes h, a holder leaving, out of lk's index, and drops the
// index with the last holder (or, with all, when the store closes).
func (lk *lock) unindex(h *holder, all bool) {
	if h != nil {
		delete(lk.index(), h.token)
	}
	if all || len(lk.holders) == 0 {
		tokenIndexes.Delete(lk)
		lk.indexed = false
	}
}

// newRange returns a RefRange for a new lock record: one a forgotten
// record gave back, else a new one (the zero RefRange once the process has
// none left: that lock grants no plain leases). The caller reads the
// store's floor after this, so a reused range's old tokens are below it.
func (s *Store) newRange() store.RefRange {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	if n := len(s.rngFree); n > 0 {
		r := s.rngFree[n-1]
		s.rngFree = s.rngFree[:n-1]
		return r
	}
	return store.NewRefRange()
}

// freeRange gives back the range of a forgotten record.
func (s *Store) freeRange(r store.RefRange) {
	if r.IsZero() {
		return
	}
	s.rngMu.Lock()
	s.rngFree = append(s.rngFree, r)
	s.rngMu.Unlock()
}
