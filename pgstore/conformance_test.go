package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/store"
	"github.com/sleeplock/sleeplock/storetest"
)

// envs finds the env of a store made by the harness.
var envs sync.Map // *pgstore.Store → *env

// harness runs the conformance suite on a fresh schema per test.
var harness = storetest.Harness{
	New: func(t *testing.T) store.Store {
		e := newEnv(t)
		envs.Store(e.s, e)
		t.Cleanup(func() { envs.Delete(e.s) })
		return e.s
	},
	// Another node: a store on the same schema with a pool of its own.
	Reopen: func(t *testing.T, s store.Store) store.Store {
		e, _ := envs.Load(s)
		o := e.(*env).node(t)
		o.MakeCrashable()
		return o
	},
	Crash: func(t *testing.T, s store.Store) { s.(*pgstore.Store).Crash() },
	Advance: func(t *testing.T, s store.Store, d time.Duration) {
		t.Helper()
		if err := s.(*pgstore.Store).Advance(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	},
	// The store's LISTEN connection, which its first Watch starts.
	Listening: func(t *testing.T, s store.Store) {
		t.Helper()
		waitFor(t, "the store listening", s.(*pgstore.Store).Listening)
	},
	// A transaction of the caller's own, on the store's database.
	Begin: func(t *testing.T, s store.Store) (any, func()) {
		t.Helper()
		e, _ := envs.Load(s)
		tx, err := e.(*env).pool.Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return tx, func() { _ = tx.Rollback(context.Background()) }
	},
}

func TestConformance(t *testing.T) {
	storetest.Run(t, harness)
}
