package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sleeplock/sleeplock/store"
)

// notSent reports whether err says the statement never reached the
// server: it changed nothing and may be sent again.
func notSent(err error) bool {
	var ce *pgconn.ConnectError
	return pgconn.SafeToRetry(err) || errors.As(err, &ce)
}

// rolledBack reports whether the server answered err for a statement that
// it rolled back and that may run again: a serialisation failure or a
// deadlock. (A backend terminated mid-statement is not one: the end may
// have come after its commit.)
func rolledBack(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "40001", "40P01":
		return true
	}
	return false
}

// connLost reports whether err is a lost or refused connection, whatever
// the statement did before.
func connLost(err error) bool {
	if notSent(err) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return len(pe.Code) == 5 && (pe.Code[:2] == "08" || pe.Code[:3] == "57P")
	}
	// (pgconn.ErrConnClosed: a connection closed by an earlier failure of
	// the same call, e.g. "failed to deallocate cached statement(s): conn
	// closed" after a restart; the soak found it untyped)
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, pgconn.ErrConnClosed)
}

// retryable reports whether a statement that failed with err may be sent
// again: always when it never reached the server or the server rolled it
// back, and when it was lost on the way if it is idempotent.
func retryable(err error, idempotent bool) bool {
	return notSent(err) || rolledBack(err) || idempotent && connLost(err)
}

// maxTries bounds the attempts of one statement; with the jittered
// backoff from 20ms doubling to 1s they span about three seconds, long
// enough for a PostgreSQL restart or failover of a pool connection.
const maxTries = 8

// retry runs f until it succeeds, fails in a way that is not safe to retry,
// or maxTries attempts failed; then the error matches ErrUnreachable when
// it was a connection failure.
func (s *Store) retry(ctx context.Context, idempotent bool, f func() error) error {
	delay := 20 * time.Millisecond
	for try := 1; ; try++ {
		err := f()
		if err == nil || ctx.Err() != nil || !retryable(err, idempotent) {
			return err
		}
		if s.closed.Load() {
			return store.ErrClosed
		}
		if try >= maxTries {
			return unreachable(err)
		}
		if !sleep(ctx, jitter(delay)) {
			return ctx.Err()
		}
		delay = min(2*delay, time.Second)
	}
}

// unreachable wraps a connection failure in ErrUnreachable.
func unreachable(err error) error {
	if connLost(err) && !errors.Is(err, ErrUnreachable) {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return err
}
