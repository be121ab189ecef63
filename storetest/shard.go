package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/store"
)

// A store that keeps locks on several servers (a store.Sharder: Redis
// Cluster) cannot take locks of several shards in one atomic step: it
// refuses such a call with a *ShardError, changing nothing. The cases
// whose subject is a call on several locks run where the store keeps
// them together, and are skipped (by together or wholeStore) where it
// refuses them; Shard/SpanningCallsChangeNothing checks the refusals, and
// that the same calls work on locks of one shard.

// shardOf returns the shard of name, "" for a store that keeps all its
// locks together.
func shardOf(l *sleeplock.Locks, name string) string {
	if s, ok := l.Store().(store.Sharder); ok {
		return s.Shard(name)
	}
	return ""
}

// apart reports whether the store keeps some of names in different shards.
func apart(l *sleeplock.Locks, names ...string) bool {
	for _, n := range names[1:] {
		if shardOf(l, n) != shardOf(l, names[0]) {
			return true
		}
	}
	return false
}

// sharded reports whether the store may keep locks in several shards.
func sharded(l *sleeplock.Locks) bool { return shardOf(l, "a") != "" }

// together skips the rest of a case whose next steps name every lock of
// names in one atomic call, when the store keeps them in different shards.
func together(t *testing.T, l *sleeplock.Locks, names ...string) {
	t.Helper()
	if apart(l, names...) {
		t.Skipf("%T keeps %q in several shards (store.Sharder): one call cannot name them all (see Shard/SpanningCallsChangeNothing)",
			l.Store(), names)
	}
}

// wholeStore skips the rest of a case whose next steps read every shard
// in one call (Apply with Prune), on a store that may have several.
func wholeStore(t *testing.T, l *sleeplock.Locks) {
	t.Helper()
	if sharded(l) {
		t.Skipf("%T may keep locks in several shards (store.Sharder): it refuses an Apply with Prune (see Shard/SpanningCallsChangeNothing)",
			l.Store())
	}
}

// wantShardError checks that err is a *ShardError matching ErrUnsupported.
func wantShardError(t *testing.T, what string, err error) {
	t.Helper()
	var se *sleeplock.ShardError
	if !errors.As(err, &se) || !errors.Is(err, sleeplock.ErrUnsupported) {
		t.Fatalf("%s = %v, want a *ShardError matching ErrUnsupported", what, err)
	}
}

