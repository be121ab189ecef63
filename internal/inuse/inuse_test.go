package inuse

import (
	"errors"
	"testing"

	"github.com/sleeplock/sleeplock/store"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type lock struct {
	name             string
	holders, waiters int
}

func use(l lock) (string, int, int) { return l.name, l.holders, l.waiters }

// The totals count every lock, and the error names the first one in use.
func TestCount(t *testing.T) {
	var d store.Deleted
	err := Count(&d, []lock{{"a", 0, 0}, {"b", 0, 2}, {"c", 1, 1}}, use)
	if err == nil || err.Lock != "b" || err.Holders != 1 || err.Waiters != 3 || !errors.Is(err, store.ErrInUse) {
		t.Fatalf("Count = %+v, want lock b, 1 holder, 3 waiters", err)
	}
	if d.Holds != 1 || d.Waiters != 3 {
		t.Fatalf("Deleted = %+v, want 1 hold, 3 waiters", d)
	}
}

// Locks no one holds or waits for are not in use, and the totals add to
// what d had.
func TestCountIdle(t *testing.T) {
	d := store.Deleted{Holds: 2}
	if err := Count(&d, []lock{{"a", 0, 0}}, use); err != nil {
		t.Fatalf("Count = %v, want nil", err)
	}
	if err := Count(&d, nil, use); err != nil {
		t.Fatalf("Count of no lock = %v, want nil", err)
	}
	if d.Holds != 2 || d.Waiters != 0 {
		t.Fatalf("Deleted = %+v, want it unchanged", d)
	}
}
