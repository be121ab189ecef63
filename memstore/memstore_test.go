package memstore_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock/internal/fakeclock"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/store"
	"github.com/sleeplock/sleeplock/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	clocks := map[store.Store]*fakeclock.Clock{}
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) store.Store {
			c := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			s := memstore.New(memstore.WithClock(c))
			clocks[s] = c
			return s
		},
		Advance: func(t *testing.T, s store.Store, d time.Duration) { clocks[s].Advance(d) },
	})
}
