package sleeplock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/memstore"
)

// Locks.Delete checks its input before the store sees it and deletes what
// it names: a bad name is ErrInvalidName and changes nothing, a lock in
// use is ErrInUse unless forced, and a deleted lock is gone (ErrNotFound).
func TestLocksDeleteChecksAndDeletes(t *testing.T) {
	l := sleeplock.New(memstore.New())
	ctx := context.Background()
	must(t, l.Define(ctx, "d", 1))
	must(t, l.Define(ctx, "fam/*", 2))
	if _, err := l.Delete(ctx, "bad\x00name"); !errors.Is(err, sleeplock.ErrInvalidName) {
		t.Fatalf("Delete of a bad name = %v, want ErrInvalidName", err)
	}
	x, err := l.Acquire(ctx, "d", sleeplock.Ref("h"))
	must(t, err)
	if _, err := l.Delete(ctx, "d"); !errors.Is(err, sleeplock.ErrInUse) {
		t.Fatalf("Delete of a held lock = %v, want ErrInUse", err)
	}
	wantUse(t, l, "d", 1, 1, 0)
	del, err := l.Delete(ctx, "d", nil, sleeplock.Force())
	must(t, err)
	if del.Holds != 1 {
		t.Fatalf("forced Delete ended %d holds, want 1", del.Holds)
	}
	if _, err := x.Held(ctx); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("Held of a lease of the deleted lock = %v, want ErrNotFound", err)
	}
	if _, err := l.Delete(ctx, "fam/*"); err != nil {
		t.Fatalf("Delete of an idle family = %v", err)
	}
	for _, name := range []string{"d", "fam/a"} {
		if _, err := l.State(ctx, name); !errors.Is(err, sleeplock.ErrNotFound) {
			t.Fatalf("State(%q) after Delete = %v, want ErrNotFound", name, err)
		}
	}
	must(t, l.Close())
	if _, err := l.Delete(ctx, "d"); !errors.Is(err, sleeplock.ErrClosed) {
		t.Fatalf("Delete on closed Locks = %v, want ErrClosed", err)
	}
}

// Locks.Resize checks its input before the store sees it and resizes what
// it names: a bad name or slot count changes nothing, a good one changes
// the slots that State reports.
func TestLocksResizeChecksAndResizes(t *testing.T) {
	l := sleeplock.New(memstore.New())
	ctx := context.Background()
	must(t, l.Define(ctx, "r", 1))
	if err := l.Resize(ctx, "bad\x00name", 2); !errors.Is(err, sleeplock.ErrInvalidName) {
		t.Fatalf("Resize of a bad name = %v, want ErrInvalidName", err)
	}
	if err := l.Resize(ctx, "r", 0); !errors.Is(err, sleeplock.ErrInvalid) {
		t.Fatalf("Resize to 0 slots = %v, want ErrInvalid", err)
	}
	if st, err := l.State(ctx, "r"); err != nil || st.Slots != 1 {
		t.Fatalf("after refused resizes: %+v %v, want 1 slot", st, err)
	}
	must(t, l.Resize(ctx, "r", 3))
	if st, err := l.State(ctx, "r"); err != nil || st.Slots != 3 {
		t.Fatalf("after Resize to 3: %+v %v", st, err)
	}
	must(t, l.Close())
	if err := l.Resize(ctx, "r", 2); !errors.Is(err, sleeplock.ErrClosed) {
		t.Fatalf("Resize on closed Locks = %v, want ErrClosed", err)
	}
}
