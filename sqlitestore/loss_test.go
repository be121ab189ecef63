package sqlitestore_test

import (
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

// TestOwnReleaseRecordsNoEnd: the holder's own release (the hot pair's)
// writes nothing to the table ended, which only a hold ended by another
// caller needs; a release by another store naming the ref writes one
// row. (That the holder learns of it: conformance
// Loss/SignalledAcrossNodes.)
func TestOwnReleaseRecordsNoEnd(t *testing.T) {
	s := open(t)
	l := newLocks(t, s)
	ctx := t.Context()
	if err := l.Define(ctx, "own", 1); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, s.Path())
	ended := func() int {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM ended").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 2 {
		a, err := l.TryAcquire(ctx, "own", sleeplock.Ref("holder"), sleeplock.TTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := ended(); n != 0 {
		t.Fatalf("the holder's own releases wrote %d rows of ended", n)
	}
	if _, err := l.TryAcquire(ctx, "own", sleeplock.Ref("holder"), sleeplock.TTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
	op, err := newLocks(t, openAt(t, s.Path())).LeaseOf("holder", []string{"own"})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ended(); n != 1 {
		t.Fatalf("a release naming the ref wrote %d rows of ended, want 1", n)
	}
}
