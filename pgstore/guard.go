package pgstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/store"
)

// Guard implements store.Guarder: inside tx (a pgx.Tx or a *sql.Tx) it
// checks that h's ref still holds every lock of h (with h's tokens) and
// locks those holder rows (FOR KEY SHARE) until tx ends, so the lease cannot
// be taken over or released before tx commits; renewals go on. When the
// lease is lost the error matches store.ErrLeaseLost, and tx should be
// rolled back.
func (s *Store) Guard(ctx context.Context, tx any, h store.Handle) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	var c conn
	switch t := tx.(type) {
	case pgx.Tx:
		c = pgxConn{t}
	case *sql.Tx:
		c = sqlConn{q: t}
	default:
		return fmt.Errorf("%w: Guard needs a pgx.Tx or a *sql.Tx, not %T", store.ErrUnsupported, tx)
	}
	names, tokens := handleArgs(&h)
	args := []any{names, tokens, h.Ref.String()}
	// A hold in its lock's row becomes a holder row first, in a
	// transaction of the store's own.
	err := s.retry(ctx, true, func() error { return queryOne(ctx, s.c, s.q.spillHeld, args, new(int64)) })
	if err != nil {
		return fmt.Errorf("pgstore: guard: %w", err)
	}
	var n int64
	if err := queryOne(ctx, c, s.q.guard, args, &n); err != nil {
		return fmt.Errorf("pgstore: guard: %w", err)
	}
	if want := 1 + len(h.More); int(n) != want {
		// In a REPEATABLE READ or SERIALIZABLE transaction that ran a
		// statement before Guard, the holder row may be newer than tx's
		// snapshot: moved there by this Guard, or by any operation that
		// took the lock's row since (a waiter queueing, another slot's
		// grant). A lease still held is then not lost.
		var iso string
		if err := queryOne(ctx, c, s.q.isolation, nil, &iso); err == nil && iso != "read committed" {
			if st, err := s.Held(ctx, h); err == nil && st.Held {
				return fmt.Errorf("%w: Guard of %q: the transaction's snapshot predates the lease's holder row; "+
					"call Guard before the first statement of a REPEATABLE READ or SERIALIZABLE transaction",
					store.ErrUnsupported, h.Name)
			}
		}
		return store.GuardLost(h.Name, h.Token)
	}
	return nil
}
