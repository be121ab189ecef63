package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/store"
)

var _ = add("Define/ValidatesNameAndSlots", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	bad := []struct {
		name  string
		slots int
		want  error
	}{
		{"", 1, sleeplock.ErrInvalidName},
		{strings.Repeat("x", 201), 1, sleeplock.ErrInvalidName},
		{"tab\there", 1, sleeplock.ErrInvalidName},
		{"nul\x00", 1, sleeplock.ErrInvalidName},
		{"bad\xffutf8", 1, sleeplock.ErrInvalidName},
		{"/*", 1, sleeplock.ErrInvalidName},
		{"ok", 0, sleeplock.ErrInvalidSlots},
		{"ok", -3, sleeplock.ErrInvalidSlots},
		{"ok", 1_000_001, sleeplock.ErrInvalidSlots},
	}
	for _, b := range bad {
		err := l.Define(ctx(t), b.name, b.slots)
		var inv *sleeplock.InvalidError
		if !errors.Is(err, b.want) || !errors.Is(err, sleeplock.ErrInvalid) || !errors.As(err, &inv) {
			t.Errorf("Define(%q, %d) = %v, want %v", b.name, b.slots, err, b.want)
		}
	}
	if err := l.Define(ctx(t), "ok", 0); err == nil || !strings.Contains(err.Error(), "slots must be a positive integer") {
		t.Errorf("the slots error should state the rule, got %v", err)
	}
	// Nothing was created by the refused calls.
	list, err := l.List(ctx(t))
	must(t, err)
	if len(list) != 0 {
		t.Fatalf("refused definitions created locks: %+v", list)
	}
	define(t, l, strings.Repeat("x", 200), 1_000_000)
	define(t, l, "ünïcode/名前", 1)
})

var _ = add("Define/SameAgainIsNoOpOtherSlotsIsConflict", func(t *testing.T, e *env) {
	rec := newRecorder()
	l, _ := e.locks(t, sleeplock.WithNotifier(rec))
	define(t, l, "payments", 3)
	define(t, l, "payments", 3)
	err := l.Define(ctx(t), "payments", 4)
	var c *sleeplock.ConflictError
	if !errors.As(err, &c) || !errors.Is(err, sleeplock.ErrAlreadyDefined) || c.Slots != 3 || c.Requested != 4 {
		t.Fatalf("Define with other slots = %v, want a *ConflictError naming 3 slots", err)
	}
	if !strings.Contains(err.Error(), "3 slots") {
		t.Errorf("the conflict should name the existing definition: %v", err)
	}
	st := state(t, l, "payments")
	if st.Slots != 3 {
		t.Fatalf("slots = %d after a refused redefinition, want 3", st.Slots)
	}
	rec.waitN(t, 1)
	define(t, l, "other", 1)
	evs := rec.waitN(t, 2)
	if len(evs) != 2 || evs[0].Type != sleeplock.EventCreated || evs[0].Lock != "payments" || evs[0].Slots != 3 || evs[1].Lock != "other" {
		t.Fatalf("events = %v, want one created per new lock only", types(evs))
	}
})

// Store.Define reports whether it created the definition: true for a new
// lock or family, false for the same definition again.
var _ = add("Define/ReportsCreated", func(t *testing.T, e *env) {
	_, s := e.locks(t)
	for _, name := range []string{"payments", "chat/*"} {
		if created, err := s.Define(ctx(t), name, 2, nil); err != nil || !created {
			t.Fatalf("Define(%q) of a new definition = %v, %v; want true, nil", name, created, err)
		}
		if created, err := s.Define(ctx(t), name, 2, nil); err != nil || created {
			t.Fatalf("Define(%q) again = %v, %v; want false, nil", name, created, err)
		}
	}
})

var _ = add("Define/UnknownLockIsNotFound", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	if _, err := l.TryAcquire(ctx(t), "nope"); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("TryAcquire of an undefined lock = %v, want ErrNotFound", err)
	}
	if _, err := l.State(ctx(t), "nope"); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("State of an undefined lock = %v, want ErrNotFound", err)
	}
	_, err := l.AcquireAll(ctx(t), []string{"nope", "nope2"}, sleeplock.NoWait())
	if apart(l, "nope", "nope2") {
		wantShardError(t, "AcquireAll of undefined locks of two shards", err)
	} else if !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("AcquireAll of undefined locks = %v, want ErrNotFound", err)
	}
	list, err := l.List(ctx(t))
	must(t, err)
	if len(list) != 0 {
		t.Fatalf("lookups of unknown names created locks: %+v", list)
	}
})

