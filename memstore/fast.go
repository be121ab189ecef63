package memstore

import (
	"context"
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"
	"weak"

	"github.com/sleeplock/sleeplock/store"
)

// The fast word. A defined lock with at most fastMaxSlots slots, nobody
// waiting and no holder but plain leases (and a few bare records, see
// below) keeps its holders in one word, lk.fast, so that package sleeplock's plain TryAcquire and Release are one
// compare-and-swap each, with no mutex:
//
//	bit 0        frozen: the word holds nothing; the lock's state is in its
//	             records, under lk.mu (the lock is "frozen")
//	bits 1-5     the lock's slots
//	bits 6-8     extra: the slots the held grants take beyond one each,
//	             and those of the records beside the word (see below)
//	bits 9-23    the window: bit 9+k is set while the grant of token T-k
//	             is held (k < fastWindow)
//	bits 24-63   T, the lock's last fencing token
//
// A fast grant draws token T+1 and sets the window's bit 9 (shifting the
// window by one); a fast release clears its token's bit. A holder of a
// fast grant is named by the ref of its token in the lock's RefRange, so
// the word is the whole record of a grant of one slot. A grant of k > 1
// slots (a weighted plain lease) adds k-1 to extra, and its release, which
// knows k (its lease's Lock is the view of that weight), takes it back;
// the grant writes k, by its token, to the lock's token-weight table
// right after its compare-and-swap, for freeze to find (see
// tokenWeights). Weighted grants that would take extra past fastMaxExtra
// go the mutex path: extra
// is kept small so that the window stays long (a holder older than it
// freezes the lock, more often the shorter it is).
//
// Every operation that takes lk.mu first freezes the word (freeze): the
// held bits become holder records and lk.token takes T, so code under the
// mutex sees records only. While frozen, the word's grants find the frozen
// bit and take the mutex. The word is made again (thaw) when an operation
// lets go of the mutex and the lock has no waiter and nothing else that
// needs the mutex: no holder, or holders that are bare records (no TTL,
// kind, watcher, context or re-entry) taking at most fastMaxExtra slots
// and leaving one free. Such records stay beside the word, unchanged
// until the next freeze (only code under the mutex touches them), and
// their slots are in the word's extra from the start, so the word grants
// only the slots they leave; they are released under the mutex (their
// tokens are older than the word's window, whose bits are all clear when
// it is made). So a holder older than the window, or one that waited,
// costs the lock's other callers one freeze and thaw, not the fast word
// for as long as it holds: on two cores, a goroutine preempted while it
// holds a slot otherwise put every caller on the mutex until it ran
// again. A queue, a holder with a TTL, a kind, a watcher or a context, a
// family member, WithTimes and a closed store keep the lock frozen, and
// FIFO holds: a fast grant is only made with nobody queued.
//
// A frozen word holds nothing else but one hint, changed under lk.mu:
// fastQueued, set while the lock has a queue, so that a caller about to
// take the mutex to wait can read the clock for its wait before it does
// (queuedSince), not while it holds the mutex.
const (
	fastFrozen     = 1
	fastQueued     = 2
	fastSlotBits   = 5
	fastMaxSlots   = 1<<fastSlotBits - 1
	fastExtraShift = 1 + fastSlotBits
	fastExtraBits  = 3
	fastMaxExtra   = 1<<fastExtraBits - 1
	fastWindow     = 15
	fastWinShift   = fastExtraShift + fastExtraBits
	fastTokShift   = fastWinShift + fastWindow
	fastWinMask    = 1<<fastWindow - 1
	fastKeep       = fastMaxSlots<<1 | fastMaxExtra<<fastExtraShift // slots and extra
)

// The token takes the word's bits from fastTokShift up, and the tokens of
// plain leases stay below plainRefLimit, under 1<<store.RefRangeBits: this
// constant does not compile (a negative uint) if the window, the slot bits
// or RefRangeBits grow so that a token would overflow the word.
const _ uint = 64 - fastTokShift - store.RefRangeBits

// tryFast grants a slot of lk on the fast word: the granted token, or
// false when the lock is frozen, full, or its oldest fast holder would
// leave the window. The caller starts the grant's sample when it is one
// (sampled): kept out of this loop, which the call would slow.
func (lk *lock) tryFast() (int64, bool) {
	for {
		w := lk.fast.Load()
		if w&fastFrozen != 0 {
			return 0, false
		}
		win := w >> fastWinShift & fastWinMask
		used := uint64(bits.OnesCount64(win)) + w>>fastExtraShift&fastMaxExtra
		t := w >> fastTokShift
		if used >= w>>1&fastMaxSlots || win&(1<<(fastWindow-1)) != 0 || t >= plainRefLimit {
			return 0, false
		}
		nw := (t+1)<<fastTokShift | (win<<1|1)<<fastWinShift | w&fastKeep
		if lk.fast.CompareAndSwap(w, nw) {
			return int64(t + 1), true
		}
	}
}

