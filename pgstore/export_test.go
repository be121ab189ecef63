package pgstore

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sleeplock/sleeplock/pgstore/pgtest"
)

// Listening reports whether the store's LISTEN connection is up.
func (s *Store) Listening() bool { return s != nil && s.d.listening.Load() }

// SetListenPoll sets how often the heads of this process's queue check
// while notifications arrive; it returns a function that restores it.
func SetListenPoll(d time.Duration) func() {
	old := listenPoll.Swap(int64(d))
	return func() { listenPoll.Store(old) }
}

// ChannelOf is the NOTIFY channel of a schema.
func ChannelOf(schema string) string { return channelOf(schema) }

// NodeID is the store's row in the nodes table.
func (s *Store) NodeID() int64 {
	if s == nil {
		return 0
	}
	return s.d.node
}

// Sweeps reports whether the store's last heartbeat found it the node
// that sweeps its schema.
func (s *Store) Sweeps() bool { return s != nil && s.d.sweeper.Load() }

// UndoLater hands the store's heartbeat an abandoned acquisition to give
// up the place of, as an abandoned acquisition whose undo failed does.
func (s *Store) UndoLater(op int64) {
	if s == nil || s.c == nil || op == 0 {
		return
	}
	s.d.undoLater(op)
}

// Advance dates every lease and waiter of the store's schema back by d, as
// if d had passed on the database's clock (advance(), a test function
// that Migrate never installs: the first call in a schema installs it).
func (s *Store) Advance(ctx context.Context, d time.Duration) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	call := "SELECT " + quoteIdent(s.cfg.schema) + ".advance($1::bigint)"
	err := s.c.exec(ctx, call, micros(d))
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42883" { // undefined_function
		if err := s.c.exec(ctx, pgtest.TestFunctions(s.cfg.schema)); err != nil {
			return err
		}
		err = s.c.exec(ctx, call, micros(d))
	}
	return err
}

// EndContextAfterQueries makes every statement of the store call end once
// it has returned, as a context whose deadline passes just after the
// server answered would.
func (s *Store) EndContextAfterQueries(end func()) {
	if s == nil || s.c == nil || end == nil {
		return
	}
	s.c = endingConn{conn: s.c, end: end}
}

type endingConn struct {
	conn
	end func()
}

func (c endingConn) query(ctx context.Context, sql string, args []any, each func(scan func(dest ...any) error) error) error {
	err := c.conn.query(ctx, sql, args, each)
	c.end()
	return err
}

// MakeCrashable lets Crash end the store's statements; call it before s
// is used.
func (s *Store) MakeCrashable() {
	if s == nil || s.c == nil {
		return
	}
	s.c = crashConn{conn: s.c, dead: new(atomic.Bool)}
}

// Crash stops a store made crashable as the death of its process would:
// every statement of it fails from now on, so it closes writing nothing
// (its waiters' places stay queued and its node's row stays, until the
// node's lease runs out; its holds stay held).
func (s *Store) Crash() {
	if s == nil || s.c == nil {
		return
	}
	if c, ok := s.c.(crashConn); ok {
		c.dead.Store(true)
	}
	_ = s.Close()
}

var errCrashed = errors.New("pgstore: the store crashed (a test's Crash)")

type crashConn struct {
	conn
	dead *atomic.Bool
}

func (c crashConn) query(ctx context.Context, sql string, args []any, each func(scan func(dest ...any) error) error) error {
	if c.dead.Load() {
		return errCrashed
	}
	return c.conn.query(ctx, sql, args, each)
}

func (c crashConn) exec(ctx context.Context, sql string, args ...any) error {
	if c.dead.Load() {
		return errCrashed
	}
	return c.conn.exec(ctx, sql, args...)
}

func (c crashConn) inTx(ctx context.Context, f func(c conn) error) error {
	if c.dead.Load() {
		return errCrashed
	}
	return c.conn.inTx(ctx, f)
}

// SetHoldSampleEvery sets how often a release of a lock times its hold by
// time (0: never, the token rule alone); it returns a function that
// restores it.
func SetHoldSampleEvery(d time.Duration) func() {
	old := holdSampleEvery.Swap(int64(d))
	return func() { holdSampleEvery.Store(old) }
}
