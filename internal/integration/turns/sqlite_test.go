package turns_test

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

// The SQLite entry of factories: every node a store of its own on one
// database file, as processes of one host share it.
func init() {
	factories = append(factories, factory{name: "sqlite", newNodes: sqliteNodes})
}

func sqliteNodes(t *testing.T, n int) ([]*sleeplock.Locks, func(time.Duration), bool) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "locks.db")
	var locks []*sleeplock.Locks
	for range n {
		s, err := sqlitestore.Open(ctx, path)
		must(t, err)
		locks = append(locks, sleeplock.New(s))
	}
	// The store's clock is the host's; a connection of the test's own
	// dates every lease and waiter back by d instead, as sqlitestore's
	// tests do through their hook.
	clock, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	must(t, err)
	t.Cleanup(func() { _ = clock.Close() })
	advance := func(d time.Duration) {
		if err := sqliteAdvance(ctx, clock, d); err != nil {
			t.Fatalf("advancing the store's clock: %v", err)
		}
	}
	return locks, advance, true
}

// sqliteAdvance dates every lease and waiter of the database back by d in
// one transaction, as if d had passed on the host's clock.
func sqliteAdvance(ctx context.Context, db *sql.DB, d time.Duration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	us := d.Microseconds()
	if _, err := tx.ExecContext(ctx, `UPDATE holders SET acquired = acquired - ?1, renewed = renewed - ?1,
		expires = CASE WHEN expires = 0 THEN 0 ELSE expires - ?1 END`, us); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE waiters SET since = since - ?", us); err != nil {
		return err
	}
	return tx.Commit()
}