// sampled starts the sample of the fast grant of token t when t is
// sampled (see HoldSampling).
func (lk *lock) sampled(t int64) {
	if t&(HoldSampling-1) == 0 {
		lk.startSample(t)
	}
}

// tryFastWeighted grants weight slots of lk (store.WeightAll: every
// slot) on the fast word, as one hold: the slots granted and the token,
// or false as tryFast, when the weight is more than the lock's slots (the
// mutex path refuses it) and when extra would pass fastMaxExtra.
func (lk *lock) tryFastWeighted(weight int) (int, int64, bool) {
	w := lk.fast.Load()
	if w&fastFrozen != 0 {
		return 0, 0, false
	}
	// The word was made (thaw) after lk.st was set for good: a defined
	// lock's stats never change, and its token-weight table is reached lock-free.
	tab := lk.st.tokenWeights()
	for {
		if w&fastFrozen != 0 {
			return 0, 0, false
		}
		slots := w >> 1 & fastMaxSlots
		need := uint64(store.Need(weight, int(slots)))
		win := w >> fastWinShift & fastWinMask
		extra := w >> fastExtraShift & fastMaxExtra
		t := w >> fastTokShift
		if uint64(bits.OnesCount64(win))+extra+need > slots || extra+need-1 > fastMaxExtra ||
			win&(1<<(fastWindow-1)) != 0 || t >= plainRefLimit {
			return 0, 0, false
		}
		nw := (t+1)<<fastTokShift | (win<<1|1)<<fastWinShift | (extra+need-1)<<fastExtraShift | slots<<1
		if lk.fast.CompareAndSwap(w, nw) {
			if need > 1 {
				tab.set(int64(t+1), int(need)) // freeze waits for it
			}
			if (t+1)&(HoldSampling-1) == 0 {
				lk.startSample(int64(t + 1))
			}
			return int(need), int64(t + 1), true
		}
		w = lk.fast.Load()
	}
}

// releaseFast releases the fast grant of token t, of need slots: false
// when the lock is frozen or t is not a held fast grant (the mutex path
// decides).
func (lk *lock) releaseFast(t int64, need int) bool {
	for {
		w := lk.fast.Load()
		if w&fastFrozen != 0 {
			return false
		}
		k := int64(w>>fastTokShift) - t
		if k < 0 || k >= fastWindow {
			return false
		}
		bit := uint64(1) << (fastWinShift + k)
		if w&bit == 0 || w>>fastExtraShift&fastMaxExtra < uint64(need-1) {
			return false
		}
		if lk.fast.CompareAndSwap(w, w&^bit-uint64(need-1)<<fastExtraShift) {
			if t&(HoldSampling-1) == 0 {
				lk.endSample(t)
			}
			return true
		}
	}
}

// releaseFast1 is releaseFast of a grant of one slot whose hold is not
// timed (see HoldSampling): small enough for the compiler to inline into
// Release, so that a plain release is one call. false: releaseFast
// decides.
func (lk *lock) releaseFast1(t int64) bool {
	if t&(HoldSampling-1) == 0 {
		return false
	}
	for {
		w := lk.fast.Load()
		k := int64(w>>fastTokShift) - t
		if w&fastFrozen != 0 || k < 0 || k >= fastWindow {
			return false
		}
		bit := uint64(1) << (fastWinShift + k)
		if w&bit == 0 {
			return false
		}
		if lk.fast.CompareAndSwap(w, w&^bit) {
			return true
		}
	}
}

// tokenWeights is where a defined lock's fast grants of more than one slot
// say their weight, for freeze: entry T%fastWindow holds T<<fastSlotBits
// | k while the grant of token T, of k slots, is on the fast word (an
// entry whose token is not T is another grant's, of a token out of the
// window: T's grant is of one slot). A grant writes its entry just after
// its compare-and-swap; freeze, which finds a weight it cannot place
// until then (the word's extra says how many slots it is looking for),
// waits for it. It also keeps the lock's views for weights of 2 to
// fastMaxSlots (see view), found without the mutex. Made on the first
// weighted grant of the lock, kept with its stats (not in the lock
// record, which most locks keep small).
type tokenWeights struct {
	entries [fastWindow]atomic.Uint64
	views   [fastMaxSlots - 1]atomic.Pointer[weightedLock]
}

