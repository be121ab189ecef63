package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

type jsonHolder struct {
	Ref      string `json:"ref"`
	Kind     string `json:"kind"`
	Token    int64  `json:"token"`
	Count    int    `json:"count"`
	Weight   int    `json:"weight"`
	Acquired int64  `json:"acquired"`
	Renewed  int64  `json:"renewed"`
	Expires  int64  `json:"expires"`
	Hold     int64  `json:"hold"` // µs, 0: none
}

type jsonWaiter struct {
	Ref    string   `json:"ref"`
	Kind   string   `json:"kind"`
	Since  int64    `json:"since"`
	Locks  []string `json:"locks"`
	Weight int      `json:"weight"`
}

func (s *Store) states(ctx context.Context, names any, detail bool) ([]store.State, error) {
	var out []store.State
	err := s.c.query(ctx, s.q.states, []any{names, detail}, func(scan func(...any) error) error {
		var st store.State
		var slots, running, expired, waiting, leases int32
		var now int64
		var holders, queue string
		if err := scan(&st.Name, &slots, &st.Family, &running, &expired, &waiting, &now, &holders, &queue, &leases); err != nil {
			return err
		}
		st.Slots, st.Running, st.Expired, st.Waiting, st.Now = int(slots), int(running), int(expired), int(waiting), fromMicros(now)
		st.Leases = int(leases)
		if holders != "" {
			var hs []jsonHolder
			if err := json.Unmarshal([]byte(holders), &hs); err != nil {
				return err
			}
			for _, h := range hs {
				st.Holders = append(st.Holders, store.Holder{Ref: h.Ref, Kind: h.Kind, Token: h.Token, Count: h.Count, Weight: h.Weight,
					Acquired: fromMicros(h.Acquired), Renewed: fromMicros(h.Renewed), Expires: fromMicros(h.Expires),
					Hold: time.Duration(h.Hold) * time.Microsecond})
			}
		}
		if queue != "" {
			var ws []jsonWaiter
			if err := json.Unmarshal([]byte(queue), &ws); err != nil {
				return err
			}
			for _, w := range ws {
				st.Queue = append(st.Queue, store.Waiter{Ref: w.Ref, Kind: w.Kind, Since: fromMicros(w.Since), Locks: w.Locks, Weight: w.Weight})
			}
		}
		out = append(out, st)
		return nil
	})
	return out, err
}

// State implements store.Store in one statement.
func (s *Store) State(ctx context.Context, name string, detail bool) (store.State, error) {
	if err := s.check(ctx); err != nil {
		return store.State{}, err
	}
	sts, err := s.states(ctx, name, detail)
	if err != nil {
		return store.State{}, fmt.Errorf("pgstore: state of %q: %w", name, err)
	}
	if len(sts) == 0 {
		return store.State{}, store.NotFound(name)
	}
	return sts[0], nil
}

// List implements store.Store in one statement.
func (s *Store) List(ctx context.Context, detail bool) ([]store.State, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	sts, err := s.states(ctx, nil, detail)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list: %w", err)
	}
	sort.Slice(sts, func(i, j int) bool { return sts[i].Name < sts[j].Name })
	return sts, nil
}
