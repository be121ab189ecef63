package pgstore

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestConnectionErrorsAreUnreachable: every error by which pgx says the
// connection went away matches ErrUnreachable once unreachable() wraps it,
// and a server's answer does not. The million-operation soak found pgx's
// "failed to deallocate cached statement(s): conn closed" (a connection
// closed by an earlier failure of the same call) returned untyped.
func TestConnectionErrorsAreUnreachable(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("failed to deallocate cached statement(s): %w", pgconn.ErrConnClosed),
		fmt.Errorf("read: %w", io.ErrUnexpectedEOF),
		&pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"},
	} {
		if got := unreachable(err); !errors.Is(got, ErrUnreachable) {
			t.Errorf("unreachable(%v) = %v, want an error matching ErrUnreachable", err, got)
		}
	}
	answer := &pgconn.PgError{Code: "23505", Message: "duplicate key value"}
	if got := unreachable(answer); errors.Is(got, ErrUnreachable) {
		t.Errorf("unreachable(%v) = %v: a server's answer is not a lost connection", answer, got)
	}
}
