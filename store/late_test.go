package store_test

import (
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// Holder.Late: late once half its length has passed since its last
// renewal (Kept), the length being the hold when shorter than the TTL; a
// lease that never expires is never late.
func TestHolderLate(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ttl := store.Holder{Acquired: t0, Renewed: t0, Expires: t0.Add(30 * time.Second)}
	held := store.Holder{Acquired: t0, Renewed: t0.Add(-9 * time.Minute), Expires: t0.Add(time.Minute), Hold: time.Minute}
	forever := store.Holder{Acquired: t0, Renewed: t0}
	for _, c := range []struct {
		name   string
		h      store.Holder
		at     time.Duration
		late   bool
		kept   time.Time
		length time.Duration
	}{
		{"ttl, just taken", ttl, 0, false, t0, 30 * time.Second},
		{"ttl, a renewal owed", ttl, 12 * time.Second, false, t0, 30 * time.Second},
		{"ttl, at half", ttl, 15 * time.Second, false, t0, 30 * time.Second},
		{"ttl, past half", ttl, 15*time.Second + time.Microsecond, true, t0, 30 * time.Second},
		{"ttl, expired", ttl, time.Hour, true, t0, 30 * time.Second},
		{"hold, just kept", held, 0, false, t0, time.Minute},
		{"hold, past half of the hold", held, 31 * time.Second, true, t0, time.Minute},
		{"no TTL", forever, 1000 * time.Hour, false, time.Time{}, 0},
	} {
		if got := c.h.Late(t0.Add(c.at)); got != c.late {
			t.Errorf("%s: Late = %v, want %v", c.name, got, c.late)
		}
		if got := c.h.Kept(); !got.Equal(c.kept) {
			t.Errorf("%s: Kept = %v, want %v", c.name, got, c.kept)
		}
		if got := c.h.Length(); got != c.length {
			t.Errorf("%s: Length = %v, want %v", c.name, got, c.length)
		}
	}
}
