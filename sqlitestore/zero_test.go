package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sleeplock/sleeplock/internal/zerocall"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

// Every exported function and method, called with zero values (nil or
// zero *Store, nil contexts, empty paths, zero requests and handles, nil
// options), returns a typed error where it has nothing to work with and
// never panics; so do the methods of a working store.
func TestZeroValuesDoNotPanic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	zerocall.Run(t, zerocall.Suite{
		Dir: ".",
		Funcs: map[string]any{
			"Open": sqlitestore.Open, "Migrate": sqlitestore.Migrate, "WithoutMigrate": sqlitestore.WithoutMigrate,
			"WithBusyTimeout": sqlitestore.WithBusyTimeout, "WithPollInterval": sqlitestore.WithPollInterval,
			"WithWaiterTTL": sqlitestore.WithWaiterTTL, "WithProcessGroup": sqlitestore.WithProcessGroup,
		},
		Receivers: []func() any{
			func() any { return (*sqlitestore.Store)(nil) },
			func() any { return &sqlitestore.Store{} },
			func() any { return (*sqlitestore.SchemaError)(nil) },
			func() any { return &sqlitestore.SchemaError{} },
		},
	})
	// A working store, in a partial suite: the coverage check makes a
	// receiver of each kind and does not close it.
	zerocall.Run(t, zerocall.Suite{
		Dir:     ".",
		Partial: true,
		Receivers: []func() any{
			func() any {
				s, err := sqlitestore.Open(context.Background(), path)
				if err != nil {
					t.Errorf("Open: %v", err)
				}
				return s
			},
		},
	})
}
