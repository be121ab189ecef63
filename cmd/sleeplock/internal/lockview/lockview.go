// Package lockview is the JSON form of lock states shared by
// `sleeplock state --json` and the HTTP API of `sleeplock serve`, so that
// both print the same document.
package lockview

import (
	"time"

	"github.com/sleeplock/sleeplock/election"
	"github.com/sleeplock/sleeplock/store"
)

// Lock is one lock's state. Lists are never null: an empty list is [].
type Lock struct {
	Name    string   `json:"name"`
	Slots   int      `json:"slots"`
	Family  bool     `json:"family"`
	Running int      `json:"running"` // slots of live holders, each with its weight
	Expired int      `json:"expired"` // slots of holders past their expiry that nobody took over yet
	Leases  int      `json:"leases"`  // holders, live and expired, whatever their weight
	Waiting int      `json:"waiting"`
	Holders []Holder `json:"holders"`
	Queue   []Waiter `json:"queue"`
	Now     string   `json:"now,omitempty"` // the store's clock, RFC 3339 with nanoseconds
	// Election is the election the lock is the lock of (election.StatusOf),
	// absent for another lock.
	Election *Election `json:"election,omitempty"`
}

// Election is an election as its lock's state shows it: who leads, with
// the value it advertises, its term's fencing token and when the term
// began (on the store's clock, AgeMS against the lock's Now), and how many
// candidates wait. Vacant: nobody leads (Leader, Value, Token and Since
// are empty).
type Election struct {
	Vacant  bool   `json:"vacant"`
	Leader  string `json:"leader"` // the leader's candidate ID
	Value   string `json:"value"`
	Token   int64  `json:"token"`
	Since   string `json:"since"`
	AgeMS   *int64 `json:"age_ms"`
	Waiting int    `json:"waiting"`
}

// ElectionOf returns the election view of st, nil when st is not an
// election's lock.
func ElectionOf(st store.State) *Election {
	s, ok := election.StatusOf(st)
	if !ok {
		return nil
	}
	l := s.Leader
	if !s.Leading {
		return &Election{Vacant: true, Waiting: l.Waiting}
	}
	return &Election{Leader: l.ID, Value: l.Value, Token: l.Token, Since: stamp(l.Since), AgeMS: since(st.Now, l.Since), Waiting: l.Waiting}
}

// Holder is one holder of a lock. Times are RFC 3339 with nanoseconds on
// the store's clock, "" when not recorded; AgeMS, LeftMS and KeptMS are
// measured against the lock's Now (LeftMS is null for a lease that never
// expires and negative for one past its expiry). Kept is when the holder
// was taken or last renewed (Renewed is dated back for a hold shorter than
// the TTL; Kept is not), KeptMS how long ago; a holder that lives renews
// every third of its lease (its hold, or TTL), and Late says it missed a
// renewal: more than LateAfterMS (half the lease) passed since Kept
// (store.Holder.Late). Kept, KeptMS and LateAfterMS are ""/null for a
// lease that never expires, which is never late.
type Holder struct {
	Ref    string `json:"ref"`
	Kind   string `json:"kind"`
	Token  int64  `json:"token"`
	Count  int    `json:"count"`
	Weight int    `json:"weight"` // the slots it holds
	// Exclusive: it holds every slot of the lock (Exclusive, or a weight
	// equal to the slots), shown the same way for holders and waiters.
	Exclusive bool   `json:"exclusive"`
	Acquired  string `json:"acquired"`
	Renewed   string `json:"renewed"`
	Expires   string `json:"expires"`
	AgeMS     *int64 `json:"age_ms"`
	LeftMS    *int64 `json:"left_ms"`
	Kept      string `json:"kept"`
	KeptMS    *int64 `json:"kept_ms"`
	LateAfter *int64 `json:"late_after_ms"`
	Late      bool   `json:"late"`
}

// Waiter is one caller in a lock's queue, in queue order.
type Waiter struct {
	Ref      string   `json:"ref"`
	Kind     string   `json:"kind"`
	Since    string   `json:"since"`
	WaitedMS *int64   `json:"waited_ms"`
	Locks    []string `json:"locks"`
	Weight   int      `json:"weight"` // the slots it asks of this lock (its slots for an exclusive waiter)
	// Exclusive: it asks every slot of the lock, as a holder's Exclusive.
	Exclusive bool `json:"exclusive"`
}

// Exclusive reports whether a hold (or request) of weight slots of a
// lock of slots slots takes every slot (store.WeightAll does) of a lock
// of more than one: the one test of "exclusive" for holders and waiters,
// in JSON, table and page. On a lock of one slot every hold is, and none
// is shown so.
func Exclusive(weight, slots int) bool {
	return slots > 1 && (weight == store.WeightAll || weight >= slots)
}

// Of returns the view of st.
func Of(st store.State) Lock {
	v := Lock{
		Name: st.Name, Slots: st.Slots, Family: st.Family, Running: st.Running, Expired: st.Expired, Leases: st.Leases, Waiting: st.Waiting,
		Holders: make([]Holder, 0, len(st.Holders)), Queue: make([]Waiter, 0, len(st.Queue)),
		Now: stamp(st.Now), Election: ElectionOf(st),
	}
	for _, h := range st.Holders {
		hv := Holder{
			Ref: h.Ref, Kind: h.Kind, Token: h.Token, Count: h.Count, Weight: h.Weight, Exclusive: Exclusive(h.Weight, st.Slots),
			Acquired: stamp(h.Acquired), Renewed: stamp(h.Renewed), Expires: stamp(h.Expires),
			AgeMS: since(st.Now, h.Acquired), LeftMS: since(h.Expires, st.Now),
			Kept: stamp(h.Kept()), KeptMS: since(st.Now, h.Kept()), Late: h.Late(st.Now),
		}
		if n := h.LateAfter(); n > 0 {
			ms := n.Milliseconds()
			hv.LateAfter = &ms
		}
		v.Holders = append(v.Holders, hv)
	}
	for _, w := range st.Queue {
		locks := w.Locks
		if locks == nil {
			locks = []string{}
		}
		v.Queue = append(v.Queue, Waiter{Ref: w.Ref, Kind: w.Kind, Since: stamp(w.Since), WaitedMS: since(st.Now, w.Since), Locks: locks,
			Weight: store.Need(w.Weight, st.Slots), Exclusive: Exclusive(w.Weight, st.Slots)})
	}
	return v
}

// All returns the views of states, [] (not null) for none.
func All(states []store.State) []Lock {
	out := make([]Lock, 0, len(states))
	for _, st := range states {
		out = append(out, Of(st))
	}
	return out
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// since returns a-b in milliseconds, nil when either is not recorded.
func since(a, b time.Time) *int64 {
	if a.IsZero() || b.IsZero() {
		return nil
	}
	ms := a.Sub(b).Milliseconds()
	return &ms
}
