package store_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sleeplock/sleeplock/store"
)

func TestPlanReconcile(t *testing.T) {
	type defs = []store.Definition
	type cur = []store.Defined
	var (
		resize = store.ReconcileOptions{Resize: true}
		prune  = store.ReconcileOptions{Prune: true}
		force  = store.ReconcileOptions{Prune: true, Force: true}
	)
	create := func(name string, slots int) store.Step {
		return store.Step{Kind: store.StepCreate, Name: name, Slots: slots}
	}
	resized := func(name string, slots int) store.Step {
		return store.Step{Kind: store.StepResize, Name: name, Slots: slots}
	}
	pruned := func(name string, slots int) store.Step {
		return store.Step{Kind: store.StepPrune, Name: name, Slots: slots}
	}
	used := func(lock string, holders, waiters int) store.InUseError {
		return store.InUseError{Lock: lock, Holders: holders, Waiters: waiters}
	}
	for _, c := range []struct {
		name    string
		defs    defs
		current cur
		opts    store.ReconcileOptions
		steps   []store.Step
		holds   int
		waiters int
		err     error // the error wanted, compared by errors.Is and, for the typed ones, by value
	}{
		{name: "nothing", steps: nil},
		{name: "create lock and family", defs: defs{{"a", 1}, {"fam/*", 3}}, steps: []store.Step{create("a", 1), create("fam/*", 3)}},
		{name: "same definition again", defs: defs{{"a", 2}}, current: cur{{Name: "a", Slots: 2}}, steps: nil},
		{name: "duplicate entry", defs: defs{{"a", 2}, {"b", 1}, {"a", 2}}, current: cur{{Name: "b", Slots: 1}}, steps: []store.Step{create("a", 2)}},
		{name: "duplicate entry, other slots", defs: defs{{"a", 2}, {"a", 3}}, err: &store.ConflictError{Name: "a", Slots: 2, Requested: 3}},
		{name: "other slots without resize", defs: defs{{"b", 1}, {"a", 3}}, current: cur{{Name: "a", Slots: 2}},
			err: &store.ConflictError{Name: "a", Slots: 2, Requested: 3}},
		{name: "resize up and down", defs: defs{{"a", 3}, {"b", 1}, {"c", 2}}, current: cur{{Name: "a", Slots: 2}, {Name: "b", Slots: 5}, {Name: "c", Slots: 2}},
			opts: resize, steps: []store.Step{resized("a", 3), resized("b", 1)}},
		// Holders keep their slots: a resize below what is in use is a
		// resize (the use of a kept definition is not the plan's business).
		{name: "resize below in use", defs: defs{{"a", 1}}, current: cur{{Name: "a", Slots: 4, Use: used("a", 3, 2)}},
			opts: resize, steps: []store.Step{resized("a", 1)}},
		{name: "family and its member are two names", defs: defs{{"fam/*", 2}, {"fam/x", 5}}, current: cur{{Name: "fam/*", Slots: 2}},
			steps: []store.Step{create("fam/x", 5)}},
		{name: "family with other slots", defs: defs{{"fam/*", 4}}, current: cur{{Name: "fam/*", Slots: 2}},
			err: &store.ConflictError{Name: "fam/*", Slots: 2, Requested: 4}},
		{name: "family resized", defs: defs{{"fam/*", 4}}, current: cur{{Name: "fam/*", Slots: 2}}, opts: resize,
			steps: []store.Step{resized("fam/*", 4)}},
		{name: "unnamed kept without prune", defs: defs{{"a", 1}}, current: cur{{Name: "z", Slots: 1, Use: used("z", 1, 0)}},
			steps: []store.Step{create("a", 1)}},
		{name: "prune by name, before the creates", defs: defs{{"m", 1}}, current: cur{{Name: "z", Slots: 2}, {Name: "fam/*", Slots: 3}, {Name: "b", Slots: 1}},
			opts: prune, steps: []store.Step{pruned("b", 1), pruned("fam/*", 3), pruned("z", 2), create("m", 1)}},
		{name: "prune keeps the entries", defs: defs{{"a", 1}, {"fam/*", 2}}, current: cur{{Name: "a", Slots: 1}, {Name: "fam/*", Slots: 2}, {Name: "fam/x", Slots: 1}},
			opts: prune, steps: []store.Step{pruned("fam/x", 1)}},
		{name: "prune in use without force", defs: defs{{"a", 1}},
			current: cur{{Name: "z", Slots: 1, Use: used("z", 1, 2)}, {Name: "fam/*", Slots: 2, Use: used("fam/b", 2, 0)}, {Name: "c", Slots: 1}},
			opts:    prune, err: &store.InUseError{Lock: "fam/b", Holders: 3, Waiters: 2}},
		{name: "prune in use, only waited for", defs: nil, current: cur{{Name: "q", Slots: 1, Use: used("", 0, 1)}},
			opts: prune, err: &store.InUseError{Lock: "q", Holders: 0, Waiters: 1}},
		{name: "prune in use with force", defs: defs{{"a", 1}},
			current: cur{{Name: "z", Slots: 1, Use: used("z", 1, 2)}, {Name: "fam/*", Slots: 2, Use: used("fam/b", 2, 0)}},
			opts:    force, steps: []store.Step{pruned("fam/*", 2), pruned("z", 1), create("a", 1)}, holds: 3, waiters: 2},
		{name: "force without prune prunes nothing", defs: defs{{"a", 1}}, current: cur{{Name: "z", Slots: 1, Use: used("z", 1, 0)}},
			opts: store.ReconcileOptions{Force: true}, steps: []store.Step{create("a", 1)}},
		{name: "conflict before in use", defs: defs{{"a", 2}}, current: cur{{Name: "a", Slots: 1}, {Name: "z", Slots: 1, Use: used("z", 1, 0)}},
			opts: prune, err: &store.ConflictError{Name: "a", Slots: 1, Requested: 2}},
		{name: "current listed twice", defs: nil, current: cur{{Name: "z", Slots: 1}, {Name: "z", Slots: 1}}, opts: prune,
			steps: []store.Step{pruned("z", 1)}},
		{name: "empty name", defs: defs{{"a", 1}, {"", 1}}, err: store.ErrInvalidName},
		{name: "bare family pattern", defs: defs{{"/*", 1}}, err: store.ErrInvalidName},
		{name: "family of an empty segment", defs: defs{{"a//*", 1}}, err: store.ErrInvalidName},
		{name: "zero slots", defs: defs{{"a", 0}}, err: store.ErrInvalidSlots},
		{name: "too many slots", defs: defs{{"a", store.MaxSlots + 1}}, current: cur{{Name: "a", Slots: 1}}, opts: resize, err: store.ErrInvalidSlots},
		{name: "invalid entry with prune prunes nothing", defs: defs{{"a\n", 1}}, current: cur{{Name: "z", Slots: 1}}, opts: force, err: store.ErrInvalidName},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := store.PlanReconcile(c.defs, c.current, c.opts)
			if c.err != nil {
				if !errors.Is(err, c.err) && !sameError(err, c.err) {
					t.Fatalf("err = %v, want %v", err, c.err)
				}
				if !reflect.DeepEqual(p, store.ReconcilePlan{}) {
					t.Fatalf("a refused plan has steps: %+v", p)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if !reflect.DeepEqual(p.Steps, c.steps) || p.Holds != c.holds || p.Waiters != c.waiters || p.Force != c.opts.Force {
				t.Fatalf("plan = %+v, want steps %+v, %d holds, %d waiters", p, c.steps, c.holds, c.waiters)
			}
		})
	}
}

