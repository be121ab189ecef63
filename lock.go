package sleeplock

import (
	"context"
	"sync/atomic"

	"github.com/sleeplock/sleeplock/internal/plain"
	"github.com/sleeplock/sleeplock/store"
)

// Lock is a handle on one named lock, for code that takes the same lock
// often: with the memory store, Acquire and TryAcquire of a handle skip
// the lookup by name that the Locks methods make on every call (the way a
// sync.Map user keeps the value it looked up). A handle is safe for
// concurrent use; it behaves exactly as the Locks methods with its name.
type Lock struct {
	l    *Locks
	name string
	err  error                     // the name's, reported by every call
	mem  atomic.Pointer[plainLock] // the memory store's lock, once found
}

// Lock returns a handle on the lock name. The lock need not be defined
// yet; an invalid name makes every call of the handle return its error.
func (l *Locks) Lock(name string) *Lock {
	err := l.valid()
	if err == nil {
		err = store.CheckName(name)
	}
	return &Lock{l: l, name: name, err: err}
}

// Name returns the lock's name ("" for a nil handle).
func (k *Lock) Name() string {
	if k == nil {
		return ""
	}
	return k.name
}

// Acquire is (*Locks).Acquire of the handle's lock.
func (k *Lock) Acquire(ctx context.Context, opts ...AcquireOption) (Lease, error) {
	var l *Locks // nil: acquire takes the Locks and the name from k
	return l.acquire(ctx, k, "", true, nil, opts)
}

// TryAcquire is (*Locks).TryAcquire of the handle's lock.
func (k *Lock) TryAcquire(ctx context.Context, opts ...AcquireOption) (Lease, error) {
	var l *Locks // nil: acquire takes the Locks and the name from k
	return l.acquire(ctx, k, "", false, nil, opts)
}

// errNoHandle is the error of a call of a zero Lock (a nil one's is
// errNoLocks: it has no Locks either).
var errNoHandle = store.Invalid(store.ErrInvalidConfig, "nil", "a Lock handle comes from (*Locks).Lock")

// plainLock is a lock of the memory store that a handle found.
type plainLock struct{ plain.Lock }

// plainLock returns the lock of the plain path (Locks.plain) that k keeps,
// looking it up the first time; nil for a lock the store has not defined
// by k's name (a family member, or a lock not defined yet), which is
// acquired by name.
func (k *Lock) plainLock() *plainLock {
	if n := k.mem.Load(); n != nil {
		return n
	}
	return k.lookup()
}

// lookup is plainLock's first time.
func (k *Lock) lookup() *plainLock {
	lk := k.l.plain.Lookup(k.name)
	if lk == nil {
		return nil
	}
	n := &plainLock{lk}
	k.mem.Store(n)
	return n
}
