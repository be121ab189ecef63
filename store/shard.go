package store

import (
	"fmt"
	"strconv"
)

// Sharder is implemented by stores that may keep locks on several servers
// (redisstore on Redis Cluster), where one atomic step reaches the locks
// of one shard only. Such a store refuses a call that would span shards,
// changing nothing, with a *ShardError (matching ErrUnsupported): one that
// names locks of several shards (Acquire of several locks, Release, Keep,
// Held, ReleaseStale or Guard of a handle of several locks, Reconcile), a
// Reconcile with Prune, which reads every shard, and a
// Guard whose write names data of another shard than its locks'. Every
// other call, and every call whose locks share a shard, behaves as the
// Store interface says.
type Sharder interface {
	// Shard returns the shard of a lock or family name, with no round
	// trip; "" for every name when the store keeps all its locks on one
	// server, and then it refuses nothing.
	Shard(name string) string
}

// ShardError is the error of a call refused by a Sharder because it
// would span shards. Nothing changed. It matches ErrUnsupported.
type ShardError struct {
	Op     string    // the call: "AcquireAll", "Reconcile", "Reconcile with Prune", …
	Locks  [2]string // two of its locks in different shards (none for a prune; for Guard, a lock and a key its write names)
	Shards [2]string // their shards
	Hint   string    // how to keep locks in one shard on this store
}

func (e *ShardError) Error() string {
	if e == nil {
		return ErrUnsupported.Error()
	}
	s := "sleeplock: " + e.Op + " would span shards of the store"
	if e.Locks[0] != "" || e.Locks[1] != "" {
		s += fmt.Sprintf(": %s is in shard %s, %s in %s", strconv.Quote(e.Locks[0]), strconv.Quote(e.Shards[0]),
			strconv.Quote(e.Locks[1]), strconv.Quote(e.Shards[1]))
	}
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// Unwrap returns ErrUnsupported.
func (e *ShardError) Unwrap() error { return ErrUnsupported }
