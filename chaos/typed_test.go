package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/chaos"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

// TestTyped: the errors a caller can tell apart by errors.Is/As are typed,
// wrapped or not; an error known only by its text is not.
func TestTyped(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{sleeplock.ErrLeaseLost, true},
		{fmt.Errorf("x: %w", sleeplock.ErrUnavailable), true},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{&fs.PathError{Op: "open", Path: "/x", Err: fs.ErrPermission}, true},
		{fmt.Errorf("x: %w", sqlitestore.ErrReadOnly), true},
		{errors.New("database is locked"), false},
		{fmt.Errorf("x: %v", sleeplock.ErrLeaseLost), false}, //nolint:errorlint // a message that does not wrap, on purpose
	} {
		if got := chaos.Typed(c.err); got != c.want {
			t.Errorf("Typed(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