// tokenWeights returns st's token-weight table, made on first use.
func (st *lockStats) tokenWeights() *tokenWeights {
	if tab := st.byToken.Load(); tab != nil {
		return tab
	}
	st.byToken.CompareAndSwap(nil, new(tokenWeights))
	return st.byToken.Load()
}

func (tab *tokenWeights) set(t int64, k int) {
	tab.entries[t%fastWindow].Store(uint64(t)<<fastSlotBits | uint64(k))
}

// weight returns the weight its entry gives the fast grant of token t, or
// 1 (no entry: a grant of one slot, or one that has not written it yet).
func (tab *tokenWeights) weight(t int64) int {
	if e := tab.entries[t%fastWindow].Load(); e>>fastSlotBits == uint64(t) {
		return int(e & fastMaxSlots)
	}
	return 1
}

// view returns lk's view for need slots (2 to fastMaxSlots), made on
// first use.
func (tab *tokenWeights) view(lk *lock, need int) *weightedLock {
	p := &tab.views[need-2]
	if v := p.Load(); v != nil {
		return v
	}
	p.CompareAndSwap(nil, &weightedLock{lk, need})
	return p.Load()
}

// heldFast reports, without the mutex, whether the fast grant of token t
// is held on the fast word (false: frozen, or not held).
func (lk *lock) heldFast(t int64) bool {
	w := lk.fast.Load()
	k := int64(w>>fastTokShift) - t
	return w&fastFrozen == 0 && k >= 0 && k < fastWindow && w&(1<<(fastWinShift+k)) != 0
}

// lostKey names a plain lease: its lock and token.
type lostKey struct {
	lk *lock
	t  int64
}

// lostLease is what is kept of a plain lease that ended with more to
// tell than store.ErrReleased: its lease finds its record by token only,
// and the record has left the lock. cause is kept when it was not released by
// its holder (an operator's release; rare, and small); ctx, the context
// its lease was given, is kept only while someone holds it (weak), so
// that asking again returns the same context.
type lostLease struct {
	cause error
	ctx   weak.Pointer[plainCtx]
}

// plainCtx is the context of a plain lease: a type of its own so that
// the store can keep it weakly once the lease has ended.
type plainCtx struct{ context.Context }

// ended keeps aside what the plain lease of h, which just ended for
// reason, may still ask for (lostLease): nothing for another lease's
// record, nor for a release by its holder before its context was made.
func (s *Store) ended(lk *lock, h *holder, reason error, ctx context.Context) {
	if !lk.isPlain(h) {
		return
	}
	var cause error
	if reason != store.ErrReleased { //nolint:errorlint // the sentinel itself
		cause = reason
	}
	c, _ := ctx.(*plainCtx)
	if cause == nil && c == nil {
		return // nothing to keep: no allocation
	}
	e := &lostLease{cause: cause}
	k := lostKey{lk, h.token}
	if c != nil {
		e.ctx = weak.Make(c)
		if e.cause == nil {
			runtime.AddCleanup(c, func(k lostKey) { s.lost.CompareAndDelete(k, e) }, k)
		}
	}
	s.lost.Store(k, e)
}

// lostOf returns what was kept of the ended plain lease of token t of
// lk, or nil.
func (s *Store) lostOf(lk *lock, t int64) *lostLease {
	if v, ok := s.lost.Load(lostKey{lk, t}); ok {
		return v.(*lostLease) //nolint:forcetypeassert // only *lostLease is stored
	}
	return nil
}

// lockMu takes lk's mutex and freezes lk: code under the mutex sees
// records only.
func (lk *lock) lockMu() {
	lk.mu.Lock()
	if lk.fast.Load()&fastFrozen == 0 {
		lk.freeze()
	}
}

// unlockMu lets go of lk's mutex, making the fast word again when lk
// needs no mutex (thaw).
func (s *Store) unlockMu(lk *lock) {
	if q := lk.queue; q == nil || len(q.ws) == 0 { // else thaw makes no word
		s.thaw(lk)
	}
	lk.mu.Unlock()
}