// shardNames are the names pair finds its two locks among.
var shardNames = []string{"s/1", "s/2", "s-1", "s-2", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"}

// pair returns two locks of shardNames, other than those of not, in one
// shard (same) or in two: a store that kept no two of them together could
// never take two locks in one call, and one that says it may keep locks
// in several shards must put some of them apart.
func pair(t *testing.T, l *sleeplock.Locks, same bool, not ...string) (string, string) {
	t.Helper()
	names := slices.DeleteFunc(slices.Clone(shardNames), func(n string) bool { return slices.Contains(not, n) })
	for i, a := range names {
		for _, b := range names[i+1:] {
			if apart(l, a, b) != same {
				return a, b
			}
		}
	}
	t.Fatalf("%T keeps %q all together or each apart (same shard wanted: %v)", l.Store(), shardNames, same)
	return "", ""
}

// A sharded store refuses, changing nothing, every call that names locks
// of several shards: AcquireAll (try or wait), a lease of several locks
// (Release, Keep, Held, ReleaseStale), Reconcile and Apply, and an Apply
// with Prune; the same calls on locks of one shard work.
var _ = add("Shard/SpanningCallsChangeNothing", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	if !sharded(l) {
		t.Skipf("%T keeps every lock together (not a store.Sharder, or on one server)", l.Store())
	}
	c, d := pair(t, l, true) // for the calls on one shard, at the end
	a, b := pair(t, l, false, c, d)
	define(t, l, a, 1)
	define(t, l, b, 1)
	for _, wait := range []bool{false, true} {
		opts := []sleeplock.AcquireOption{sleeplock.TTL(time.Minute)}
		if !wait {
			opts = append(opts, sleeplock.NoWait())
		}
		_, err := l.AcquireAll(ctx(t), []string{a, b}, opts...)
		wantShardError(t, "AcquireAll of two shards", err)
		var se *sleeplock.ShardError
		if errors.As(err, &se); se.Locks != [2]string{a, b} || se.Shards != [2]string{shardOf(l, a), shardOf(l, b)} {
			t.Fatalf("refusal %+v, want it to name %q and %q with their shards", *se, a, b)
		}
		wantState(t, l, a, 0, 0)
		wantState(t, l, b, 0, 0)
	}

	// A lease of several locks (LeaseOf) whose locks are in two shards.
	x, err := l.TryAcquire(ctx(t), a, sleeplock.Ref("r"), sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
	must(t, err)
	both, err := l.LeaseOf("r", []string{a, b}, sleeplock.NoKeepAlive())
	must(t, err)
	_, err = both.Held(ctx(t))
	wantShardError(t, "Held of a lease of two shards", err)
	wantShardError(t, "Keep of a lease of two shards", both.Keep(ctx(t)))
	wantShardError(t, "Release of a lease of two shards", both.Release(ctx(t)))
	_, err = l.ReleaseStale(ctx(t), "r", []string{a, b}, 0)
	wantShardError(t, "ReleaseStale of two shards", err)
	if held, err := x.Held(ctx(t)); err != nil || !held {
		t.Fatalf("a refused call on two shards ended a hold: %v, %v", held, err)
	}

	// Definitions of two shards, all or nothing: none.
	_, err = s.Reconcile(ctx(t), []store.Definition{{Name: c, Slots: 1}, {Name: b, Slots: 1}}, store.ReconcileOptions{}, nil)
	if !apart(l, c, b) {
		_, err = s.Reconcile(ctx(t), []store.Definition{{Name: c, Slots: 1}, {Name: a, Slots: 1}}, store.ReconcileOptions{}, nil)
	}
	wantShardError(t, "Reconcile of two shards", err)
	if _, err := l.State(ctx(t), c); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("a refused Reconcile defined %s: %v", c, err)
	}
	_, err = l.Apply(ctx(t), config(entry(a, 1, 2), entry(b, 2, 4)), sleeplock.AllowResize())
	var ce *sleeplock.ConfigError
	if wantShardError(t, "Apply of two shards", err); !errors.As(err, &ce) {
		t.Fatalf("Apply of two shards = %v, want a *ConfigError", err)
	}
	if st := state(t, l, b); st.Slots != 1 {
		t.Fatalf("a refused Apply resized %s to %d", b, st.Slots)
	}
	// Prune reads every shard, whatever the config names.
	_, err = l.Apply(ctx(t), config(entry(a, 1, 2)), sleeplock.Prune())
	wantShardError(t, "Apply with Prune", err)
	if _, err := l.State(ctx(t), b); err != nil {
		t.Fatalf("a refused prune deleted %s: %v", b, err)
	}
	// One shard: Apply, AcquireAll and the lease of both work.
	got, err := l.Apply(ctx(t), config(entry(c, 1, 2), entry(d, 2, 4)))
	must(t, err)
	if len(got.Created) != 2 {
		t.Fatalf("Apply of one shard = %+v, want 2 created", got)
	}
	cd, err := l.AcquireAll(ctx(t), []string{c, d}, sleeplock.NoWait(), sleeplock.TTL(time.Minute))
	must(t, err)
	wctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	ch := make(chan result, 1)
	go func() {
		lease, err := l.AcquireAll(wctx, []string{d, c})
		ch <- result{0, lease, err}
	}()
	waitWaiting(t, l, c, 1)
	must(t, cd.Keep(ctx(t)))
	must(t, cd.Release(ctx(t)))
	r := <-ch
	must(t, r.err)
	if held, err := r.lease.Held(ctx(t)); err != nil || !held {
		t.Fatalf("the waiter's lease of one shard: held %v, %v", held, err)
	}
	must(t, r.lease.Release(ctx(t)))
	wantState(t, l, c, 0, 0)
	wantState(t, l, d, 0, 0)
	must(t, x.Release(ctx(t)))
})
