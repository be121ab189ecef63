package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

// wantGone checks that name is gone from State, List and Stats.
func wantGone(t *testing.T, l *sleeplock.Locks, name string) {
	t.Helper()
	if _, err := l.State(ctx(t), name); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("State(%q) after Delete = %v, want ErrNotFound", name, err)
	}
	list, err := l.List(ctx(t))
	must(t, err)
	for _, st := range list {
		if st.Name == name {
			t.Fatalf("List shows %q after Delete: %+v", name, st)
		}
	}
	stats, err := l.Stats(ctx(t))
	must(t, err)
	for _, st := range stats {
		if st.Name == name {
			t.Fatalf("Stats shows %q after Delete: %+v", name, st)
		}
	}
}

func inUse(t *testing.T, err error, lock string, holders, waiters int) {
	t.Helper()
	var u *sleeplock.InUseError
	if !errors.As(err, &u) || !errors.Is(err, sleeplock.ErrInUse) {
		t.Fatalf("Delete of a lock in use = %v, want an *InUseError matching ErrInUse", err)
	}
	if u.Lock != lock || u.Holders != holders || u.Waiters != waiters {
		t.Fatalf("InUseError = %+v, want lock %q, %d holders, %d waiters", *u, lock, holders, waiters)
	}
}

var _ = add("Delete/FreeLockIsGone", func(t *testing.T, e *env) {
	rec := newRecorder()
	l, _ := e.locks(t, sleeplock.WithNotifier(rec))
	define(t, l, "typo", 2)
	define(t, l, "kept", 1)
	lease, err := l.TryAcquire(ctx(t), "typo")
	must(t, err)
	must(t, lease.Release(ctx(t)))
	d, err := l.Delete(ctx(t), "typo")
	must(t, err)
	if d != (sleeplock.Deleted{}) {
		t.Fatalf("Delete of a free lock = %+v, want nothing ended", d)
	}
	wantGone(t, l, "typo")
	if _, err := l.TryAcquire(ctx(t), "typo"); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("TryAcquire after Delete = %v, want ErrNotFound", err)
	}
	if _, err := l.Delete(ctx(t), "typo"); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("Delete again = %v, want ErrNotFound", err)
	}
	wantState(t, l, "kept", 0, 0)
	evs := rec.waitN(t, 5) // created ×2, acquired, released, deleted
	last := evs[len(evs)-1]
	if last.Type != sleeplock.EventDeleted || last.Lock != "typo" || last.Type.String() != "deleted" {
		t.Fatalf("events = %v, want a deleted event last", types(evs))
	}
	// The name is free: defined again, it is a new lock.
	define(t, l, "typo", 3)
	if st := state(t, l, "typo"); st.Slots != 3 {
		t.Fatalf("slots after Delete and Define = %d, want 3", st.Slots)
	}
	// Its counters went with it.
	stats, err := l.Stats(ctx(t))
	must(t, err)
	for _, st := range stats {
		if st.Name == "typo" && (st.Acquisitions != 0 || st.Releases != 0 || st.Holds.Count != 0) {
			t.Fatalf("the lock defined again has the deleted lock's counters: %+v", st)
		}
	}
})

var _ = add("Delete/HeldIsRefusedAndUnchanged", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "busy", 2)
	lease, err := l.TryAcquire(ctx(t), "busy", sleeplock.TTL(time.Minute))
	must(t, err)
	_, err = l.Delete(ctx(t), "busy")
	inUse(t, err, "busy", 1, 0)
	held, err := lease.Held(ctx(t))
	must(t, err)
	if !held {
		t.Fatal("a refused Delete ended the lease")
	}
	select {
	case <-lease.Done():
		t.Fatal("a refused Delete closed the lease's Done")
	default:
	}
	must(t, lease.Keep(ctx(t)))
	st := state(t, l, "busy")
	if st.Slots != 2 || st.Running != 1 || len(st.Holders) != 1 {
		t.Fatalf("state after a refused Delete = %+v", st)
	}
	must(t, lease.Release(ctx(t)))
	_, err = l.Delete(ctx(t), "busy")
	must(t, err)
	wantGone(t, l, "busy")
})

var _ = add("Delete/WaitedIsRefused", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "queue", 1)
	lease, err := l.TryAcquire(ctx(t), "queue", sleeplock.TTL(time.Minute))
	must(t, err)
	ch := make(chan result, 1)
	goAcquire(ctx(t), l, "queue", 1, ch, sleeplock.TTL(time.Minute))
	waitWaiting(t, l, "queue", 1)
	_, err = l.Delete(ctx(t), "queue")
	inUse(t, err, "queue", 1, 1)
	must(t, lease.Release(ctx(t)))
	r := <-ch
	must(t, r.err)
	// A waiter alone is in use too.
	ch2 := make(chan result, 1)
	goAcquire(ctx(t), l, "queue", 2, ch2, sleeplock.TTL(time.Minute))
	waitWaiting(t, l, "queue", 1)
	must(t, r.lease.Release(ctx(t)))
	r2 := <-ch2
	must(t, r2.err)
	_, err = l.Delete(ctx(t), "queue")
	inUse(t, err, "queue", 1, 0)
	must(t, r2.lease.Release(ctx(t)))
})

