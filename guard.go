package sleeplock

import (
	"context"

	"github.com/sleeplock/sleeplock/store"
)

// Errors of calls that cannot run at all: made before anything is looked at,
// so a nil or zero value is a typed error, never a panic.
var (
	errNoLocks    = store.Invalid(store.ErrInvalidConfig, "nil", "a *Locks must come from sleeplock.New")
	errNilContext = store.Invalid(store.ErrInvalid, "nil", "a context is required (context.Background() when there is none)")
)

// usable returns why l cannot serve a call with ctx: l is nil or a zero
// Locks, ctx is nil, or an Option was bad.
func (l *Locks) usable(ctx context.Context) error {
	if l == nil || l.store == nil {
		return errNoLocks
	}
	if ctx == nil {
		return errNilContext
	}
	return l.err
}
