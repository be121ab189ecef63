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
	return k.acquire(ctx, true, opts)
}

// TryAcquire is (*Locks).TryAcquire of the handle's lock.
func (k *Lock) TryAcquire(ctx context.Context, opts ...AcquireOption) (Lease, error) {
	return k.acquire(ctx, false, opts)
}

func (k *Lock) acquire(ctx context.Context, wait bool, opts []AcquireOption) (Lease, error) {
	if k == nil || k.l == nil {
		return Lease{}, store.Invalid(store.ErrInvalidConfig, "nil", "a Lock handle comes from (*Locks).Lock")
	}
	l := k.l
	if err := l.usable(ctx); err != nil {
		return Lease{}, err
	}
	if k.err != nil {
		return Lease{}, k.err
	}
	if len(opts) != 0 || l.fast == nil {
		return l.acquire(ctx, k.name, nil, wait, opts)
	}
	n := k.mem.Load()
	if n == nil {
		lk := l.fast.Lookup(k.name)
		if lk == nil {
			return l.acquire(ctx, k.name, nil, wait, nil) // a family member, or not defined yet
		}
		n = &plainLock{lk}
		k.mem.Store(n)
	}
	token, err := n.Acquire(ctx, wait)
	if err != nil {
		if err == plain.ErrNotPlain { //nolint:errorlint // the sentinel itself
			k.mem.Store(nil) // the lock may have been deleted: look it up again next time
		}
		return l.plainFailed(ctx, k.name, wait, err)
	}
	return Lease{slot: n.Lock, token: token}, nil
}

// plainLock is a lock of the memory store that a handle found.
type plainLock struct{ plain.Lock }
