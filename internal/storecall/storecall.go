// Package storecall is what every store does the same way on a call of
// store.Store: the check before a call runs (Check: a usable store, a
// context), and Define, which each store implements as a Reconcile of one
// entry. One implementation, so that the stores answer alike.
package storecall

import (
	"context"

	"github.com/sleeplock/sleeplock/store"
)

// ErrNilContext is the error of a call made with a nil context, in every
// store and in package sleeplock.
var ErrNilContext = store.Invalid(store.ErrInvalid, "nil", "a context is required (context.Background() when there is none)")

// Check returns why a call with ctx cannot run: noStore (the store's own
// error, naming its constructor) when the store is not usable (nil, or a
// zero value), ErrNilContext when ctx is nil, and nil otherwise.
func Check(ctx context.Context, usable bool, noStore error) error {
	if !usable {
		return noStore
	}
	if ctx == nil {
		return ErrNilContext
	}
	return nil
}

// Reconciler is the store.Store method that Define runs.
type Reconciler interface {
	Reconcile(ctx context.Context, defs []store.Definition, opts store.ReconcileOptions, ev store.Emitter) (store.Reconciled, error)
}

// Define is store.Store's Define on s: a Reconcile of the one entry name
// with slots, which reports whether it created the definition.
func Define(ctx context.Context, s Reconciler, name string, slots int, ev store.Emitter) (bool, error) {
	r, err := s.Reconcile(ctx, []store.Definition{{Name: name, Slots: slots}}, store.ReconcileOptions{}, ev)
	return len(r.Created) == 1, err
}
