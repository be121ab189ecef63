package memstore

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sleeplock/sleeplock/store"
)

// HoldSampling is N of "1 in N": the grants of a lock whose fencing token
// is a multiple of it are timed from grant to end, for the hold-time
// histogram of Stats (store.Stats.Holds). The others read no clock. A
// power of 2.
//
// Holds are also sampled by time, from the store's first Stats read on
// (as waits are: a store whose stats nobody reads times nothing more),
// so that a lock taken seldom (a cron job's, once a minute) has figures:
// the next grant of a lock (of a family: of any member) after a Stats
// read is timed whatever its token, unless one so timed began less than
// HoldSampleEvery before the read. A lock due to be timed so keeps no
// fast word until that grant (see thaw), which the mutex path times: the
// fast path itself tests nothing more, and reads no clock.
const HoldSampling = 256

// HoldSampleEvery is how often, at most, a lock's hold is timed by time
// rather than by token (see HoldSampling): a Stats read (a metrics
// scrape) this long after the last one began arms the next.
const HoldSampleEvery = 30 * time.Second

// HoldSampling is a power of 2 (a grant on the fast word tests a mask): this does
// not compile otherwise.
const _ uint = 0 - HoldSampling&(HoldSampling-1)

// lockStats are the counters of a defined lock, or of a family and all
// its members (every member record points at its family's). They are
// changed only off the fast word: the fast word's grants and
// releases are counted by the word itself (its token and held bits), and
// Stats derives them. Guarded by mu, a leaf: taken under a lock's mutex,
// never the other way round.
type lockStats struct {
	s  *Store // the store of the locks that point here (kept here, not in every lock record)
	mu sync.Mutex
	// base is the token of a defined lock when it was defined: its grants
	// are its tokens since (the fast word counts them for free).
	base int64
	// acquired and ended count a family's grants and ended holds (its
	// members' tokens start anew each time one is made).
	acquired, ended uint64
	// refused, expired and lost as in store.Stats; waited is the number
	// of grants that waited, timed in waits.
	refused, expired, lost uint64
	waits, holds           store.Histogram

	// The hold timed by time (see HoldSampling). due: the next grant under
	// a lock's mutex is timed (a lock that is due keeps no fast word, see
	// thaw); set by Stats (rearm). timing: tlk is set, so a release under
	// the mutex looks (see remove).
	due, timing atomic.Bool
	tlk         *lock         // the lock of the hold being timed, nil when none (under mu)
	ttok        int64         // its token
	tat, tlast  time.Duration // when it began, and when the last one began (waitNano; 0: never)

	byToken atomic.Pointer[tokenWeights] // a defined lock's, once it grants a weight (see tokenWeights)
}

// store returns the store lk is in (nil for a record made by hand).
func (lk *lock) store() *Store {
	if lk.st == nil {
		return nil
	}
	return lk.st.s
}

// granted counts a grant of lk, which waited wait (negative: did not
// wait); lk.mu is held. A defined lock's grants are its tokens: only its
// waits are recorded here.
func (st *lockStats) granted(family bool, wait time.Duration) {
	if st == nil || (!family && wait < 0) {
		return
	}
	st.mu.Lock()
	if family {
		st.acquired++
	}
	if wait >= 0 {
		st.waits.Observe(wait)
	}
	st.mu.Unlock()
}

// ended counts the end of a hold of lk: released, or lost (released by
// someone else, or taken over: expired); lk.mu is held. A defined lock's
// releases are derived from its tokens and holders.
func (st *lockStats) endedHold(family, lost, expired bool) {
	if st == nil || (!family && !lost) {
		return
	}
	st.mu.Lock()
	if family {
		st.ended++
	}
	if lost {
		st.lost++
	}
	if expired {
		st.expired++
	}
	st.mu.Unlock()
}

// refusal counts a refused try.
func (st *lockStats) refusal() {
	if st == nil {
		return
	}
	st.mu.Lock()
	st.refused++
	st.mu.Unlock()
}

// sample is one timed grant (see HoldSampling): the store keeps a few,
// in a table indexed by lock and token, so the lock record does not grow.
// A sample overwritten before its hold ends is not observed.
type sample struct {
	mu  sync.Mutex
	lk  *lock
	tok int64
	at  time.Time
}

const sampleSlots = 64

func (s *Store) sampleOf(lk *lock, t int64) *sample {
	i := (uintptr(unsafe.Pointer(lk))>>6 ^ uintptr(t/HoldSampling)) % sampleSlots
	return &s.samples[i]
}

// sampleFor returns lk's store and the sample of token t of lk when t is
// sampled, nil otherwise.
func (lk *lock) sampleFor(t int64) (*Store, *sample) {
	if t&(HoldSampling-1) != 0 {
		return nil, nil
	}
	s := lk.store()
	if s == nil {
		return nil, nil
	}
	return s, s.sampleOf(lk, t)
}

// startSample times the grant of token t of lk when t is sampled.
func (lk *lock) startSample(t int64) {
	s, e := lk.sampleFor(t)
	if e == nil {
		return
	}
	now := s.waitClock() // one read of the monotonic clock: only the hold's length is kept
	e.mu.Lock()
	e.lk, e.tok, e.at = lk, t, now
	e.mu.Unlock()
}

