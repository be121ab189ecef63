package redisstore_test

import (
	"context"
	"testing"

	"github.com/sleeplock/sleeplock/internal/zerocall"
	"github.com/sleeplock/sleeplock/redisstore"
)

// Every exported function and method, called with zero values, returns a
// typed error where it has nothing to work with and never panics; so do
// the methods of a working store.
func TestZeroValuesDoNotPanic(t *testing.T) {
	zerocall.Run(t, zerocall.Suite{
		Dir: ".",
		Funcs: map[string]any{
			"New": redisstore.New, "Open": redisstore.Open, "Check": redisstore.Check, "KeyTag": redisstore.KeyTag,
			"WithPrefix": redisstore.WithPrefix, "WithWaiterTTL": redisstore.WithWaiterTTL,
			"WithoutSafetyChecks": redisstore.WithoutSafetyChecks,
		},
		Receivers: []func() any{
			func() any { return (*redisstore.Store)(nil) },
			func() any { return &redisstore.Store{} },
			func() any { return (*redisstore.Tx)(nil) },
			func() any { return &redisstore.Tx{} },
		},
	})
	c := client(t)
	p := newPrefix(t, c)
	zerocall.Run(t, zerocall.Suite{
		Dir:     ".",
		Partial: true,
		Receivers: []func() any{
			func() any {
				s, err := redisstore.Open(context.Background(), testURL(), redisstore.WithPrefix(p), redisstore.WithoutSafetyChecks())
				if err != nil {
					t.Errorf("New: %v", err)
				}
				return s
			},
		},
	})
}
