package sqlitestore_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sleeplock/sleeplock"
)

// A file of schema version 1 (before weights) with a holder in it opens
// at the current version: its holder takes one slot, and weights work.
func TestMigrateFromVersion1KeepsHolders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	v1, err := os.ReadFile("migrations/001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	if _, err := db.Exec(string(v1)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO defs (name, slots, family) VALUES ('gpu', 4, 0);
		INSERT INTO holders (lock, ref, kind, token, count, acquired, renewed, expires, ttl, hold, pid, pstart, host)
		VALUES ('gpu', 'old', '', 1, 1, 1, 1, 0, 0, 0, 0, 0, '');
		PRAGMA user_version = 1`); err != nil {
		t.Fatal(err)
	}
	l := newLocks(t, openAt(t, path))
	st, err := l.StateDetail(t.Context(), "gpu")
	if err != nil || st.Running != 1 || st.Leases != 1 || len(st.Holders) != 1 || st.Holders[0].Weight != 1 {
		t.Fatalf("state %+v %v: want the old holder, weight 1", st, err)
	}
	lease, err := l.TryAcquire(t.Context(), "gpu", sleeplock.Weight(3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(t.Context(), "gpu"); err == nil {
		t.Fatal("a fifth slot of four was granted")
	}
	if err := lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
