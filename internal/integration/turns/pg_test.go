package turns_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/pgstore/pgtest"
)

// The PostgreSQL entry of factories: every node a store on a pool of its
// own over one schema made for the test (dropped after it). The database is
// SLEEPLOCK_TEST_DATABASE_URL, or the local test database; when it cannot
// be reached the PostgreSQL runs are skipped, or fail when CI is set.
func init() {
	factories = append(factories, factory{
		name:     "postgres",
		newNodes: pgNodes,
		app: func(t *testing.T, l *sleeplock.Locks) (appDB, string) {
			p := pgPoolOf(l)
			return pgApp{p.admin}, p.schema
		},
		pinned: func(l *sleeplock.Locks) int { return int(pgPoolOf(l).pool.Stat().AcquiredConns()) },
	})
}

// pgNode is what a node's Locks stand on.
type pgNode struct {
	pool   *pgxpool.Pool // the node's own
	admin  *pgxpool.Pool // the test's, for set-up and the application's tables
	schema string
}

var pgNodesOf sync.Map // *sleeplock.Locks → pgNode

func pgPoolOf(l *sleeplock.Locks) pgNode {
	n, _ := pgNodesOf.Load(l)
	return n.(pgNode)
}

func pgPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return pgtest.Pool(t, nil)
}

func pgNodes(t *testing.T, n int) ([]*sleeplock.Locks, func(time.Duration), bool) {
	t.Helper()
	ctx := context.Background()
	admin, schema := pgtest.Schema(t, "turns_test_")
	must(t, pgstore.Migrate(ctx, admin, pgstore.WithSchema(schema)))
	// advance(), which only tests have
	_, err := admin.Exec(ctx, pgtest.TestFunctions(schema))
	must(t, err)
	var locks []*sleeplock.Locks
	for range n {
		pool := pgPool(t)
		s, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema))
		must(t, err)
		l := sleeplock.New(s)
		pgNodesOf.Store(l, pgNode{pool: pool, admin: admin, schema: schema})
		t.Cleanup(func() { pgNodesOf.Delete(l) })
		locks = append(locks, l)
	}
	advance := func(d time.Duration) {
		// pgstore's advance(): every lease dated back by d
		if _, err := admin.Exec(ctx, "SELECT "+pgx.Identifier{schema}.Sanitize()+".advance($1::bigint)", d.Microseconds()); err != nil {
			t.Fatalf("advancing the database's clock: %v", err)
		}
	}
	return locks, advance, true
}

// pgApp runs the application's statements.
type pgApp struct{ pool *pgxpool.Pool }

func (a pgApp) Exec(ctx context.Context, sql string, args ...any) error {
	_, err := a.pool.Exec(ctx, sql, args...)
	return err
}

func (a pgApp) Rows(ctx context.Context, sql string) ([][]any, error) {
	rows, err := a.pool.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
