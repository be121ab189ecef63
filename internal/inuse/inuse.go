// Package inuse counts the holders and waiters a Delete (or a Reconcile's
// prune) would end, for the stores of this module that read their locks
// in Go: one count, so the stores report a lock in use alike.
package inuse

import "github.com/sleeplock/sleeplock/store"

// Count adds the holders and waiters of each lock to d, as use reports
// them, and returns the *store.InUseError naming the first lock in use
// with d's totals, or nil when none is in use.
func Count[L any](d *store.Deleted, locks []L, use func(L) (name string, holders, waiters int)) *store.InUseError {
	first := ""
	for _, l := range locks {
		name, holders, waiters := use(l)
		d.Holds += holders
		d.Waiters += waiters
		if first == "" && holders+waiters > 0 {
			first = name
		}
	}
	if first == "" {
		return nil
	}
	return &store.InUseError{Lock: first, Holders: d.Holds, Waiters: d.Waiters}
}
