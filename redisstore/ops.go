package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

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

// Delete implements store.Store in one script (lua/delete.lua), which
// writes nothing when it refuses.
func (s *Store) Delete(ctx context.Context, name string, force bool, ev store.Emitter) (store.Deleted, error) {
	if err := s.check(ctx); err != nil {
		return store.Deleted{}, err
	}
	if err := store.CheckDefinition(name, 1); err != nil {
		return store.Deleted{}, err
	}
	r, err := s.run(ctx, fnDelete, ev, []string{s.rootKey(root(name), "d")}, name, b2i(force))
	if err != nil {
		return store.Deleted{}, err
	}
	switch r.status {
	case "notfound":
		return store.Deleted{}, store.NotDeletable(name)
	case "inuse":
		return store.Deleted{}, &store.InUseError{Lock: str(r.arg(0)), Holders: int(integer(r.arg(1))), Waiters: int(integer(r.arg(2)))}
	}
	return store.Deleted{Holds: int(integer(r.arg(0))), Waiters: int(integer(r.arg(1)))}, nil
}

func (s *Store) fail(ctx context.Context, err error) error {
	s.reroute(err)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, redis.ErrClosed) {
		return store.ErrClosed
	}
	return fmt.Errorf("redisstore: %w", err)
}

// acquireArgs returns the command of lua/acquire.lua (see callOf).
func (s *Store) acquireArgs(req *store.AcquireRequest, mode, wid string) []any {
	names := req.Names()
	nkeys := len(names)
	if nkeys == 1 {
		nkeys = 4 // and fastKeys'
	}
	a := callOf(fnAcquire, nkeys, 12+2*len(names))
	for _, n := range names {
		a = append(a, s.lockKey(n))
	}
	if len(names) == 1 {
		a = append(a, s.fastKeys(names[0])[:]...)
	}
	a = append(a, s.head[:]...)
	a = append(a, wid, mode, req.Ref.String(), req.Kind, micros(req.TTL), micros(req.Hold),
		micros(req.StaleAfter), b2i(req.Counted), b2i(req.ReenterAll), micros(s.cfg.waiterTTL), len(names))
	for _, n := range names {
		a = append(a, n)
	}
	for i := range names {
		a = append(a, req.WeightOf(i))
	}
	return append(a, b2i(req.Events != nil))
}

// maxFastKeys is how many roots' fastKeys a store keeps.
const maxFastKeys = 1024