// freeze makes lk's records the whole of its state: the fast word's held
// grants become holder records, each of its weight, and lk.token its last
// token. lk.mu is held. Cheap when frozen already (one atomic load).
func (lk *lock) freeze() {
	w := lk.fast.Load()
	for w&fastFrozen == 0 {
		if lk.fast.CompareAndSwap(w, fastFrozen) {
			t := int64(w >> fastTokShift)
			lk.token = t
			win := w >> fastWinShift & fastWinMask
			// extra counts the slots of the records the word was made
			// with (see thaw), which have not changed since: the rest
			// are the word's weighted grants'.
			extra := int(w>>fastExtraShift&fastMaxExtra) - lk.used()
			var tab *tokenWeights
			if extra > 0 {
				tab = lk.st.tokenWeights()
			}
			var light [fastWindow]*holder // the records of weight 1 so far
			n := 0
			for win != 0 {
				k := bits.TrailingZeros64(win)
				win &^= 1 << k
				tok := t - int64(k)
				h := lk.newRecord()
				h.ref, h.token = lk.plainRef(tok), tok
				lk.indexToken(h)
				if extra > 0 {
					if wt := tab.weight(tok); wt > 1 {
						lk.setWeight(h, wt)
						extra -= wt - 1
					} else {
						light[n] = h
						n++
					}
				}
			}
			for extra > 0 {
				// A weighted grant between its compare-and-swap and its
				// entry: it writes it next.
				runtime.Gosched()
				for i, h := range light[:n] {
					if h != nil {
						if wt := tab.weight(h.token); wt > 1 {
							lk.setWeight(h, wt)
							extra -= wt - 1
							light[i] = nil
						}
					}
				}
			}
			return
		}
		w = lk.fast.Load()
	}
}

// hintQueued sets or clears the fastQueued hint of lk's frozen word.
// lk.mu is held (so the word is frozen, and nothing else changes it).
func (lk *lock) hintQueued(queued bool) {
	if w := lk.fast.Load(); w&fastFrozen != 0 {
		if queued {
			lk.fast.Store(fastFrozen | fastQueued)
		} else {
			lk.fast.Store(fastFrozen)
		}
	}
}

// queuedSince returns, for a caller that may wait for lk and has not yet
// taken its mutex, the time its wait starts when lk has a queue (so the
// caller is about to join it); else the zero time, and park reads the
// clock if the caller does wait. The read is out of the mutex, which
// every release of a queued lock needs.
func (s *Store) queuedSince(lk *lock, wait bool) time.Duration {
	if wait && !s.times && lk.fast.Load() == fastFrozen|fastQueued {
		return s.waitNano()
	}
	return 0
}

// queuedWaiter returns, for a caller that may wait for lk and has not yet
// taken its mutex, its waiter from the pool, dated (queuedSince), when lk
// has a queue; else nil. Out of the mutex, as the clock read: the pool's
// Get is not made while the releasers of a queued lock wait for it.
func (s *Store) queuedWaiter(lk *lock, wait bool) *waiter {
	since := s.queuedSince(lk, wait)
	if since == 0 {
		return nil
	}
	w := waiters.Get().(*waiter)
	w.queued = since
	return w
}

// putWaiter gives back to the pool a waiter of queuedWaiter's that did
// not wait (nil: none).
func putWaiter(w *waiter) {
	if w != nil {
		w.queued = 0
		waiters.Put(w)
	}
}

// thaw makes the fast word again when lk needs no mutex: a defined lock
// with few slots, nobody waiting, not due to time its next hold (see
// HoldSampling), on a store that is open and records no times, whose holders (if any) are bare records that leave a slot free
// and fit in the word's extra, which counts them. lk.mu is held and is
// let go right after (or lk is not shared yet).
func (s *Store) thaw(lk *lock) {
	if !lk.defined || lk.gone || lk.multi() || len(lk.waits()) > 0 || (lk.st != nil && lk.st.due.Load()) ||
		lk.slots > fastMaxSlots || !lk.plainOK() || lk.token < 0 || s.times || s.closed.Load() ||
		lk.fast.Load()&fastFrozen == 0 {
		return
	}
	used := lk.used()
	if used > 0 && (used >= int(lk.slots) || used > fastMaxExtra || lk.nexp > 0 || lk.timed || !lk.bare()) {
		return
	}
	lk.fast.Store(uint64(lk.token)<<fastTokShift | uint64(used)<<fastExtraShift | uint64(lk.slots)<<1)
}

// bare reports whether no holder of lk has more than a ref, a token and a
// weight (no kind, TTL, watcher, context or re-entry). lk.mu is held.
func (lk *lock) bare() bool {
	for _, h := range lk.holders {
		if h.x != nil {
			return false
		}
	}
	return true
}