var _ = add("Delete/ForceEndsHoldsAndWaiters", func(t *testing.T, e *env) {
	rec := newRecorder()
	l, _ := e.locks(t, sleeplock.WithNotifier(rec))
	define(t, l, "doomed", 1)
	lease, err := l.TryAcquire(ctx(t), "doomed", sleeplock.TTL(time.Minute))
	must(t, err)
	ch := make(chan result, 1)
	goAcquire(ctx(t), l, "doomed", 1, ch, sleeplock.TTL(time.Minute))
	waitWaiting(t, l, "doomed", 1)
	d, err := l.Delete(ctx(t), "doomed", sleeplock.Force())
	must(t, err)
	if d.Holds != 1 || d.Waiters != 1 {
		t.Fatalf("forced Delete = %+v, want 1 hold and 1 waiter ended", d)
	}
	r := <-ch
	if !errors.Is(r.err, sleeplock.ErrNotFound) {
		t.Fatalf("the waiter of a deleted lock returned %v, want ErrNotFound", r.err)
	}
	// A store that learns it when renewing learns it now.
	if err := lease.Keep(ctx(t)); err == nil {
		t.Fatal("Keep of a lease of a deleted lock succeeded")
	}
	<-lease.Done()
	if cause := context.Cause(lease.Context()); !errors.Is(cause, sleeplock.ErrLeaseLost) {
		t.Fatalf("the lease of a deleted lock ended with %v, want ErrLeaseLost", cause)
	}
	if held, _ := lease.Held(ctx(t)); held {
		t.Fatal("Held reports a lease of a deleted lock held")
	}
	if err := lease.Release(ctx(t)); err == nil {
		t.Fatal("Release of a lease of a deleted lock succeeded")
	}
	wantGone(t, l, "doomed")
	// A notifier is called on a goroutine of its own, in order: once the
	// deleted event has arrived, every event before it has.
	isDeleted := func(e sleeplock.Event) bool { return e.Type == sleeplock.EventDeleted }
	var evs []sleeplock.Event
	waitFor(t, "the deleted event", func() bool {
		evs = rec.snapshot()
		return slices.ContainsFunc(evs, isDeleted)
	})
	i := slices.IndexFunc(evs, isDeleted)
	if i < 0 || !slices.ContainsFunc(evs[:i], func(e sleeplock.Event) bool {
		return e.Type == sleeplock.EventReleased && e.Lock == "doomed"
	}) {
		t.Fatalf("events = %v, want the hold's released event before deleted", types(evs))
	}
})

var _ = add("Delete/ForceEndsWaiterOfSeveralLocks", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	together(t, l, "a", "b")
	define(t, l, "a", 1)
	define(t, l, "b", 1)
	lease, err := l.TryAcquire(ctx(t), "a", sleeplock.TTL(time.Minute))
	must(t, err)
	ch := make(chan result, 1)
	go func() {
		ls, err := l.AcquireAll(ctx(t), []string{"b", "a"}, sleeplock.TTL(time.Minute))
		ch <- result{0, ls, err}
	}()
	waitWaiting(t, l, "a", 1)
	d, err := l.Delete(ctx(t), "a", sleeplock.Force())
	must(t, err)
	if d.Holds != 1 || d.Waiters != 1 {
		t.Fatalf("forced Delete = %+v, want 1 hold and 1 waiter ended", d)
	}
	if r := <-ch; !errors.Is(r.err, sleeplock.ErrNotFound) {
		t.Fatalf("AcquireAll waiting for a deleted lock returned %v, want ErrNotFound", r.err)
	}
	waitWaiting(t, l, "b", 0)
	b, err := l.TryAcquire(ctx(t), "b")
	must(t, err)
	must(t, b.Release(ctx(t)))
	_ = lease.Release(ctx(t))
})

