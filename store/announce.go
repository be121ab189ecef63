package store

import "context"

// Relabeler is implemented by stores that can change the kind of a hold in
// place, keeping its token and times (package election's Proclaim: a
// leader's advertised value is the kind of its hold).
type Relabeler interface {
	// Relabel sets the kind of h's hold of its first lock, only while h's
	// ref (and token, where h has one) holds it, expired or not;
	// otherwise nothing changes and the error is ErrNotHeld. ErrNotFound
	// when no definition covers the name. It emits no event.
	Relabel(ctx context.Context, h Handle, kind string) error
}

// MaxAnnounceBytes is the longest message an Announcer must carry.
const MaxAnnounceBytes = 1024

// Announcer is implemented by stores that can tell every process sharing
// them, at once, that a lock changed (package election's Observe). The
// memory store calls the listeners directly, PostgreSQL sends a
// notification, SQLite reports the changes of its file, Redis publishes on
// the prefix's channel.
type Announcer interface {
	// Announce sends msg (at most MaxAnnounceBytes, no NUL byte) to every
	// listener of name, in every process sharing the store, after every
	// change the caller made before it. A store that cannot carry
	// messages sends nothing and returns nil: its listeners learn of the
	// change itself (see Listen).
	Announce(ctx context.Context, name, msg string) error
	// Listen calls f with each message announced for name from now until
	// stop is called (after stop returns, f is not called again). Calls
	// of f do not overlap; f must not block. An empty msg says that the
	// lock may have changed without saying how: a store that cannot carry
	// messages sends it at every change it sees, and any store sends it
	// when messages may have been missed (a connection lost and back).
	Listen(name string, f func(msg string)) (stop func())
}
