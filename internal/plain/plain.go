// Package plain is the memory store's plain path as package sleeplock
// uses it: the acquisition of one lock for a new generated ref, with no
// kind, no TTL and no notifier, whose lease is a lock and a token. It is
// an interface, not memstore's own methods, so that the path stays out of
// memstore's user-facing API.
//
// How a reader finds the wiring: a store that has a plain path is a
// Provider (the memory store's Plain method). sleeplock.New asks the store
// it is given for it with a type assertion, and keeps what Plain returns
// as the Locks' plain path (Locks.plain), which its one acquisition route
// takes when the call asks for nothing a plain lease lacks. Any other
// store is no Provider and takes the general path (store.Store's Acquire).
//
// A plain lease is a Lock and the fencing token of its grant: a value the
// compiler keeps in registers, whose release needs no lookup by name.
package plain

import (
	"context"
	"errors"

	"github.com/sleeplock/sleeplock/store"
)

// Store is a memory store's plain path.
type Store interface {
	// Acquire takes a slot of the lock name as the store's Acquire does,
	// for a new generated ref with no kind, TTL or notifier, and returns
	// the lock and the grant's token. A name the store has no lock for
	// is checked (store.CheckName) before anything else; an ended ctx
	// takes nothing. ErrNotPlain: see there.
	Acquire(ctx context.Context, name string, wait bool) (Lock, int64, error)
	// AcquireWeighted is Acquire of weight slots as one lease (store.WeightAll:
	// every slot), with the store's Acquire's rules for weights. The Lock
	// it returns says the slots granted (Weight): for more than one, it
	// is a view of the lock that the store keeps for that weight, so that
	// the lease, too, is a Lock and a token.
	AcquireWeighted(ctx context.Context, name string, weight int, wait bool) (Lock, int64, error)
	// Lookup returns the lock defined by name, or nil for a name that is
	// not one (a family member comes and goes: it is acquired by name on
	// every call). A lock defined by name stays for the store's life.
	Lookup(name string) Lock
}

// Lock is one lock of a memory store, as Store returns it. Its methods
// that take a token act on the plain lease of that token.
type Lock interface {
	// Name returns the lock's name.
	Name() string
	// Store returns the store the lock is in.
	Store() store.Store
	// Ref returns the ref of the plain lease of token.
	Ref(token int64) store.Ref
	// Weight returns the slots a plain lease through this Lock takes: 1,
	// but for a Lock from AcquireWeighted.
	Weight() int
	// Acquire is Store.Acquire of this lock (one slot, whatever Weight).
	Acquire(ctx context.Context, wait bool) (int64, error)
	// Release releases the plain lease of token: Release of that lease
	// without a notifier.
	Release(token int64) error
	// Context returns the lease's context: cancelled, with the cause of
	// its end, once the lease ends. Every call for one lease returns the
	// same context.
	Context(token int64) context.Context
	// Err returns nil while the lease is held, and why it ended
	// otherwise: context.Cause of Context, without making the context.
	Err(token int64) error
}

// ErrNotPlain is Acquire's answer when the lock cannot grant a plain lease
// (it has run out of refs for them): the caller acquires the general way,
// through the store's Acquire.
var ErrNotPlain = errors.New("sleeplock: the lock grants no plain lease")

// Provider is a store with a plain path: the memory store.
type Provider interface {
	// Plain returns the store's plain path (nil for a nil store).
	Plain() Store
}
