package storetest

import (
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

// A holder that stopped renewing is visible before its expiry (issue 42):
// State's holder detail dates its last renewal (Holder.Kept: not dated back
// for a hold) and says it is late (Holder.Late) once half its length has
// passed since, a renewal owed every third of it. Keep makes it on time
// again.

// holderOf returns the holder of lock with ref ref in its State's detail.
func holderOf(t *testing.T, l *sleeplock.Locks, lock, ref string) (sleeplock.Holder, time.Time) {
	t.Helper()
	st, err := l.StateDetail(ctx(t), lock)
	must(t, err)
	for _, h := range st.Holders {
		if h.Ref == ref {
			return h, st.Now
		}
	}
	t.Fatalf("State of %s: no holder %q in %+v", lock, ref, st.Holders)
	return sleeplock.Holder{}, time.Time{}
}

var _ = add("Late/NoRenewal", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	define(t, l, "late", 1)
	x, err := l.TryAcquire(ctx(t), "late", sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive(), sleeplock.Ref("stuck"))
	must(t, err)
	h, now := holderOf(t, l, "late", "stuck")
	if h.Length() != time.Hour || h.LateAfter() != 30*time.Minute {
		t.Fatalf("Length %v, LateAfter %v of a one-hour lease, want 1h0m0s and 30m0s (%+v)", h.Length(), h.LateAfter(), h)
	}
	if h.Kept().IsZero() || h.Kept().After(now) || !h.Kept().Equal(h.Renewed) || h.Late(now) {
		t.Fatalf("a lease just taken: Kept %v, Late %v at %v, want Kept = Renewed, not after now, not late (%+v)", h.Kept(), h.Late(now), now, h)
	}
	e.advance(t, s, 20*time.Minute) // a third is past: a renewal is owed, but not late yet
	if h, now = holderOf(t, l, "late", "stuck"); h.Late(now) {
		t.Fatalf("late 20 minutes after its grant, before half its TTL: %+v at %v", h, now)
	}
	e.advance(t, s, 20*time.Minute) // 40 minutes: late, not expired
	h, now = holderOf(t, l, "late", "stuck")
	if !h.Late(now) || !h.Expires.After(now) {
		t.Fatalf("40 minutes after its grant with no renewal: Late %v, expires %v at %v, want late and live (%+v)", h.Late(now), h.Expires, now, h)
	}
	if got := now.Sub(h.Kept()); got < 40*time.Minute {
		t.Fatalf("last renewal %v before now, want at least 40m", got)
	}
	wantExpired(t, l, "late", 1, 0) // late is not expired: it still counts as running
	must(t, x.Keep(ctx(t)))
	h, now = holderOf(t, l, "late", "stuck")
	if h.Late(now) || now.Sub(h.Kept()) >= 20*time.Minute {
		t.Fatalf("after Keep: Late %v, last renewal %v ago, want on time and just now (%+v)", h.Late(now), now.Sub(h.Kept()), h)
	}
	e.advance(t, s, 2*time.Hour) // past its expiry: late too
	if h, now = holderOf(t, l, "late", "stuck"); !h.Late(now) {
		t.Fatalf("past its expiry and not late: %+v at %v", h, now)
	}
	must(t, x.Release(ctx(t)))
})

// A hold shorter than the TTL is owed a renewal every third of the hold:
// Kept is its real last renewal (Renewed is dated back by TTL-Hold), and
// it is late after half the hold.
var _ = add("Late/Hold", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	define(t, l, "late-hold", 1)
	x, err := l.TryAcquire(ctx(t), "late-hold", sleeplock.TTL(10*time.Hour), sleeplock.Hold(time.Hour),
		sleeplock.NoKeepAlive(), sleeplock.Ref("held"))
	must(t, err)
	h, now := holderOf(t, l, "late-hold", "held")
	if h.Length() != time.Hour || h.Late(now) || now.Sub(h.Kept()) >= 20*time.Minute || !h.Kept().After(h.Renewed) {
		t.Fatalf("a one-hour hold of a ten-hour TTL just taken: Length %v, Late %v, Kept %v ago, Renewed %v, want 1h, on time, just now, after Renewed (%+v)",
			h.Length(), h.Late(now), now.Sub(h.Kept()), h.Renewed, h)
	}
	e.advance(t, s, 40*time.Minute)
	if h, now = holderOf(t, l, "late-hold", "held"); !h.Late(now) {
		t.Fatalf("40 minutes into a one-hour hold with no renewal, not late: %+v at %v", h, now)
	}
	must(t, x.Release(ctx(t)))
})