var _ = add("Define/FamilyCoversMembers", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "chat/*", 1)
	define(t, l, "chat/vip/*", 2)
	define(t, l, "chat/7", 5)
	for name, slots := range map[string]int{"chat/42": 1, "chat/a/b": 1, "chat/vip/1": 2, "chat/7": 5} {
		if st := state(t, l, name); st.Slots != slots {
			t.Errorf("slots of %q = %d, want %d", name, st.Slots, slots)
		}
	}
	a, err := l.TryAcquire(ctx(t), "chat/42")
	must(t, err)
	if _, err := l.TryAcquire(ctx(t), "chat/42"); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("second holder of a one-slot family member = %v", err)
	}
	b, err := l.TryAcquire(ctx(t), "chat/43")
	must(t, err)
	for _, name := range []string{"chat", "user/1", "chatx/1"} {
		if _, err := l.TryAcquire(ctx(t), name); !errors.Is(err, sleeplock.ErrNotFound) {
			t.Errorf("TryAcquire(%q) = %v, want ErrNotFound", name, err)
		}
	}
	if _, err := l.TryAcquire(ctx(t), "chat/*"); !errors.Is(err, sleeplock.ErrInvalidName) {
		t.Errorf("acquiring a family pattern = %v, want ErrInvalidName", err)
	}
	must(t, a.Release(ctx(t)))
	must(t, b.Release(ctx(t)))
	wantState(t, l, "chat/42", 0, 0)
})

// Resizing a family resizes its members in use, and no member of another
// family.
var _ = add("Define/ResizeFamilyOnlyItsMembers", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "a/*", 1)
	define(t, l, "b/*", 1)
	a, err := l.TryAcquire(ctx(t), "a/1")
	must(t, err)
	b, err := l.TryAcquire(ctx(t), "b/1")
	must(t, err)
	must(t, l.Resize(ctx(t), "a/*", 2))
	if st := state(t, l, "a/1"); st.Slots != 2 || st.Running != 1 {
		t.Fatalf("member of the resized family: %d slots, %d running; want 2, 1", st.Slots, st.Running)
	}
	if st := state(t, l, "b/1"); st.Slots != 1 || st.Running != 1 {
		t.Fatalf("member of the other family: %d slots, %d running; want 1, 1", st.Slots, st.Running)
	}
	if _, err := l.TryAcquire(ctx(t), "b/1"); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("a second holder of the other family's one-slot member = %v, want ErrUnavailable", err)
	}
	must(t, a.Release(ctx(t)))
	must(t, b.Release(ctx(t)))
})

var _ = add("Define/ResizeKeepsHoldersAndGrantsWaiters", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	define(t, l, "gpu", 2)
	a, err := l.TryAcquire(ctx(t), "gpu")
	must(t, err)
	b, err := l.TryAcquire(ctx(t), "gpu")
	must(t, err)
	ch := make(chan result, 1)
	goAcquire(ctx(t), l, "gpu", 1, ch)
	waitWaiting(t, l, "gpu", 1)
	must(t, l.Resize(ctx(t), "gpu", 3))
	r := <-ch
	must(t, r.err)
	wantState(t, l, "gpu", 3, 0)
	must(t, l.Resize(ctx(t), "gpu", 1))
	st := state(t, l, "gpu")
	if st.Slots != 1 || st.Running != 3 {
		t.Fatalf("after shrinking: %+v, want 1 slot and the 3 holders kept", st)
	}
	for _, x := range []sleeplock.Lease{a, b} {
		if held, err := x.Held(ctx(t)); err != nil || !held {
			t.Fatalf("a holder was dropped by Resize: %v %v", held, err)
		}
	}
	must(t, a.Release(ctx(t)))
	if _, err := l.TryAcquire(ctx(t), "gpu"); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("a grant beyond the new slots: %v", err)
	}
	if err := l.Resize(ctx(t), "nope", 2); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("Resize of an unknown lock = %v", err)
	}
	if err := l.Resize(ctx(t), "gpu", 0); !errors.Is(err, sleeplock.ErrInvalidSlots) {
		t.Fatalf("Resize to 0 = %v", err)
	}
	must(t, b.Release(ctx(t)))
	must(t, r.lease.Release(ctx(t)))
})

var _ = add("Config/ApplyCreatesLocks", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	cfg, err := sleeplock.ReadConfig(strings.NewReader("locks:\n  - name: test1\n    slots: 2\n  - name: test2\n    slots: 3\n  - name: chat/*\n    slots: 1\n"))
	must(t, err)
	together(t, l, "test1", "test2", "chat/*")
	_, err = l.Apply(ctx(t), cfg)
	must(t, err)
	_, err = l.Apply(ctx(t), cfg) // idempotent
	must(t, err)
	for name, slots := range map[string]int{"test1": 2, "test2": 3, "chat/9": 1} {
		if st := state(t, l, name); st.Slots != slots {
			t.Errorf("%s: slots %d, want %d", name, st.Slots, slots)
		}
	}
	conflict := &sleeplock.Config{Locks: []sleeplock.LockConfig{{Name: "test1", Slots: 5, Line: 7}}}
	_, err = l.Apply(ctx(t), conflict)
	var ce *sleeplock.ConfigError
	if !errors.As(err, &ce) || ce.Line != 7 || ce.Name != "test1" || !errors.Is(err, sleeplock.ErrAlreadyDefined) {
		t.Fatalf("Apply of a conflicting entry = %v, want a ConfigError naming test1 at line 7", err)
	}
})

