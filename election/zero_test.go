package election_test

import (
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/election"
	"github.com/sleeplock/sleeplock/internal/zerocall"
)

// Every exported function and method of package election, called with zero
// values, returns (a typed error where it has nothing to work with) and
// never panics.
func TestZeroValuesDoNotPanic(t *testing.T) {
	zerocall.Run(t, zerocall.Suite{
		Dir: ".",
		Funcs: map[string]any{
			"New": election.New, "WithTTL": election.WithTTL, "CandidateID": election.CandidateID, "StatusOf": election.StatusOf,
		},
		Receivers: []func() any{
			func() any { return (*election.Election)(nil) },
			func() any { return &election.Election{} },
			func() any {
				e, err := election.New(sleeplock.New(nil), "zero")
				if err != nil {
					t.Fatal(err)
				}
				return e
			},
			func() any { return (*election.Term)(nil) },
			func() any { return &election.Term{} },
			func() any { return election.Elected },
			func() any { return election.EventType(0) },
		},
	})
}
