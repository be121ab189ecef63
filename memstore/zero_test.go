package memstore_test

import (
	"testing"

	"github.com/sleeplock/sleeplock/internal/zerocall"
	"github.com/sleeplock/sleeplock/memstore"
)

// Every exported function and method of package memstore, called with zero
// values (a nil or zero *Store, nil contexts, zero requests and handles,
// nil callbacks and options), returns a typed error where it has nothing to
// work with and never panics (issue 7 item 9).
func TestZeroValuesDoNotPanic(t *testing.T) {
	zerocall.Run(t, zerocall.Suite{
		Dir: ".",
		Funcs: map[string]any{
			"New": memstore.New, "WithClock": memstore.WithClock, "WithTimes": memstore.WithTimes,
		},
		Receivers: []func() any{
			func() any { return (*memstore.Store)(nil) },
			func() any { return &memstore.Store{} },
			func() any { return memstore.New() },
		},
	})
}
