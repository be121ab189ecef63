package memstore

import (
	"context"

	"github.com/sleeplock/sleeplock/internal/storecall"
	"github.com/sleeplock/sleeplock/store"
)

// errNoStore is the error of a call of a nil or zero Store: a typed error
// rather than a panic.
var errNoStore = store.Invalid(store.ErrInvalidConfig, "nil", "a *memstore.Store must come from memstore.New")

// usable returns why s cannot serve a call with ctx.
func (s *Store) usable(ctx context.Context) error {
	return storecall.Check(ctx, s != nil && s.fams != nil, errNoStore)
}
