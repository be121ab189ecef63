package turns_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sleeplock/sleeplock/turns"
)

// resource stands for what a turn or a click writes to: a chat's history or
// a user's account. It remembers the highest fencing token it has seen and
// refuses lower ones, and counts its users, which must never exceed one.
type resource struct {
	name    string
	mu      sync.Mutex
	highest int64
	inUse   int
}

func (r *resource) enter(token int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if token <= r.highest {
		return fmt.Errorf("%s: token %d after %d", r.name, token, r.highest)
	}
	r.highest = token
	r.inUse++
	if r.inUse > 1 {
		return fmt.Errorf("%s: %d activities at once", r.name, r.inUse)
	}
	return nil
}

func (r *resource) exit() {
	r.mu.Lock()
	r.inUse--
	r.mu.Unlock()
}

// The checker of the multi-node test catches what it must.
func TestMultiNode_ResourceRefusesLowerTokensAndSecondUser(t *testing.T) {
	r := &resource{name: "r"}
	if err := r.enter(5); err != nil {
		t.Fatal(err)
	}
	if r.enter(6) == nil {
		t.Fatal("two users at once not caught")
	}
	r.exit()
	r.exit()
	if r.enter(3) == nil {
		t.Fatal("a lower token not caught")
	}
}

// Several nodes start turns and clicks for the same users and chats at
// once, for a bounded number of attempts: at no moment do two turns hold
// the same chat, or two activities (turn or click) the same user, as the
// fencing tokens and in-use counts of the resources show.
func TestMultiNode_NoTwoTurnsHoldSameChatNoTwoActivitiesSameUser(t *testing.T) {
	const (
		nodes    = 4
		workers  = 3 // per node
		attempts = 40
		chats    = 3
		users    = 3
		rounds   = 3
	)
	each(t, nodes, func(t *testing.T, c *cluster) {
		chatRes := make([]*resource, chats)
		userRes := make([]*resource, users)
		for i := range chatRes {
			chatRes[i] = &resource{name: "chat " + strconv.Itoa(i)}
		}
		for i := range userRes {
			userRes[i] = &resource{name: "user " + strconv.Itoa(i)}
		}
		var turnsRun, clicksRun, refused atomic.Int64
		var wg sync.WaitGroup
		for n := range nodes {
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx := t.Context()
					tu := c.node(n)
					rng := rand.New(rand.NewPCG(uint64(n), uint64(w)))
					for a := range attempts {
						chat, user := rng.IntN(chats), rng.IntN(users)
						cs, us := strconv.Itoa(chat), strconv.Itoa(user)
						if rng.IntN(4) == 0 {
							click := turns.ClickRef()
							lease, err := tu.AcquireUser(ctx, us, click, ttl, hold)
							if errors.Is(err, turns.ErrTurnInFlight) || errors.Is(err, turns.ErrClickInFlight) {
								refused.Add(1)
								continue
							}
							if err != nil {
								t.Error(err)
								return
							}
							if err := userRes[user].enter(lease.Token()); err != nil {
								t.Error(err)
							}
							userRes[user].exit()
							clicksRun.Add(1)
							if err := tu.ReleaseUser(ctx, us, click); err != nil {
								t.Error(err)
							}
							continue
						}
						ref := fmt.Sprintf("turn-%d-%d-%d", n, w, a)
						lease, err := tu.Acquire(ctx, cs, us, ref)
						if errors.Is(err, turns.ErrConversationBusy) || errors.Is(err, turns.ErrTurnInFlight) ||
							errors.Is(err, turns.ErrClickInFlight) {
							refused.Add(1)
							continue
						}
						if err != nil {
							t.Error(err)
							return
						}
						tokens := lease.Tokens()
						if err := chatRes[chat].enter(tokens[0]); err != nil {
							t.Error(err)
						}
						if err := userRes[user].enter(tokens[1]); err != nil {
							t.Error(err)
						}
						for range rounds {
							held, err := tu.Held(ctx, cs, us, ref)
							if err != nil || !held {
								t.Errorf("turn %s lost its locks mid-turn: %v %v", ref, held, err)
								break
							}
						}
						chatRes[chat].exit()
						userRes[user].exit()
						turnsRun.Add(1)
						if err := tu.Release(ctx, cs, us, ref); err != nil {
							t.Error(err)
						}
					}
				}()
			}
		}
		wg.Wait()
		t.Logf("%d turns, %d clicks, %d refusals", turnsRun.Load(), clicksRun.Load(), refused.Load())
		if turnsRun.Load()+clicksRun.Load() == 0 {
			t.Fatal("nothing ran")
		}
		for i := range chats {
			if h := c.holder("chat/" + strconv.Itoa(i)); h != "" {
				t.Errorf("chat %d still held by %s", i, h)
			}
		}
		for i := range users {
			if h := c.holder("user/" + strconv.Itoa(i)); h != "" {
				t.Errorf("user %d still held by %s", i, h)
			}
		}
	})
}
