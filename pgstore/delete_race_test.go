package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/store"
)

// TestDeleteRacingGrantLeaksNoHold forces a forced Delete to meet a grant
// of the same lock half way, in the orders that once let a hold outlive its
// lock: a grant that makes the lock's row after Delete looked for it (the
// row's insert waits behind another transaction's), and a grant on an idle
// member row of a family that Delete did not know was there (the row is
// held by another transaction while both arrive). The grant either fails
// with ErrNotFound, or it is granted before the Delete and the Delete ends
// it and says so; no hold of the deleted lock is left either way.
func TestDeleteRacingGrantLeaksNoHold(t *testing.T) {
	for _, c := range []struct {
		name, def, lock string
		slots           int
		used            bool // the lock's row exists, idle, before the race
		block           string
	}{
		{"new row, one slot", "x", "x", 1, false, "INSERT INTO %s.locks (name) VALUES ($1)"},
		{"new row, slot mode", "x", "x", 3, false, "INSERT INTO %s.locks (name) VALUES ($1)"},
		{"idle family member", "f/*", "f/1", 1, true, "SELECT 1 FROM %s.locks WHERE name = $1 FOR UPDATE"},
		{"idle lock", "x", "x", 1, true, "SELECT 1 FROM %s.locks WHERE name = $1 FOR UPDATE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			define(t, e.s, c.def, c.slots)
			if c.used {
				g, err := e.s.Acquire(ctx, req("before", time.Minute, c.lock))
				must(t, err)
				must(t, e.s.Release(ctx, g.Handle(), nil))
			}
			schema := pgx.Identifier{e.schema}.Sanitize()
			// Another transaction holds the lock's row (or its insert).
			tx, err := e.pool.Begin(ctx)
			must(t, err)
			defer func() { _ = tx.Rollback(context.Background()) }()
			_, err = tx.Exec(ctx, fmt.Sprintf(c.block, schema), c.lock)
			must(t, err)

			type result struct {
				g   store.Grant
				err error
			}
			granted := make(chan result, 1)
			go func() {
				g, err := e.s.Acquire(ctx, req("racer", time.Minute, c.lock))
				granted <- result{g, err}
			}()
			waitingIn(t, e, "acquire", "Lock")

			type deletion struct {
				d   store.Deleted
				err error
			}
			deleted := make(chan deletion, 1)
			other := e.node(t)
			go func() {
				d, err := other.Delete(ctx, c.def, true, nil)
				deleted <- deletion{d, err}
			}()
			// The Delete has run as far as it can: it ended, or it waits
			// (for the row, or for the grant under way).
			var del *deletion
			waitFor(t, "the delete to end or wait", func() bool {
				select {
				case d := <-deleted:
					del = &d
					return true
				default:
				}
				var n int
				must(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "+
					"AND query LIKE '%delete_def%' AND datname = current_database()").Scan(&n))
				return n == 1
			})
			must(t, tx.Rollback(ctx))
			if del == nil {
				d := <-deleted
				del = &d
			}
			must(t, del.err)
			got := <-granted
			switch {
			case got.err == nil:
				// Granted first: the Delete must have ended it, and said so.
				if del.d.Holds != 1 {
					t.Errorf("granted token %d, and the Delete ended %d holds; want the grant ended by it",
						got.g.Token, del.d.Holds)
				}
			case errors.Is(got.err, store.ErrNotFound):
			default:
				t.Fatalf("the racing grant: %v", got.err)
			}
			var n int
			must(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".holding WHERE lock = $1", c.lock).Scan(&n))
			if n != 0 {
				t.Errorf("%d holds of %s left after its definition was deleted", n, c.lock)
			}
		})
	}
}
