package turns_test

import (
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/internal/zerocall"
	"github.com/sleeplock/sleeplock/turns"
)

// Every exported function and method of package turns, called with zero
// values (a nil or zero *Turns, nil contexts, empty ids and refs, nil
// options), returns a typed error where it has nothing to work with and
// never panics (issue 7 item 9).
func TestZeroValuesDoNotPanic(t *testing.T) {
	zerocall.Run(t, zerocall.Suite{
		Dir: ".",
		Funcs: map[string]any{
			"New": turns.New, "WithChatFamily": turns.WithChatFamily, "WithUserFamily": turns.WithUserFamily,
			"WithTTL": turns.WithTTL, "ClickRef": turns.ClickRef, "KindOf": turns.KindOf,
		},
		Receivers: []func() any{
			func() any { return (*turns.Turns)(nil) },
			func() any { return &turns.Turns{} },
			func() any { return turns.New(nil) },
			func() any { return turns.New(sleeplock.New(nil)) },
		},
	})
}