// Apply is all or nothing: a config whose second entry conflicts with a
// definition (or an entry of the config itself conflicts with an earlier
// one) defines nothing and emits no event, and the error names the entry.
var _ = add("Config/ApplyAllOrNothing", func(t *testing.T, e *env) {
	rec := newRecorder()
	l, s := e.locks(t, sleeplock.WithNotifier(rec))
	together(t, l, "first", "taken", "fam/*")
	define(t, l, "taken", 5)
	for _, c := range []struct {
		locks []sleeplock.LockConfig
		entry int
	}{
		{[]sleeplock.LockConfig{{Name: "first", Slots: 1, Line: 2}, {Name: "taken", Slots: 2, Line: 4}}, 1},
		{[]sleeplock.LockConfig{{Name: "fam/*", Slots: 1, Line: 2}, {Name: "first", Slots: 1, Line: 4}, {Name: "first", Slots: 3, Line: 6}}, 2},
	} {
		_, err := l.Apply(ctx(t), &sleeplock.Config{Locks: c.locks})
		var ce *sleeplock.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, sleeplock.ErrAlreadyDefined) || ce.Entry != c.entry || ce.Line != c.locks[c.entry].Line {
			t.Fatalf("Apply(%+v) = %v, want a ConfigError naming entry %d", c.locks, err, c.entry)
		}
		for _, name := range []string{"first", "fam/*"} {
			if _, err := l.State(ctx(t), name); !errors.Is(err, sleeplock.ErrNotFound) {
				t.Fatalf("after a failed Apply, State(%q) = %v, want ErrNotFound", name, err)
			}
		}
	}
	define(t, l, "after", 1) // its event comes after any of the failed Applies
	evs := rec.waitN(t, 2)
	if got := types(evs); len(got) != 2 || got[0] != "created:taken" || got[1] != "created:after" {
		t.Fatalf("events %v, want only the two Defines'", got)
	}
	// The store's Reconcile says which entries it created.
	r, err := s.Reconcile(ctx(t), []store.Definition{{Name: "first", Slots: 1}, {Name: "taken", Slots: 5}, {Name: "fam/*", Slots: 2}}, store.ReconcileOptions{}, nil)
	must(t, err)
	if !slices.Equal(r.Created, []string{"first", "fam/*"}) || len(r.Resized)+len(r.Deleted) != 0 {
		t.Fatalf("Reconcile did %+v, want [first fam/*] created", r)
	}
	if _, err := s.Reconcile(ctx(t), []store.Definition{{Name: "ok", Slots: 1}, {Name: "", Slots: 1}}, store.ReconcileOptions{}, nil); !errors.Is(err, sleeplock.ErrInvalidName) {
		t.Fatalf("Reconcile with an invalid entry = %v, want ErrInvalidName", err)
	}
	if _, err := l.State(ctx(t), "ok"); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("Reconcile with an invalid entry defined the valid one: %v", err)
	}
})

// A lock shrunk below its holders, with nobody waiting, grants no slot
// until fewer hold it than its new slots; grown, it grants the new slots
// at once. The same when a more specific definition of a name in use
// gives it fewer slots than its family.
var _ = add("Define/ShrinkBelowHoldersRefusesUntilReleased", func(t *testing.T, e *env) {
	l, _ := e.locks(t)
	unavailable := func(name string) {
		t.Helper()
		if _, err := l.TryAcquire(ctx(t), name); !errors.Is(err, sleeplock.ErrUnavailable) {
			t.Fatalf("TryAcquire of %s: %v, want ErrUnavailable", name, err)
		}
	}
	define(t, l, "pool", 3)
	a, err := l.TryAcquire(ctx(t), "pool")
	must(t, err)
	b, err := l.TryAcquire(ctx(t), "pool")
	must(t, err)
	must(t, l.Resize(ctx(t), "pool", 1))
	unavailable("pool")
	must(t, a.Release(ctx(t)))
	unavailable("pool")
	must(t, b.Release(ctx(t)))
	c, err := l.TryAcquire(ctx(t), "pool")
	must(t, err)
	unavailable("pool")
	must(t, l.Resize(ctx(t), "pool", 2))
	d, err := l.TryAcquire(ctx(t), "pool")
	must(t, err)
	unavailable("pool")
	wantState(t, l, "pool", 2, 0)
	must(t, c.Release(ctx(t)))
	must(t, d.Release(ctx(t)))

	define(t, l, "vip/*", 3)
	x, err := l.TryAcquire(ctx(t), "vip/1")
	must(t, err)
	y, err := l.TryAcquire(ctx(t), "vip/1")
	must(t, err)
	define(t, l, "vip/1", 1)
	unavailable("vip/1")
	must(t, x.Release(ctx(t)))
	unavailable("vip/1")
	must(t, y.Release(ctx(t)))
	z, err := l.TryAcquire(ctx(t), "vip/1")
	must(t, err)
	unavailable("vip/1")
	must(t, z.Release(ctx(t)))
})