// fastKeys returns the keys of name's root that lua/fast.lua writes (d,
// s, u), which a call on one lock names after the lock's, so that the
// script builds none of them. They are built and boxed once per root, for
// up to maxFastKeys roots.
func (s *Store) fastKeys(name string) *[3]any {
	r := root(name)
	s.fastMu.RLock()
	k := s.fast[r]
	s.fastMu.RUnlock()
	if k != nil {
		return k
	}
	k = &[3]any{s.rootKey(r, "d"), s.rootKey(r, "s"), s.rootKey(r, "u")}
	s.fastMu.Lock()
	if len(s.fast) < maxFastKeys {
		if s.fast == nil {
			s.fast = map[string]*[3]any{}
		}
		s.fast[r] = k
	}
	s.fastMu.Unlock()
	return k
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Acquire implements store.Store: one script grants, refuses or queues;
// a queued caller waits for its grant, pushed by the release that makes it
// (see wait).
func (s *Store) Acquire(ctx context.Context, req store.AcquireRequest) (store.Grant, error) {
	if err := s.check(ctx); err != nil {
		return store.Grant{}, err
	}
	if err := store.CheckNames(req.Names()); err != nil {
		return store.Grant{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Grant{}, err
	}
	if s.closed.Load() {
		return store.Grant{}, store.ErrClosed
	}
	if err := s.spanRequest(&req); err != nil {
		return store.Grant{}, err
	}
	mode, wid := "try", ""
	var w *waiter
	if req.Wait {
		mode = "wait"
		if w = s.addWaiter(&req); w == nil {
			return store.Grant{}, store.ErrClosed
		}
		defer s.removeWaiter(w)
		wid = w.id
	}
	r, err := s.runCall(ctx, req.Events, s.acquireArgs(&req, mode, wid))
	if err != nil {
		return store.Grant{}, err
	}
	g, queued, err := s.outcome(&req, &r)
	if err != nil || !queued {
		return g, err
	}
	return s.wait(ctx, &req, w, r.now, integer(r.arg(0)))
}

// outcome reads the answer of lua/acquire.lua and emits its events.
func (s *Store) outcome(req *store.AcquireRequest, r *reply) (g store.Grant, queued bool, err error) {
	switch r.status {
	case "fastgranted": // {token, expires, weight}: the request says the rest
		return store.Grant{Lock: store.Lock{Name: req.Name, Token: integer(r.arg(0))}, Ref: req.Ref, Kind: req.Kind,
			TTL: durMicros(micros(req.TTL)), Hold: durMicros(micros(req.Hold)), Acquired: fromMicros(r.now),
			Expires: fromMicros(integer(r.arg(1))), Weight: int(integer(r.arg(2)))}, false, nil
	case "granted":
		return grantOf(req, list(r.arg(0))), false, nil
	case "queued":
		return store.Grant{}, true, nil
	case "notfound":
		return store.Grant{}, false, store.NotFound(str(r.arg(0)))
	case "heavy":
		return store.Grant{}, false, &store.WeightError{Lock: str(r.arg(0)), Weight: int(integer(r.arg(1))),
			Slots: int(integer(r.arg(2))), Resized: integer(r.arg(3)) == 1}
	case "busy":
		s.mu.Lock()
		s.refusals[str(r.arg(5))]++
		s.mu.Unlock()
		e := &store.BusyError{Lock: str(r.arg(0))}
		if slots := int(integer(r.arg(6))); slots > 0 { // a refusal about slots, not ReenterAll's
			e = store.Busy(e.Lock, int(integer(r.arg(8))), slots, slots-int(integer(r.arg(7))))
		}
		e.Kind, e.Ref, e.Expires, e.Queued = str(r.arg(1)), str(r.arg(2)), fromMicros(integer(r.arg(3))), integer(r.arg(4)) == 1
		return store.Grant{}, false, e
	}
	return store.Grant{}, false, fmt.Errorf("redisstore: unexpected answer %q", r.status)
}

// grantOf reads a grant: {reentered, kind, ttl, hold, {name, token,
// acquired, expires, weight}...}.
func grantOf(req *store.AcquireRequest, a []any) store.Grant {
	g := store.Grant{Ref: req.Ref}
	if len(a) < 5 {
		return g
	}
	g.Reentered, g.Kind = integer(a[0]) == 1, str(a[1])
	g.TTL, g.Hold = durMicros(integer(a[2])), durMicros(integer(a[3]))
	for i, x := range a[4:] {
		l := list(x)
		if len(l) < 5 {
			continue
		}
		lock := store.Lock{Name: str(l[0]), Token: integer(l[1])}
		exp := fromMicros(integer(l[3]))
		if i == 0 {
			g.Lock, g.Acquired, g.Expires, g.Weight = lock, fromMicros(integer(l[2])), exp, int(integer(l[4]))
			continue
		}
		g.More = append(g.More, lock)
		if !exp.IsZero() && (g.Expires.IsZero() || exp.Before(g.Expires)) {
			g.Expires = exp
		}
	}
	return g
}

// handleArgs returns the keys of h's locks and its names and tokens.
func (s *Store) handleArgs(h *store.Handle) ([]string, []any) {
	var keys []string
	var names, tokens []any
	h.Each(func(l store.Lock) {
		keys = append(keys, s.lockKey(l.Name))
		names = append(names, l.Name)
		tokens = append(tokens, l.Token)
	})
	return keys, append(append([]any{len(names)}, names...), tokens...)
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, h store.Handle, ev store.Emitter) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := checkHandle(&h); err != nil {
		return err
	}
	if err := s.spanHandle("Release", &h); err != nil {
		return err
	}
	ref := h.Ref.String()
	var a []any
	if len(h.More) == 0 { // one lock: lua/fast.lua's keys, in one go
		a = append(callOf(fnRelease, 4, 7), s.lockKey(h.Name))
		a = append(append(a, s.fastKeys(h.Name)[:]...), s.head[:]...)
		a = append(a, ref, "release", 0, 1, h.Name, h.Token, b2i(ev != nil))
	} else {
		keys, args := s.handleArgs(&h)
		args = append(append(s.withNode(4+len(args)), ref, "release", 0), args...)
		a = fcall(fnRelease, keys, append(args, b2i(ev != nil)))
	}
	r, err := s.runCall(ctx, ev, a)
	if err != nil {
		return err
	}
	switch r.status {
	case "notfound":
		return store.NotFound(str(r.arg(0)))
	case "notheld":
		return store.ErrNotHeld
	case "released": // lua/fast.lua's, with no message: end the hold's watchers here
		s.w.Ended(h.Name, ref, h.Token, store.ErrReleased)
		return nil
	}
	if missing := list(r.arg(0)); len(missing) > 0 {
		q := make([]string, len(missing))
		for i, m := range missing {
			q[i] = strconv.Quote(str(m))
		}
		return fmt.Errorf("%w: %s", store.ErrNotHeld, strings.Join(q, ", "))
	}
	return nil
}

// ReleaseStale implements store.Store.
func (s *Store) ReleaseStale(ctx context.Context, h store.Handle, staleAfter time.Duration, ev store.Emitter) (bool, error) {
	if err := s.check(ctx); err != nil {
		return false, err
	}
	if err := checkHandle(&h); err != nil {
		return false, err
	}
	if err := s.spanHandle("ReleaseStale", &h); err != nil {
		return false, err
	}
	keys, args := s.handleArgs(&h)
	r, err := s.run(ctx, fnRelease, ev, keys, append([]any{h.Ref.String(), "stale", micros(staleAfter)}, args...)...)
	if err != nil {
		return false, err
	}
	switch r.status {
	case "notfound":
		return false, store.NotFound(str(r.arg(0)))
	case "no":
		return false, nil
	}
	return true, nil
}

// Keep implements store.Store.
func (s *Store) Keep(ctx context.Context, h store.Handle, ttl, hold time.Duration) (time.Time, error) {
	if err := s.check(ctx); err != nil {
		return time.Time{}, err
	}
	if err := checkHandle(&h); err != nil {
		return time.Time{}, err
	}
	if err := s.spanHandle("Keep", &h); err != nil {
		return time.Time{}, err
	}
	keys, args := s.handleArgs(&h)
	r, err := s.run(ctx, fnKeep, nil, keys, append([]any{h.Ref.String(), micros(ttl), micros(hold)}, args...)...)
	if err != nil {
		return time.Time{}, err
	}
	switch r.status {
	case "notfound":
		return time.Time{}, store.NotFound(str(r.arg(0)))
	case "notheld":
		s.w.Ended(h.Name, h.Ref.String(), h.Token, lostBecause("taken over or released by another holder"))
		return time.Time{}, store.ErrNotHeld
	}
	return fromMicros(integer(r.arg(0))), nil
}

// Held implements store.Store; it writes nothing.
func (s *Store) Held(ctx context.Context, h store.Handle) (store.Status, error) {
	if err := s.check(ctx); err != nil {
		return store.Status{}, err
	}
	if err := checkHandle(&h); err != nil {
		return store.Status{}, err
	}
	if err := s.spanHandle("Held", &h); err != nil {
		return store.Status{}, err
	}
	keys, args := s.handleArgs(&h)
	r, err := s.run(ctx, fnHeld, nil, keys, append([]any{h.Ref.String()}, args...)...)
	if err != nil {
		return store.Status{}, err
	}
	if r.status == "notfound" {
		return store.Status{}, store.NotFound(str(r.arg(0)))
	}
	return store.Status{Held: integer(r.arg(0)) == 1, Expired: integer(r.arg(1)) == 1, Now: fromMicros(r.now),
		Renewed: fromMicros(integer(r.arg(2))), Expires: fromMicros(integer(r.arg(3)))}, nil
}

// State implements store.Store; it writes nothing.
func (s *Store) State(ctx context.Context, name string, detail bool) (store.State, error) {
	if err := s.check(ctx); err != nil {
		return store.State{}, err
	}
	if err := store.CheckDefinition(name, 1); err != nil { // a lock or a family
		return store.State{}, err
	}
	var r reply
	err := s.look(func() (err error) {
		r, err = s.exec(ctx, fnState, nil, []string{s.lockKey(name)}, name, b2i(detail))
		return err
	})
	if err != nil {
		return store.State{}, err
	}
	if r.status == "notfound" {
		return store.State{}, store.NotFound(name)
	}
	return stateOf(list(r.arg(0)), r.now), nil
}

// stateOf reads a state of lua/common.lua's state().
func stateOf(a []any, now int64) store.State {
	if len(a) < 9 {
		return store.State{}
	}
	st := store.State{Name: str(a[0]), Slots: int(integer(a[1])), Family: integer(a[2]) == 1,
		Running: int(integer(a[3])), Expired: int(integer(a[4])), Leases: int(integer(a[5])),
		Waiting: int(integer(a[6])), Now: fromMicros(now)}
	for _, x := range list(a[7]) {
		h := list(x)
		if len(h) < 8 {
			continue
		}
		hd := store.Holder{Ref: str(h[0]), Kind: str(h[1]), Token: integer(h[2]),
			Count: int(integer(h[3])), Weight: int(integer(h[4])), Acquired: fromMicros(integer(h[5])),
			Renewed: fromMicros(integer(h[6])), Expires: fromMicros(integer(h[7]))}
		if len(h) > 8 {
			hd.Hold = durMicros(integer(h[8]))
		}
		st.Holders = append(st.Holders, hd)
	}
	for _, x := range list(a[8]) {
		q := list(x)
		if len(q) < 5 {
			continue
		}
		w := store.Waiter{Ref: str(q[0]), Kind: str(q[1]), Since: fromMicros(integer(q[2])), Weight: int(integer(q[3]))}
		for _, n := range list(q[4]) {
			w.Locks = append(w.Locks, str(n))
		}
		st.Queue = append(st.Queue, w)
	}
	return st
}

// roots returns the roots that have definitions.
func (s *Store) allRoots(ctx context.Context) ([]string, error) {
	roots, err := s.c.SMembers(ctx, s.rootsKey()).Result()
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	sort.Strings(roots)
	return roots, nil
}

// List implements store.Store: one script per root, in one pipeline.
func (s *Store) List(ctx context.Context, detail bool) ([]store.State, error) {
	replies, err := s.perRoot(ctx, fnList, b2i(detail))
	if err != nil {
		return nil, err
	}
	out := []store.State{}
	for _, r := range replies {
		for _, x := range list(r.arg(0)) {
			out = append(out, stateOf(list(x), r.now))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// perRoot runs f once for every root of the store, in one pipeline,
// each call with the root's definitions key and the root (then args): the
// store-wide reads (List, Stats). A store with no root answers no reply.
func (s *Store) perRoot(ctx context.Context, f function, args ...any) ([]reply, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	roots, err := s.allRoots(ctx)
	if err != nil || len(roots) == 0 {
		return nil, err
	}
	calls := make([]call, len(roots))
	for i, r := range roots {
		calls[i] = call{keys: []string{s.rootKey(r, "d")}, args: append([]any{r}, args...)}
	}
	var replies []reply
	err = s.look(func() (err error) {
		replies, err = s.runEach(ctx, f, calls)
		return err
	})
	return replies, err
}
