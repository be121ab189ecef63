package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock/sqlitestore"
	"github.com/sleeplock/sleeplock/store"
	"github.com/sleeplock/sleeplock/storetest"
)

func TestMain(m *testing.M) {
	if helperMain() {
		return
	}
	goleak.VerifyTestMain(m)
}

// open opens a store on a new file of the test's temporary directory,
// closed at the end of the test.
func open(t testing.TB, opts ...sqlitestore.Option) *sqlitestore.Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "locks.db"), opts...)
}

func openAt(t testing.TB, path string, opts ...sqlitestore.Option) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var harness = storetest.Harness{
	New: func(t *testing.T) store.Store { return open(t) },
	// Another process of the host: a store of its own on the same file.
	Reopen: func(t *testing.T, s store.Store) store.Store {
		return openAt(t, s.(*sqlitestore.Store).Path())
	},
	Advance: func(t *testing.T, s store.Store, d time.Duration) {
		t.Helper()
		if err := s.(*sqlitestore.Store).Advance(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	},
	Begin: func(t *testing.T, s store.Store) (any, func()) {
		t.Helper()
		tx, err := rawDB(t, s.(*sqlitestore.Store).Path()).BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return tx, func() { _ = tx.Rollback() }
	},
}

func TestConformance(t *testing.T) {
	storetest.Run(t, harness)
}
