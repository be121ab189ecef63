package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

func config(entries ...sleeplock.LockConfig) *sleeplock.Config {
	return &sleeplock.Config{Locks: entries}
}

func entry(name string, slots, line int) sleeplock.LockConfig {
	return sleeplock.LockConfig{Name: name, Slots: slots, Line: line}
}

// Apply with AllowResize reconciles the whole config in one step: locks
// with other slots are resized (holders keep theirs, waiters are granted
// what became free), new ones created; without it a changed entry is a
// conflict naming its line, and nothing changes.
var _ = add("Config/ApplyResize", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	together(t, l, "new", "a", "fam/*")
	define(t, l, "a", 1)
	define(t, l, "fam/*", 1)
	held, err := l.TryAcquire(ctx(t), "a", sleeplock.TTL(time.Minute))
	must(t, err)
	ch := make(chan result, 1)
	goAcquire(ctx(t), l, "a", 1, ch, sleeplock.TTL(time.Minute))
	waitWaiting(t, l, "a", 1)

	cfg := config(entry("new", 1, 2), entry("a", 2, 4), entry("fam/*", 3, 6))
	_, err = l.Apply(ctx(t), cfg)
	var ce *sleeplock.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, sleeplock.ErrAlreadyDefined) || ce.Line != 4 || ce.Name != "a" {
		t.Fatalf("Apply of changed slots without AllowResize = %v, want a ConfigError naming a at line 4", err)
	}
	if _, err := l.State(ctx(t), "new"); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("a refused Apply created an entry: %v", err)
	}
	// A conflict inside the config is refused with AllowResize too.
	_, err = l.Apply(ctx(t), config(entry("a", 2, 2), entry("a", 3, 4)), sleeplock.AllowResize())
	if !errors.As(err, &ce) || !errors.Is(err, sleeplock.ErrAlreadyDefined) || ce.Line != 4 {
		t.Fatalf("Apply of a config naming a lock twice = %v, want a conflict at line 4", err)
	}
	if st := state(t, l, "a"); st.Slots != 1 {
		t.Fatalf("a refused Apply resized a to %d", st.Slots)
	}

	got, err := l.Apply(ctx(t), cfg, sleeplock.AllowResize())
	must(t, err)
	if !slices.Equal(got.Created, []string{"new"}) || !slices.Equal(got.Resized, []string{"a", "fam/*"}) || len(got.Deleted) != 0 {
		t.Fatalf("Apply with AllowResize = %+v, want new created, a and fam/* resized", got)
	}
	r := <-ch // granted the slot the resize made
	must(t, r.err)
	wantState(t, l, "a", 2, 0)
	if st := state(t, l, "fam/x"); st.Slots != 3 {
		t.Fatalf("a member of the resized family has %d slots, want 3", st.Slots)
	}
	if ok, err := held.Held(ctx(t)); err != nil || !ok {
		t.Fatalf("a resize ended a hold: %v %v", ok, err)
	}
	again, err := l.Apply(ctx(t), cfg, sleeplock.AllowResize())
	must(t, err)
	if len(again.Created)+len(again.Resized)+len(again.Deleted) != 0 {
		t.Fatalf("the same config again changed %+v", again)
	}
	must(t, held.Release(ctx(t)))
	must(t, r.lease.Release(ctx(t)))
})

// Apply with Prune deletes what the config does not name, with Delete's
// rules, in the same step: a lock in use refuses the whole Apply (nothing
// created, nothing deleted) unless PruneInUse.
var _ = add("Config/ApplyPrune", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	wholeStore(t, l)
	define(t, l, "keep", 1)
	define(t, l, "old", 1)
	define(t, l, "oldfam/*", 2)
	lease, err := l.TryAcquire(ctx(t), "old", sleeplock.TTL(time.Minute))
	must(t, err)
	cfg := config(entry("keep", 1, 2), entry("added", 1, 4))

	_, err = l.Apply(ctx(t), cfg, sleeplock.Prune())
	var ce *sleeplock.ConfigError
	var u *sleeplock.InUseError
	if !errors.As(err, &ce) || !errors.As(err, &u) || !errors.Is(err, sleeplock.ErrInUse) || u.Lock != "old" ||
		u.Holders != 1 || ce.Name != "old" || ce.Line != 0 {
		t.Fatalf("Apply pruning a lock in use = %v, want a ConfigError with an InUseError naming old", err)
	}
	for _, name := range []string{"old", "oldfam/*", "keep"} {
		if _, err := l.State(ctx(t), name); err != nil {
			t.Fatalf("a refused prune deleted %s: %v", name, err)
		}
	}
	if _, err := l.State(ctx(t), "added"); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("a refused prune created an entry: %v", err)
	}

	got, err := l.Apply(ctx(t), cfg, sleeplock.PruneInUse())
	must(t, err)
	if !slices.Equal(got.Created, []string{"added"}) || !slices.Equal(got.Deleted, []string{"old", "oldfam/*"}) ||
		got.Holds != 1 || got.Waiters != 0 {
		t.Fatalf("Apply with PruneInUse = %+v, want added created, old and oldfam/* deleted, 1 hold ended", got)
	}
	wantGone(t, l, "old")
	wantGone(t, l, "oldfam/*")
	_ = lease.Keep(ctx(t))
	<-lease.Done()
	// Free locks are pruned with Prune alone.
	define(t, l, "stray", 1)
	got, err = l.Apply(ctx(t), cfg, sleeplock.Prune())
	must(t, err)
	if !slices.Equal(got.Deleted, []string{"stray"}) || len(got.Created) != 0 {
		t.Fatalf("Apply with Prune = %+v, want stray deleted", got)
	}
	list, err := l.List(ctx(t))
	must(t, err)
	var names []string
	for _, st := range list {
		names = append(names, st.Name)
	}
	if !slices.Equal(names, []string{"added", "keep"}) {
		t.Fatalf("locks after the prune: %q", names)
	}
})
