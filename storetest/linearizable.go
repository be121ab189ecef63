package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sleeplock/sleeplock"
)

// linOp is one operation of a history checked for linearizability.
type linOp struct {
	kind   string // "try", "release", "state"
	ref    string
	weight int // try: the slots asked (0: one)
}

type linOut struct {
	ok      bool // try granted, release freed
	running int  // state
}

// slotsModel is the sequential specification of a lock with n slots under
// try (with a weight), release and state: the state is the sorted set of
// holders, each "ref:weight".
func slotsModel(n int) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return "" },
		Step: func(st, in, out any) (bool, any) {
			held := []string{}
			if s := st.(string); s != "" {
				held = strings.Split(s, ",")
			}
			op, res := in.(linOp), out.(linOut)
			used := 0
			i := -1
			for j, h := range held {
				ref, w, _ := strings.Cut(h, ":")
				k, _ := strconv.Atoi(w)
				used += k
				if ref == op.ref {
					i = j
				}
			}
			switch op.kind {
			case "try":
				w := max(op.weight, 1)
				if !res.ok {
					return i < 0 && used+w > n, st
				}
				if i >= 0 || used+w > n {
					return false, st
				}
				held = append(held, op.ref+":"+strconv.Itoa(w))
				slices.Sort(held)
				return true, strings.Join(held, ",")
			case "release":
				if !res.ok {
					return i < 0, st
				}
				if i < 0 {
					return false, st
				}
				return true, strings.Join(slices.Delete(held, i, i+1), ",")
			default:
				return res.running == used, st
			}
		},
		DescribeOperation: func(in, out any) string {
			return fmt.Sprintf("%s(%s, %d) -> %+v", in.(linOp).kind, in.(linOp).ref, in.(linOp).weight, out.(linOut))
		},
	}
}

var _ = add("Linearizable/TryReleaseState", func(t *testing.T, e *env) {
	linearizable(t, e, 2, 1)
})

// With weights 1 to 3 of 4 slots: a try takes its weight or nothing, and
// State's Running is the slots in use.
var _ = add("Linearizable/WeightedTryReleaseState", func(t *testing.T, e *env) {
	linearizable(t, e, 4, 3)
})

// linearizable checks a history of tries (weights 1 to maxWeight),
// releases and states of a lock of slots against slotsModel.
func linearizable(t *testing.T, e *env, slots, maxWeight int) {
	l, _ := e.locks(t)
	if maxWeight > 1 {
		needWeights(t, l)
	}
	const clients, ops = 4, 40
	define(t, l, "lin", slots)
	start := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(client int, in linOp, call time.Duration, out linOut) {
		mu.Lock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: int64(call),
			Output: out, Return: int64(time.Since(start))})
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			var mine []sleeplock.Lease
			for i := range ops {
				switch r := rng.IntN(10); {
				case r < 4:
					ref := fmt.Sprintf("c%d-%d", c, i)
					w := 1 + rng.IntN(maxWeight)
					call := time.Since(start)
					lease, err := l.TryAcquire(ctx(t), "lin", sleeplock.Ref(ref), sleeplock.Weight(w))
					if err != nil && !errors.Is(err, sleeplock.ErrUnavailable) {
						t.Error(err)
						return
					}
					record(c, linOp{"try", ref, w}, call, linOut{ok: err == nil})
					if err == nil {
						mine = append(mine, lease)
					}
				case r < 8 && len(mine) > 0:
					k := rng.IntN(len(mine))
					lease := mine[k]
					if rng.IntN(4) > 0 { // sometimes release twice
						mine = slices.Delete(mine, k, k+1)
					}
					call := time.Since(start)
					err := lease.Release(ctx(t))
					if err != nil && !errors.Is(err, sleeplock.ErrNotHeld) {
						t.Error(err)
						return
					}
					record(c, linOp{kind: "release", ref: lease.Ref()}, call, linOut{ok: err == nil})
				default:
					call := time.Since(start)
					st, err := l.State(ctx(t), "lin")
					if err != nil {
						t.Error(err)
						return
					}
					record(c, linOp{kind: "state"}, call, linOut{running: st.Running})
				}
			}
			for _, lease := range mine {
				call := time.Since(start)
				err := lease.Release(ctx(t))
				record(c, linOp{kind: "release", ref: lease.Ref()}, call, linOut{ok: err == nil})
			}
		}()
	}
	wg.Wait()
	res, _ := porcupine.CheckOperationsVerbose(slotsModel(slots), history, time.Minute)
	if res != porcupine.Ok {
		t.Fatalf("the history of %d operations is not linearizable (%s)", len(history), res)
	}
	wantState(t, l, "lin", 0, 0)
}