// endSample observes the hold of token t of lk, which just ended, when
// it was timed.
func (lk *lock) endSample(t int64) {
	s, e := lk.sampleFor(t)
	if e == nil {
		return
	}
	e.mu.Lock()
	if e.lk != lk || e.tok != t {
		e.mu.Unlock()
		return
	}
	at := e.at
	e.lk = nil
	e.mu.Unlock()
	d := since(s.waitClock(), at)
	if st := lk.st; st != nil {
		st.mu.Lock()
		st.holds.Observe(d)
		st.mu.Unlock()
	}
}

// newStats returns the stats of a new definition of s. It is not due to
// time a grant until a Stats read (rearm): a lock defined and taken at
// once by many callers starts on its fast word.
func newStats(s *Store, base int64) *lockStats { return &lockStats{s: s, base: base} }

// startTimed times the hold of token t of lk, just granted under lk.mu,
// when st is due to time one (see HoldSampling): unless one is being
// timed already, or t is timed by its token.
// Small enough to inline into nextToken: a grant that is not due costs
// one load.
func (st *lockStats) startTimed(lk *lock, t int64) {
	if st != nil && st.due.Load() {
		st.timeHold(lk, t)
	}
}

// timeHold is startTimed of a grant while st is due.
func (st *lockStats) timeHold(lk *lock, t int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.due.Store(false)
	if st.tlk != nil || t&(HoldSampling-1) == 0 || st.s == nil {
		return
	}
	now := st.s.waitNano()
	st.tlk, st.ttok, st.tat, st.tlast = lk, t, now, now
	st.timing.Store(true)
}

// endTimed observes the hold of token t of lk, which just ended under
// lk.mu, when it is the one st times by time.
func (st *lockStats) endTimed(lk *lock, t int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.tlk != lk || st.ttok != t {
		return
	}
	st.holds.Observe(max(st.s.waitNano()-st.tat, 0))
	st.tlk = nil
	st.timing.Store(false)
}

// forget drops the hold of lk that st times, if any: lk's holds are
// counted elsewhere from now on (a family member defined as a lock).
func (st *lockStats) forget(lk *lock) {
	st.mu.Lock()
	if st.tlk == lk {
		st.tlk = nil
		st.timing.Store(false)
	}
	st.mu.Unlock()
}

// rearm makes st due to time the next grant when none was timed by time
// yet, or the last began HoldSampleEvery or more before now (waitNano),
// and none is being timed; st.mu is held.
func (st *lockStats) rearm(now time.Duration) {
	if st.tlk == nil && !st.due.Load() && (st.tlast == 0 || now-st.tlast >= HoldSampleEvery) {
		st.due.Store(true)
	}
}

// read adds st's counters to out; st.mu is held. A defined lock's
// grants, releases and holders come from the caller (lk).
func (st *lockStats) read(out *store.Stats) {
	out.Refusals += st.refused
	out.Expiries += st.expired
	out.Losses += st.lost
	out.Waits.Add(st.waits)
	out.Holds.Add(st.holds)
}

// Stats implements store.StatsReader: one pass over the locks, each under
// its mutex, as List; a family's counters are read under its stats'
// mutex, in one piece.
func (s *Store) Stats(ctx context.Context) ([]store.Stats, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	if !s.timeWaits.Load() {
		s.timeWaits.Store(true) // waits are timed from the first read on (see waited)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	out := make([]store.Stats, 0, len(s.fams)+16)
	fams := make(map[*lockStats]int, len(s.fams))
	tnow := s.waitNano() // to arm the sampling by time (rearm)
	for _, f := range s.fams {
		e := store.Stats{Name: f.pattern, Family: true, HoldSampling: HoldSampling}
		if st := f.st; st != nil {
			st.mu.Lock()
			st.rearm(tnow)
			st.read(&e)
			e.Acquisitions = st.acquired
			e.Releases = st.ended - st.expired
			st.mu.Unlock()
			fams[st] = len(out)
		}
		out = append(out, e)
	}
	now := s.clock.Now()
	s.locks.Range(func(lk *lock) bool {
		lk.lockMu()
		defer s.unlockMu(lk)
		if lk.gone {
			return true
		}
		running, expired := len(lk.holders), 0
		if lk.nexp > 0 {
			for _, h := range lk.holders {
				if exp := h.expires(); !exp.IsZero() && !exp.After(now) {
					running--
					expired++
				}
			}
		}
		if !lk.defined {
			if i, ok := fams[lk.st]; ok {
				e := &out[i]
				e.Slots += int(lk.slots)
				e.Locks++
				e.Running += running
				e.Expired += expired
				e.Waiting += len(lk.waits())
			}
			return true
		}
		e := store.Stats{Name: lk.name, Slots: int(lk.slots), Locks: 1, Running: running, Expired: expired,
			Waiting: len(lk.waits()), HoldSampling: HoldSampling}
		if st := lk.st; st != nil {
			st.mu.Lock()
			st.rearm(tnow) // the lock keeps no fast word once due (unlockMu)
			st.read(&e)
			st.mu.Unlock()
			e.Acquisitions = uint64(lk.token - st.base)
			e.Releases = e.Acquisitions - uint64(len(lk.holders)) - e.Expiries
		}
		out = append(out, e)
		return true
	})
	for i := range out {
		// Grants that did not wait are in the first bucket.
		e := &out[i]
		if e.Acquisitions > e.Waits.Count {
			e.Waits.Buckets[0] += e.Acquisitions - e.Waits.Count
			e.Waits.Count = e.Acquisitions
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

var _ store.StatsReader = (*Store)(nil)