// sameError reports whether err is a typed error equal to want.
func sameError(err, want error) bool {
	var wc, gc *store.ConflictError
	if errors.As(want, &wc) {
		return errors.As(err, &gc) && *gc == *wc
	}
	var wu, gu *store.InUseError
	if errors.As(want, &wu) {
		return errors.As(err, &gu) && *gu == *wu
	}
	return false
}

func TestReconcilePlanResult(t *testing.T) {
	p := store.ReconcilePlan{Steps: []store.Step{
		{Kind: store.StepPrune, Name: "old", Slots: 1},
		{Kind: store.StepCreate, Name: "b", Slots: 2},
		{Kind: store.StepResize, Name: "a", Slots: 3},
		{Kind: store.StepCreate, Name: "fam/*", Slots: 1},
	}, Force: true, Holds: 2, Waiters: 1}
	want := store.Reconciled{Created: []string{"b", "fam/*"}, Resized: []string{"a"}, Deleted: []string{"old"}, Holds: 2, Waiters: 1}
	if r := p.Result(); !reflect.DeepEqual(r, want) {
		t.Fatalf("Result = %+v, want %+v", r, want)
	}
	if r := (&store.ReconcilePlan{}).Result(); !reflect.DeepEqual(r, store.Reconciled{}) {
		t.Fatalf("an empty plan's Result = %+v", r)
	}
}
