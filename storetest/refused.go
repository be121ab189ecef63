package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

// listing is every lock's state, holders and queues included, but for
// the time of reading.
func listing(t *testing.T, l *sleeplock.Locks) []sleeplock.State {
	t.Helper()
	states, err := l.List(ctx(t))
	must(t, err)
	for i := range states {
		states[i].Now = time.Time{}
	}
	return states
}

// An acquisition that is refused (a weight above the slots of a lock or
// of the family that covers a member, a busy lock tried, a bad name,
// ref, kind, TTL or weight list) changes nothing: the store lists the
// same locks, holders and queues after it as before, and defines no
// member of a family.
var _ = add("Refused/ChangesNothing", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	needWeights(t, l)
	define(t, l, "fam/*", 1)
	define(t, l, "one", 1)
	held, err := l.Acquire(ctx(t), "fam/held", sleeplock.NoKeepAlive())
	must(t, err)
	before := listing(t, l)
	refusals := []struct {
		what string
		err  func() error
		want error
	}{
		{"a weight above a member's family", func() error { return tryErr(l.Acquire(ctx(t), "fam/x", sleeplock.Weight(2))) }, sleeplock.ErrTooHeavy},
		{"a weight above a member's family, tried", func() error { return tryErr(l.TryAcquire(ctx(t), "fam/x", sleeplock.Weight(2))) }, sleeplock.ErrTooHeavy},
		{"a weight above a lock's slots", func() error { return tryErr(l.Acquire(ctx(t), "one", sleeplock.Weight(2))) }, sleeplock.ErrTooHeavy},
		{"a busy member tried", func() error { return tryErr(l.TryAcquire(ctx(t), "fam/held")) }, sleeplock.ErrUnavailable},
		{"a family pattern", func() error { return tryErr(l.Acquire(ctx(t), "fam/*")) }, sleeplock.ErrInvalidName},
		{"a bad ref", func() error { return tryErr(l.Acquire(ctx(t), "fam/y", sleeplock.Ref("a\x01"))) }, sleeplock.ErrInvalidRef},
		{"a bad kind", func() error { return tryErr(l.Acquire(ctx(t), "fam/y", sleeplock.Kind("a\nb"))) }, sleeplock.ErrInvalid},
		{"a bad TTL", func() error { return tryErr(l.Acquire(ctx(t), "fam/y", sleeplock.TTL(-1))) }, sleeplock.ErrInvalidTTL},
		{"a weight of a lock not asked", func() error {
			return tryErr(l.AcquireAll(ctx(t), []string{"fam/a", "fam/b"}, sleeplock.WeightFor("fam/c", 1)))
		}, sleeplock.ErrInvalidLocks},
		{"an ended context", func() error {
			c, cancel := context.WithCancel(ctx(t))
			cancel()
			return tryErr(l.Acquire(c, "fam/z"))
		}, context.Canceled},
	}
	for _, r := range refusals {
		if err := r.err(); !errors.Is(err, r.want) {
			t.Fatalf("%s: %v, want %v", r.what, err, r.want)
		}
		if after := listing(t, l); !reflect.DeepEqual(after, before) {
			t.Fatalf("%s changed the store:\nbefore %+v\nafter  %+v", r.what, before, after)
		}
	}
	must(t, held.Release(ctx(t)))
})
