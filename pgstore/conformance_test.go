package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/store"
	"github.com/sleeplock/sleeplock/storetest"
)

// harness runs the conformance suite on a fresh schema per test.
var harness = storetest.Harness{
	New: func(t *testing.T) store.Store { return newEnv(t).s },
	Advance: func(t *testing.T, s store.Store, d time.Duration) {
		t.Helper()
		if err := s.(*pgstore.Store).Advance(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	},
}

func TestConformance(t *testing.T) {
	storetest.Run(t, harness)
}
