package memstore

import (
	"context"

	"github.com/sleeplock/sleeplock/store"
)

// Errors of calls that cannot run at all, so that a nil or zero Store or a
// nil context is a typed error rather than a panic.
var (
	errNoStore    = store.Invalid(store.ErrInvalidConfig, "nil", "a *memstore.Store must come from memstore.New")
	errNilContext = store.Invalid(store.ErrInvalid, "nil", "a context is required (context.Background() when there is none)")
)

// usable returns why s cannot serve a call with ctx.
func (s *Store) usable(ctx context.Context) error {
	if s == nil || s.fams == nil {
		return errNoStore
	}
	if ctx == nil {
		return errNilContext
	}
	return nil
}
