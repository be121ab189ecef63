package pgstore

import (
	"hash/maphash"
	"sync/atomic"
	"time"
)

// fastHints remembers, per lock name (hashed into a fixed table, so two
// names may share an entry), whether the store last saw the lock fast: its
// state all in its row, which one UPDATE grants or releases (acquireFast,
// releaseFast). Those statements settle nothing for a lock that is held,
// queued or has several slots held: the store would then need a second
// statement. So the store sends them only for a lock it saw fast, and
// otherwise the function that settles every case (acquire_one(),
// release_one()); a lock it has not seen counts as slow. A wrong hint costs
// one round trip more, never a wrong answer.
//
// A lock that was contended (a caller of this store queued for it, or a
// release found its row taken from under a fast hint) stays slow for the
// next contendedSightings times the store sees it fast. Without that, a
// lock taken in turns by callers of several stores would be seen free at
// each grant and queued for right after, and every release would pay the
// second statement within the handoff.
type fastHints struct {
	seed maphash.Seed
	// > 0: seen fast; 0: slow; < 0: contended, slow for that many more
	// sightings of the lock fast.
	table [1024]atomic.Int32
	// many: the lock last seen had several slots (a fast lock's holders
	// are then in its row's slot arrays, which acquireSlot and releaseSlot
	// grant and free).
	many [1024]atomic.Bool
	// weightedInRow: the store last granted the lock a weighted hold in
	// its row (acquire_weighted.sql), which its release frees by the
	// scalar statement (releaseWeighted) whatever many says.
	weightedInRow [1024]atomic.Bool
	// sampled: when this store last sent a release that times its hold
	// by time, not by token (UnixNano; see sampleDue), per entry.
	sampled [1024]atomic.Int64
}

// holdSampleEvery is how often a release of a lock (of the locks sharing
// its entry) times its hold although its token is not timed(): so that a
// lock taken every minute, or once per process as a cron job's is, has
// hold times, where 1 in 256 by token alone leaves it none. 0: never
// (tests of the token rule).
var holdSampleEvery atomic.Int64

func init() { holdSampleEvery.Store(int64(30 * time.Second)) }

// sampleDue reports whether a release of name at now (UnixNano) is due to
// time its hold: none was timed by time through its entry in the last
// holdSampleEvery. Of concurrent callers at most one gets true.
func (h *fastHints) sampleDue(name string, now int64) bool {
	every := holdSampleEvery.Load()
	if every <= 0 {
		return false
	}
	e := &h.sampled[h.index(name)]
	last := e.Load()
	return (last == 0 || now-last >= every) && e.CompareAndSwap(last, now)
}

// samplePeek reports whether a hold of one of names that ends now is due
// to be timed by time (as sampleDue, but taking nothing): an acquisition
// sends it, so that an expired hold it takes over is timed; the store then
// takes the sample (sampleDue) when a takeover came back.
func (h *fastHints) samplePeek(names []string, now int64) bool {
	every := holdSampleEvery.Load()
	if every <= 0 {
		return false
	}
	for _, n := range names {
		if last := h.sampled[h.index(n)].Load(); last == 0 || now-last >= every {
			return true
		}
	}
	return false
}

// slotModeMax is the most slots a lock may have for its row to go to slot
// mode (one element of the row's arrays per slot: acquire_one.sql,
// grant_in_row()). A wider lock keeps its holders in holder rows, or
// its one holder in the row in scalar mode, which acquireFast grants: the
// store sends acquireSlot and releaseSlot only for a lock of 2 to
// slotModeMax slots.
const slotModeMax = 1024

// contendedSightings is how many times a contended lock must be seen fast
// before the store sends it the fast statements again.
const contendedSightings = 16

func (h *fastHints) init() { h.seed = maphash.MakeSeed() }

func (h *fastHints) index(name string) uint64 {
	return maphash.String(h.seed, name) % uint64(len(h.table))
}

func (h *fastHints) entry(name string) *atomic.Int32 { return &h.table[h.index(name)] }

// isMany reports whether name was last seen with several slots.
func (h *fastHints) isMany(name string) bool { return h.many[h.index(name)].Load() }

// setMany records whether name has several slots, at most slotModeMax.
func (h *fastHints) setMany(name string, many bool) { h.many[h.index(name)].Store(many) }

// isWeightedInRow reports whether the store last granted name a weighted hold in
// its row.
func (h *fastHints) isWeightedInRow(name string) bool { return h.weightedInRow[h.index(name)].Load() }

// setWeightedInRow records whether the store last granted name a weighted hold in
// its row.
func (h *fastHints) setWeightedInRow(name string, weighted bool) {
	h.weightedInRow[h.index(name)].Store(weighted)
}

// is reports whether name was last seen fast.
func (h *fastHints) is(name string) bool { return h.entry(name).Load() > 0 }

// set records whether name was seen fast; a sighting of a contended lock
// fast counts down its contention instead.
func (h *fastHints) set(name string, fast bool) {
	e := h.entry(name)
	for {
		v := e.Load()
		n := int32(0)
		switch {
		case !fast && v < 0:
			return // contended stays contended
		case fast && v < -1:
			n = v + 1
		case fast:
			n = 1
		}
		if v == n || e.CompareAndSwap(v, n) {
			return
		}
	}
}

// contended records that name was contended: slow for the next
// contendedSightings times it is seen fast.
func (h *fastHints) contended(name string) { h.entry(name).Store(-contendedSightings) }
