package sleeplock

import (
	"context"
	"reflect"

	"github.com/sleeplock/sleeplock/internal/storecall"
	"github.com/sleeplock/sleeplock/store"
)

// Errors of calls that cannot run at all: made before anything is looked at,
// so a nil or zero value is a typed error, never a panic.
var (
	errNoLocks   = store.Invalid(store.ErrInvalidConfig, "nil", "a *Locks must come from sleeplock.New (and a *Lock from its Lock method)")
	errNilOption = store.Invalid(store.ErrInvalidConfig, "nil", "an option must not be nil")
)

// valid returns why l cannot serve a call: l is nil or a zero Locks, or an
// Option was bad.
func (l *Locks) valid() error {
	if l == nil || l.store == nil {
		return errNoLocks
	}
	return l.err
}

// usable is valid for a call with ctx, which must not be nil.
func (l *Locks) usable(ctx context.Context) error {
	if l == nil || l.store == nil {
		return errNoLocks
	}
	if ctx == nil {
		return storecall.ErrNilContext
	}
	return l.err
}

// usableFor is usable for a call on the definition name with slots (1
// for a call that names a lock or a family pattern, whatever its slots).
func (l *Locks) usableFor(ctx context.Context, name string, slots int) error {
	if err := l.usable(ctx); err != nil {
		return err
	}
	return store.CheckDefinition(name, slots)
}

// usableBy is usable for a call of the handle k (nil: a call by name, or
// of a nil handle, whose l is nil too), whose name's error it returns too;
// a zero handle has no Locks.
func (l *Locks) usableBy(ctx context.Context, k *Lock) error {
	if k != nil && l == nil {
		return errNoHandle
	}
	if err := l.usable(ctx); err != nil {
		return err
	}
	if k != nil {
		return k.err
	}
	return nil
}

// usable returns why x cannot serve a call with ctx: it holds nothing (the
// zero Lease), or ctx is nil. (Release takes a nil ctx: it is cleanup.)
func (x Lease) usable(ctx context.Context) error {
	if err := x.ok(); err != nil {
		return err
	}
	if ctx == nil {
		return storecall.ErrNilContext
	}
	return nil
}

// setErr records the first bad Option.
func (l *Locks) setErr(err error) {
	if l.err == nil {
		l.err = err
	}
}

// isNil reports whether v is nil or holds a nil pointer, map, func, chan
// or slice (a typed nil Notifier would panic on its first event, on a
// goroutine of ours).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return r.IsNil()
	}
	return false
}
