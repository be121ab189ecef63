package pgstore_test

import (
	"context"
	"testing"

	"github.com/sleeplock/sleeplock/internal/zerocall"
	"github.com/sleeplock/sleeplock/pgstore"
)

// pgFuncs are pgstore's exported functions.
var pgFuncs = map[string]any{
	"ConfigurePool": pgstore.ConfigurePool, "Migrate": pgstore.Migrate, "MigrateSQL": pgstore.MigrateSQL,
	"MigrateDSN": pgstore.MigrateDSN,
	"New":        pgstore.New, "NewSQL": pgstore.NewSQL, "Open": pgstore.Open,
	"WithUnlogged": pgstore.WithUnlogged, "WithLogged": pgstore.WithLogged, "WithPollInterval": pgstore.WithPollInterval,
	"WithSchema": pgstore.WithSchema, "WithWaiterTTL": pgstore.WithWaiterTTL,
	"WithListenDSN": pgstore.WithListenDSN, "WithoutListen": pgstore.WithoutListen,
}

// Every exported function and method of package pgstore, called with zero
// values (nil pools and handles, nil contexts, a nil or zero *Store, nil
// options), returns a typed error where it has nothing to work with and
// never panics (issue 7 item 9: Migrate(ctx, nil) panicked). No database is
// needed: nothing here can reach one.
func TestZeroValuesDoNotPanic(t *testing.T) {
	zerocall.Run(t, zerocall.Suite{
		Dir:   ".",
		Funcs: pgFuncs,
		Receivers: []func() any{
			func() any { return (*pgstore.Store)(nil) },
			func() any { return &pgstore.Store{} },
			func() any { return (*pgstore.SchemaError)(nil) },
			func() any { return &pgstore.SchemaError{} },
			func() any { return (*pgstore.ChecksumError)(nil) },
			func() any { return &pgstore.ChecksumError{} },
		},
	})
}

// The methods of a working store, called with zero values, return errors
// and never panic; so does Open with an empty DSN.
func TestZeroValuesDoNotPanicOnLiveStore(t *testing.T) {
	e := newEnv(t)
	zerocall.Run(t, zerocall.Suite{
		Dir:     ".",
		Partial: true,
		Funcs: map[string]any{"Open": func(dsn string, opts ...pgstore.Option) (*pgstore.Store, error) {
			return pgstore.Open(context.Background(), dsn, opts...)
		}},
		Receivers: []func() any{
			func() any {
				s, err := pgstore.New(context.Background(), e.pool, pgstore.WithSchema(e.schema))
				if err != nil {
					t.Errorf("New: %v", err)
				}
				return s
			},
		},
	})
}
