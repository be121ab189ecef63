package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/sqlitestore"
	"github.com/sleeplock/sleeplock/store"
)

func TestOpenBadPaths(t *testing.T) {
	dir := t.TempDir()
	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("not a database\n", 200)), 0o600); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(dir, "file")
	if err := os.WriteFile(aFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path, want string
		is         error
	}{
		{"", "needs a file path", store.ErrInvalidConfig},
		{filepath.Join(dir, "missing", "locks.db"), "does not exist", store.ErrInvalidConfig},
		{filepath.Join(aFile, "locks.db"), "is not a directory", store.ErrInvalidConfig},
		{dir, "is a directory", store.ErrInvalidConfig},
		{notDB, "not a SQLite database", sqlitestore.ErrNotDatabase},
	}
	for _, c := range cases {
		s, err := sqlitestore.Open(t.Context(), c.path)
		if err == nil {
			_ = s.Close()
		}
		if !errors.Is(err, c.is) || !errors.Is(err, store.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%q) = %v; want %q matching %v", c.path, err, c.want, c.is)
		}
	}
	if b, _ := os.ReadFile(notDB); !strings.HasPrefix(string(b), "not a database") {
		t.Fatal("Open changed a file that is not a database")
	}
}

// A nil option is refused with a typed error, and nothing is created.
func TestOpenRefusesNilOption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	st, err := sqlitestore.Open(t.Context(), path, sqlitestore.WithPollInterval(time.Millisecond), nil)
	if !errors.Is(err, store.ErrInvalidConfig) || !strings.Contains(err.Error(), "option 2 of 2 is nil") {
		if st != nil {
			st.Close()
		}
		t.Fatalf("Open with a nil option = %v, want ErrInvalidConfig naming option 2", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open with a nil option made the file: %v", err)
	}
}

func TestOpenReadOnlyDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes to read-only directories")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
	_, err := sqlitestore.Open(t.Context(), filepath.Join(dir, "locks.db"))
	if !errors.Is(err, store.ErrInvalidConfig) || !strings.Contains(err.Error(), "not writable") {
		t.Fatalf("Open in a read-only directory = %v", err)
	}
}

func TestSchemaVersions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	if v, err := sqlitestore.Migrate(t.Context(), path); err != nil || v != sqlitestore.SchemaVersion {
		t.Fatalf("Migrate = %d %v", v, err)
	}
	if v, err := sqlitestore.Migrate(t.Context(), path); err != nil || v != sqlitestore.SchemaVersion {
		t.Fatalf("Migrate again = %d %v", v, err)
	}
	db := rawDB(t, path)
	if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	_, err := sqlitestore.Open(t.Context(), path)
	var se *sqlitestore.SchemaError
	if !errors.As(err, &se) || !errors.Is(err, sqlitestore.ErrSchemaTooNew) || se.Have != 99 || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema = %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.db")
	_, err = sqlitestore.Open(t.Context(), empty, sqlitestore.WithoutMigrate())
	if !errors.As(err, &se) || se.Have != 0 || errors.Is(err, sqlitestore.ErrSchemaTooNew) {
		t.Fatalf("Open with WithoutMigrate of a new file = %v", err)
	}
	for _, o := range []sqlitestore.Option{sqlitestore.WithPollInterval(0), sqlitestore.WithWaiterTTL(-1), sqlitestore.WithBusyTimeout(0)} {
		if _, err := sqlitestore.Open(t.Context(), empty, o); !errors.Is(err, store.ErrInvalidConfig) {
			t.Errorf("a bad option: %v", err)
		}
	}
}

// Guard fences a write made in the caller's own transaction on the same
// file: it succeeds while the lease is held, fails with ErrLeaseLost once
// it is not, and no other connection can end the lease before the
// transaction ends.
func TestGuard(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	l := newLocks(t, openAt(t, path))
	db := rawDB(t, path)
	if _, err := db.Exec("CREATE TABLE app (token INTEGER)"); err != nil {
		t.Fatal(err)
	}
	if err := l.Define(t.Context(), "g", 1); err != nil {
		t.Fatal(err)
	}
	lease, err := l.TryAcquire(t.Context(), "g", sleeplock.Ref("writer"), sleeplock.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Guard(t.Context(), tx); err != nil {
		t.Fatal(err)
	}
	// Another process's operator release must wait for the transaction.
	other := newLocks(t, openAt(t, path))
	var committed atomic.Bool
	released := make(chan error, 1)
	go func() {
		op, err := other.LeaseOf("writer", []string{"g"})
		if err == nil {
			err = op.Release(context.Background())
		}
		if !committed.Load() {
			err = errors.New("released while a guarded transaction was open")
		}
		released <- err
	}()
	if _, err := tx.Exec("INSERT INTO app VALUES (?)", lease.Token()); err != nil {
		t.Fatal(err)
	}
	committed.Store(true)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	tx, err = db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := lease.Guard(t.Context(), tx); !errors.Is(err, sleeplock.ErrLeaseLost) {
		t.Fatalf("Guard of a released lease = %v", err)
	}
	var conn *sql.Conn
	if err := lease.Guard(t.Context(), conn); !errors.Is(err, sleeplock.ErrUnsupported) {
		t.Fatalf("Guard with a %T = %v", conn, err)
	}
}

// Close takes this store's waiters out of the shared queue: another
// process's try is not refused by them.
func TestCloseRemovesWaiters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	a := sleeplock.New(openAt(t, path))
	b := newLocks(t, openAt(t, path))
	if err := b.Define(t.Context(), "c", 1); err != nil {
		t.Fatal(err)
	}
	held, err := b.TryAcquire(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { _, err := a.Acquire(context.Background(), "c"); got <- err }()
	waitFor(t, "a waiter", func() bool { st, err := b.State(t.Context(), "c"); return err == nil && st.Waiting == 1 })
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, store.ErrClosed) {
		t.Fatalf("waiter of a closed store: %v", err)
	}
	wantState(t, b, "c", 1, 0)
	_ = held.Release(t.Context())
}
