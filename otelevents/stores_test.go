package otelevents_test

import (
	"path/filepath"
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

// The counts are also checked on SQLite: one process's Locks on a file.
func init() {
	stores = append(stores, struct {
		name string
		open func(t *testing.T) *sleeplock.Locks
	}{"sqlite", func(t *testing.T) *sleeplock.Locks {
		s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "locks.db"))
		if err != nil {
			t.Fatal(err)
		}
		return sleeplock.New(s)
	}})
}
