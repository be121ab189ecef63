package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// acquireArgs returns the command of lua/acquire.lua (see callOf).
func (s *Store) acquireArgs(req *store.AcquireRequest, mode, wid string) []any {
	names := req.Names()
	var a []any
	if len(names) == 1 { // lua/fast.lua's keys: the root's
		a = append(callOf(fnAcquire, 2, 13+2), s.fastKeys(names[0])[:]...)
	} else {
		a = callOf(fnAcquire, len(names), 13+2*len(names))
		for _, n := range names {
			a = append(a, s.lockKey(n))
		}
	}
	a = append(a, s.head[:]...)
	a = append(a, wid, mode, req.Ref.String(), req.Kind, s.box(micros(req.TTL)), micros(req.Hold),
		micros(req.StaleAfter), b2i(req.Counted), b2i(req.ReenterAll), s.wttl, len(names))
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

// fastKeys returns the keys of name's root that lua/fast.lua reads and
// writes (s, d), which a call on one lock names as its keys, so that the
// script builds none of them. They are built and boxed once per root, for
// up to maxFastKeys roots, in a map that a new root replaces whole (copy
// on write): a call reads it with no lock and no write to memory that
// every caller shares.
func (s *Store) fastKeys(name string) *[2]any {
	r := root(name)
	if k := (*s.fast.Load())[r]; k != nil {
		return k
	}
	k := &[2]any{s.rootKey(r, "s"), s.rootKey(r, "d")}
	s.fastMu.Lock()
	if old := *s.fast.Load(); len(old) < maxFastKeys {
		m := make(map[string]*[2]any, len(old)+1)
		for x, v := range old {
			m[x] = v
		}
		m[r] = k
		s.fast.Store(&m)
	}
	s.fastMu.Unlock()
	return k
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
	t0 := time.Now()
	r, err := s.runCall(ctx, req.Events, s.acquireArgs(&req, mode, wid))
	if err != nil {
		return store.Grant{}, err
	}
	s.reckon(t0, r.now)
	g, queued, err := s.outcome(&req, &r)
	if err != nil || !queued {
		return g, err
	}
	return s.wait(ctx, &req, w, r.now, integer(r.arg(0)))
}

// outcome reads the answer of lua/acquire.lua and emits its events.
func (s *Store) outcome(req *store.AcquireRequest, r *reply) (g store.Grant, queued bool, err error) {
	switch r.status {
	case "int": // lua/fast.lua's token, the server's clock: the request says the rest
		w := max(req.WeightOf(0), 1)
		return store.Grant{Lock: store.Lock{Name: req.Name, Token: r.now}, Ref: req.Ref, Kind: req.Kind,
			TTL: durMicros(micros(req.TTL)), Hold: durMicros(micros(req.Hold)), Acquired: fromMicros(r.now),
			Expires: fromMicros(leaseEnd(r.now, req.TTL, req.Hold)), Weight: w}, false, nil
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
	case "fastbusy": // {kind, ref, expires, definition, slots, free}: the request says the rest
		s.refused(str(r.arg(3)))
		slots := int(integer(r.arg(4)))
		e := store.Busy(req.Name, req.WeightOf(0), slots, slots-int(integer(r.arg(5))))
		e.Kind, e.Ref, e.Expires = str(r.arg(0)), str(r.arg(1)), fromMicros(integer(r.arg(2)))
		return store.Grant{}, false, e
	case "busy":
		s.refused(str(r.arg(5)))
		e := &store.BusyError{Lock: str(r.arg(0))}
		if slots := int(integer(r.arg(6))); slots > 0 { // a refusal about slots, not ReenterAll's
			e = store.Busy(e.Lock, int(integer(r.arg(8))), slots, slots-int(integer(r.arg(7))))
		}
		e.Kind, e.Ref, e.Expires, e.Queued = str(r.arg(1)), str(r.arg(2)), fromMicros(integer(r.arg(3))), integer(r.arg(4)) == 1
		return store.Grant{}, false, e
	}
	return store.Grant{}, false, fmt.Errorf("redisstore: unexpected answer %q", r.status)
}

// refused counts a refusal of definition def (a refused try writes
// nothing): a counter of its own per definition, added to with no lock.
func (s *Store) refused(def string) {
	c, ok := s.refusals.Load(def)
	if !ok {
		c, _ = s.refusals.LoadOrStore(def, new(atomic.Uint64))
	}
	c.(*atomic.Uint64).Add(1)
}

// refusalsOf returns the refusals counted of definition def.
func (s *Store) refusalsOf(def string) uint64 {
	if c, ok := s.refusals.Load(def); ok {
		return c.(*atomic.Uint64).Load()
	}
	return 0
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
