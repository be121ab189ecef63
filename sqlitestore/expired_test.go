package sqlitestore_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

// Guard accepts a lease past its expiry that nobody took over (it still
// names its holder, DESIGN.md §2), and refuses it once taken over.
func TestGuardAcceptsExpiredNotTakenOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	s := openAt(t, path)
	l := newLocks(t, s)
	db := rawDB(t, path)
	if err := l.Define(t.Context(), "gx", 1); err != nil {
		t.Fatal(err)
	}
	lease, err := l.TryAcquire(t.Context(), "gx", sleeplock.WithRef("writer"), sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Advance(t.Context(), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Guard(t.Context(), tx); err != nil {
		t.Fatalf("Guard of an expired lease nobody took over = %v, want nil", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(t.Context(), "gx", sleeplock.WithRef("next")); err != nil {
		t.Fatal(err)
	}
	tx, err = db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := lease.Guard(t.Context(), tx); !errors.Is(err, sleeplock.ErrLeaseLost) {
		t.Fatalf("Guard of a lease taken over = %v, want ErrLeaseLost", err)
	}
}
