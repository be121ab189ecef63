package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/election"
)

// elOp is an operation of the election model: campaign, resign or leader,
// by client id.
type elOp struct {
	kind string
	id   string
}

// elOut is its outcome: ok (campaign granted; the case's campaigns wait
// until granted: one that gives up may, on a store that gives back a grant
// made as its context ended, show in Leader for that moment), the token granted, or the
// leader read ("" when vacant).
type elOut struct {
	ok     bool
	token  int64
	leader string
}

// elState is the model's state: the leader ("" when vacant) and the last
// token granted.
type elState struct {
	leader string
	token  int64
}

// electionModel: at most one leader; a campaign is granted only when the
// election is vacant, with a token larger than every earlier one; a
// campaign that gave up changes nothing; a resignation of the leader
// leaves it vacant; Leader reads the leader.
var electionModel = porcupine.Model{
	Init: func() any { return elState{} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(elState), input.(elOp), output.(elOut)
		switch in.kind {
		case "campaign":
			if !out.ok {
				return true, st
			}
			if st.leader != "" || out.token <= st.token {
				return false, st
			}
			return true, elState{leader: in.id, token: out.token}
		case "resign":
			if st.leader != in.id {
				return false, st
			}
			return true, elState{token: st.token}
		default:
			return out.leader == st.leader, st
		}
	},
	DescribeOperation: func(in, out any) string {
		return fmt.Sprintf("%s(%s) -> %+v", in.(elOp).kind, in.(elOp).id, out.(elOut))
	},
}

// A history of campaigns, resignations and Leader reads
// by several candidates, on two nodes where the store is shared, is
// linearizable against electionModel.
var _ = add("Election/Linearizable", func(t *testing.T, e *env) {
	l, s := e.locks(t)
	els := []*election.Election{newElection(t, l, "lin-el")}
	if e.h.Reopen != nil {
		other := sleeplock.New(e.h.Reopen(t, s))
		t.Cleanup(func() { _ = other.Close() })
		els = append(els, newElection(t, other, "lin-el"))
	}
	const clients, rounds = 3, 8
	start := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(c int, in elOp, call time.Duration, out elOut) {
		mu.Lock()
		history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: int64(call), Output: out,
			Return: int64(time.Since(start))})
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for c := range clients {
		el := els[c%len(els)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 31))
			id := fmt.Sprintf("c%d", c)
			for range rounds {
				call := time.Since(start)
				term, err := el.Campaign(ctx(t), election.Candidate{ID: id})
				if err != nil {
					t.Error(err)
					return
				}
				record(c, elOp{"campaign", id}, call, elOut{ok: true, token: term.Token()})
				call = time.Since(start)
				ld, err := el.Leader(ctx(t))
				if err != nil && !errors.Is(err, election.ErrNoLeader) {
					t.Error(err)
					return
				}
				record(c, elOp{"leader", id}, call, elOut{leader: ld.ID})
				if rng.IntN(3) > 0 { // sometimes a second read while leading
					call = time.Since(start)
					ld, err := el.Leader(ctx(t))
					if err != nil {
						t.Error(err)
						return
					}
					record(c, elOp{"leader", id}, call, elOut{leader: ld.ID})
				}
				{
					call = time.Since(start)
					if err := term.Resign(ctx(t)); err != nil {
						t.Error(err)
						return
					}
					record(c, elOp{"resign", id}, call, elOut{})
				}
			}
		}()
	}
	wg.Wait()
	if res := porcupine.CheckOperationsTimeout(electionModel, history, 10*time.Second); res != porcupine.Ok {
		slices.SortFunc(history, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
		for _, op := range history {
			t.Logf("%6d-%6d c%d %s", op.Call/1000, op.Return/1000, op.ClientId, electionModel.DescribeOperation(op.Input, op.Output))
		}
		t.Fatalf("the election's history is not linearizable (%v): %d operations", res, len(history))
	}
})
