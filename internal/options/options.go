// Package options is the option handling that the stores' constructors
// share (pgstore's New, Open and Migrate, sqlitestore's Open): applying a
// list of functional options to a config, refusing a nil option, keeping
// the first invalid value, and the checks of durations that every store
// makes the same way. Each store keeps its own Option type and config
// struct; it embeds Errs in the config and calls Apply.
package options

import (
	"fmt"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// Errs keeps the first error that an option reported: embed it in a
// store's config, and let each option call Fail with its check's result.
type Errs struct{ first error }

// Fail records err when it is the first error (nil is ignored).
func (e *Errs) Fail(err error) {
	if err != nil && e.first == nil {
		e.first = err
	}
}

// Err returns the first error recorded, or nil.
func (e *Errs) Err() error { return e.first }

// Apply applies opts to c in order and returns the first error an option
// reported through errs (c's embedded Errs), or a typed
// store.ErrInvalidConfig naming a nil option: a nil option is refused,
// never skipped.
func Apply[C any, O ~func(*C)](c *C, errs *Errs, opts []O) error {
	for i, o := range opts {
		if o == nil {
			errs.Fail(store.Invalid(store.ErrInvalidConfig, "nil", fmt.Sprintf("option %d of %d is nil", i+1, len(opts))))
			continue
		}
		o(c)
	}
	return errs.Err()
}

// Positive checks that d, the value of the setting what ("a poll
// interval"), is above zero.
func Positive(what string, d time.Duration) error {
	if d <= 0 {
		return store.Invalid(store.ErrInvalidConfig, d.String(), what+" must be positive")
	}
	return nil
}

// AtLeast checks that d, the value of the setting what, is at least min.
func AtLeast(what string, d, min time.Duration) error {
	if d < min {
		return store.Invalid(store.ErrInvalidConfig, d.String(), what+" must be at least "+min.String())
	}
	return nil
}
