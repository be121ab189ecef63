package pgstore

import (
	"time"
)

// Listening reports whether the store's LISTEN connection is up.
func (s *Store) Listening() bool { return s != nil && s.d.listening.Load() }

// SetListenPoll sets how often the heads of this process's queue check
// while notifications arrive; it returns a function that restores it.
func SetListenPoll(d time.Duration) func() {
	old := listenPoll.Swap(int64(d))
	return func() { listenPoll.Store(old) }
}

// ChannelOf is the NOTIFY channel of a schema.
func ChannelOf(schema string) string { return channelOf(schema) }

// NodeID is the store's row in the nodes table (migration 005).
func (s *Store) NodeID() int64 {
	if s == nil {
		return 0
	}
	return s.d.node
}

// UndoLater hands the store's heartbeat an abandoned acquisition to give
// up the place of, as an abandoned acquisition whose undo failed does.
func (s *Store) UndoLater(op int64) {
	if s == nil || s.c == nil || op == 0 {
		return
	}
	s.d.undoLater(op)
}
