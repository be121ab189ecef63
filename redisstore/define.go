package redisstore

import (
	"context"
	"fmt"

	"github.com/sleeplock/sleeplock/store"
)

// Define implements store.Store: a Reconcile of one entry.
func (s *Store) Define(ctx context.Context, name string, slots int, ev store.Emitter) (bool, error) {
	r, err := s.Reconcile(ctx, []store.Definition{{Name: name, Slots: slots}}, store.ReconcileOptions{}, ev)
	return len(r.Created) == 1, err
}

// Resize implements store.Store.
func (s *Store) Resize(ctx context.Context, name string, slots int, ev store.Emitter) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := store.CheckDefinition(name, slots); err != nil {
		return err
	}
	r, err := s.run(ctx, fnResize, ev, []string{s.rootKey(root(name), "d")}, name, slots)
	if err != nil {
		return err
	}
	if r.status == "notfound" {
		return store.NotResizable(name)
	}
	return nil
}

// maxReconcileReads bounds how many times Reconcile reads the definitions
// again because they changed before its plan was carried out.
const maxReconcileReads = 64

// Reconcile implements store.Store with lua/reconcile.lua: one call reads
// the definitions, store.PlanReconcile makes the plan, and a second call
// carries it out if what the plan depends on did not change meanwhile
// (else it reads again). Its prune reads the definitions of every root:
// like a Reconcile of several roots, it needs one server (Redis Cluster
// refuses a script whose keys are in several slots).
func (s *Store) Reconcile(ctx context.Context, defs []store.Definition, opts store.ReconcileOptions, ev store.Emitter) (store.Reconciled, error) {
	if err := s.check(ctx); err != nil {
		return store.Reconciled{}, err
	}
	if _, err := store.CheckDefinitions(defs); err != nil {
		return store.Reconciled{}, err
	}
	if s.cluster && opts.Prune {
		return store.Reconciled{}, errPruneSpans
	}
	if err := s.spanDefs("Reconcile", defs); err != nil {
		return store.Reconciled{}, err
	}
	keys := make([]string, 0, len(defs)+1)
	args := []any{"", b2i(opts.Prune), b2i(opts.Force), len(defs)}
	roots := make([]any, 0, len(defs))
	for _, d := range defs {
		keys = append(keys, s.rootKey(root(d.Name), "d"))
		roots = append(roots, root(d.Name))
		args = append(args, d.Name)
	}
	if len(roots) > 0 {
		if err := s.c.SAdd(ctx, s.rootsKey(), roots...).Err(); err != nil {
			return store.Reconciled{}, s.fail(ctx, err)
		}
	}
	if opts.Prune { // it reads the roots' definitions
		keys = append(keys, s.rootsKey())
	}
	for range maxReconcileReads {
		r, err := s.run(ctx, fnReconcile, ev, keys, append(args, 0)...)
		if err != nil {
			return store.Reconciled{}, err
		}
		var current []store.Defined
		for _, v := range list(r.arg(1)) {
			d := list(v)
			current = append(current, store.Defined{Name: str(d[0]), Slots: int(integer(d[1])),
				Use: store.InUseError{Lock: str(d[2]), Holders: int(integer(d[3])), Waiters: int(integer(d[4]))}})
		}
		p, err := store.PlanReconcile(defs, current, opts)
		if err != nil {
			return store.Reconciled{}, err
		}
		plan := append([]any{r.arg(0)}, args[1:]...)
		plan = append(plan, len(p.Steps))
		for _, st := range p.Steps {
			plan = append(plan, stepKinds[st.Kind], st.Name, st.Slots)
		}
		if r, err = s.run(ctx, fnReconcile, ev, keys, plan...); err != nil {
			return store.Reconciled{}, err
		}
		if r.status == "changed" {
			continue
		}
		res := p.Result()
		if len(res.Deleted) > 0 {
			res.Holds, res.Waiters = int(integer(r.arg(0))), int(integer(r.arg(1)))
		}
		return res, nil
	}
	return store.Reconciled{}, fmt.Errorf("redisstore: reconcile: the definitions changed at each of %d reads", maxReconcileReads)
}

// stepKinds are the kinds of store.Step as lua/reconcile.lua reads them.
var stepKinds = map[store.StepKind]string{store.StepPrune: "p", store.StepCreate: "c", store.StepResize: "r"}