var _ = add("Delete/Family", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "chat/*", 1)
	member, err := l.TryAcquire(ctx(t), "chat/1", sleeplock.TTL(time.Minute))
	must(t, err)
	// A member is not a definition: its family is.
	if _, err := l.Delete(ctx(t), "chat/1"); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("Delete of a family member = %v, want ErrNotFound", err)
	}
	if _, err := l.Delete(ctx(t), "chat/2"); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("Delete of an idle family member = %v, want ErrNotFound", err)
	}
	_, err = l.Delete(ctx(t), "chat/*")
	inUse(t, err, "chat/1", 1, 0)
	wantState(t, l, "chat/1", 1, 0)
	must(t, member.Release(ctx(t)))
	_, err = l.Delete(ctx(t), "chat/*")
	must(t, err)
	wantGone(t, l, "chat/*")
	if _, err := l.TryAcquire(ctx(t), "chat/1"); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("TryAcquire of a member of a deleted family = %v, want ErrNotFound", err)
	}

	// Forced: every member in use goes, holders and waiters.
	define(t, l, "room/*", 1)
	define(t, l, "room/kept", 2) // a lock of its own: not a member
	a, err := l.TryAcquire(ctx(t), "room/a", sleeplock.TTL(time.Minute))
	must(t, err)
	_, err = l.TryAcquire(ctx(t), "room/b", sleeplock.TTL(time.Minute))
	must(t, err)
	kept, err := l.TryAcquire(ctx(t), "room/kept", sleeplock.TTL(time.Minute))
	must(t, err)
	ch := make(chan result, 1)
	goAcquire(ctx(t), l, "room/a", 1, ch, sleeplock.TTL(time.Minute))
	waitWaiting(t, l, "room/a", 1)
	d, err := l.Delete(ctx(t), "room/*", sleeplock.Force())
	must(t, err)
	if d.Holds != 2 || d.Waiters != 1 {
		t.Fatalf("forced Delete of a family = %+v, want 2 holds and 1 waiter ended", d)
	}
	if r := <-ch; !errors.Is(r.err, sleeplock.ErrNotFound) {
		t.Fatalf("the waiter of a deleted family's member returned %v, want ErrNotFound", r.err)
	}
	_ = a.Keep(ctx(t))
	<-a.Done()
	if held, _ := kept.Held(ctx(t)); !held {
		t.Fatal("deleting a family ended the hold of a lock defined by its own name")
	}
	wantState(t, l, "room/kept", 1, 0)
	if _, err := l.State(ctx(t), "room/a"); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("State of a member of a deleted family = %v, want ErrNotFound", err)
	}
	must(t, kept.Release(ctx(t)))
})

var _ = add("Delete/TokensGrowAcrossRecreation", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "fenced", 3)
	define(t, l, "fam/*", 1)
	var last int64
	for range 3 {
		lease, err := l.TryAcquire(ctx(t), "fenced")
		must(t, err)
		last = max(last, lease.Token())
		must(t, lease.Release(ctx(t)))
	}
	held, err := l.TryAcquire(ctx(t), "fenced", sleeplock.TTL(time.Minute))
	must(t, err)
	last = max(last, held.Token())
	member, err := l.TryAcquire(ctx(t), "fam/x", sleeplock.TTL(time.Minute))
	must(t, err)
	lastMember := member.Token()
	_, err = l.Delete(ctx(t), "fenced", sleeplock.Force())
	must(t, err)
	_, err = l.Delete(ctx(t), "fam/*", sleeplock.Force())
	must(t, err)
	define(t, l, "fenced", 3)
	define(t, l, "fam/*", 1)
	for range 3 {
		lease, err := l.TryAcquire(ctx(t), "fenced")
		must(t, err)
		if lease.Token() <= last {
			t.Fatalf("token %d after Delete and Define, not above the old lock's %d", lease.Token(), last)
		}
		last = lease.Token()
		must(t, lease.Release(ctx(t)))
	}
	m, err := l.TryAcquire(ctx(t), "fam/x")
	must(t, err)
	if m.Token() <= lastMember {
		t.Fatalf("member token %d after its family's Delete and Define, not above the old %d", m.Token(), lastMember)
	}
	must(t, m.Release(ctx(t)))
	// A Guard or check of the old lease never passes again.
	if ok, _ := held.Held(ctx(t)); ok {
		t.Fatal("a lease of the deleted lock is held by the new one")
	}
})

var _ = add("Delete/BadInput", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "real", 1)
	for _, name := range []string{"", "/*", "tab\there", "bad\xffutf8"} {
		_, err := l.Delete(ctx(t), name)
		var inv *sleeplock.InvalidError
		if !errors.Is(err, sleeplock.ErrInvalidName) || !errors.As(err, &inv) {
			t.Errorf("Delete(%q) = %v, want an *InvalidError matching ErrInvalidName", name, err)
		}
	}
	for _, name := range []string{"nope", "nope/*", "real/x"} {
		if _, err := l.Delete(ctx(t), name); !errors.Is(err, sleeplock.ErrNotFound) {
			t.Errorf("Delete(%q) = %v, want ErrNotFound", name, err)
		}
	}
	wantState(t, l, "real", 0, 0)
	// The store checks its input too.
	_, s := e.locks(t)
	if _, err := s.Delete(ctx(t), "", true, nil); !errors.Is(err, sleeplock.ErrInvalidName) {
		t.Errorf("store Delete(\"\") = %v, want ErrInvalidName", err)
	}
})
