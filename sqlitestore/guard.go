package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sleeplock/sleeplock/store"
)

// Guard implements store.Guarder: inside tx, a *sql.Tx of a database/sql
// connection to the same file (driver "sqlite", modernc.org/sqlite), it
// checks that h's ref still holds every lock of h (with h's tokens) —
// past its expiry or not, as long as nobody took it over — with a write
// that takes SQLite's write lock for tx: no other connection can take the
// lease over or release it until tx ends. When the lease is lost the error matches
// store.ErrLeaseLost, and tx should be rolled back. Open the caller's
// database with a busy timeout (for example "file:PATH?_pragma=busy_timeout(5000)"):
// Guard waits for the write lock like any write.
func (s *Store) Guard(ctx context.Context, tx any, h store.Handle) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	t, ok := tx.(*sql.Tx)
	if !ok {
		return fmt.Errorf("%w: Guard needs a *sql.Tx on the same SQLite file, not %T", store.ErrUnsupported, tx)
	}
	if t == nil {
		return fmt.Errorf("%w: Guard needs a *sql.Tx, not a nil one", store.ErrUnsupported)
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return store.ErrClosed
	}
	var n int64
	var err error
	ref := h.Ref.String()
	h.Each(func(x store.Lock) {
		if err != nil {
			return
		}
		var res sql.Result
		res, err = t.ExecContext(ctx, `UPDATE holders SET token = token
			WHERE lock = ? AND ref = ? AND (? = 0 OR token = ?)`,
			x.Name, ref, x.Token, x.Token)
		if err == nil {
			var k int64
			k, err = res.RowsAffected()
			n += k
		}
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: guard: %w", err)
	}
	if want := 1 + len(h.More); int(n) != want {
		return store.GuardLost(h.Name, h.Token)
	}
	return nil
}
