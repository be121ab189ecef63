package redisstore

import (
	"context"
	"sort"

	"github.com/sleeplock/sleeplock/store"
)

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
