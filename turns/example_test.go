package turns_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/internal/fakeclock"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/turns"
)

// The turn loop of a chat back end running on two nodes: rounds with a
// held-check before each, a confirmation click in the middle, and a node
// that goes down mid-turn. The nodes share one memory store here, whose
// clock the example moves by hand; in production each node opens the same
// PostgreSQL store (package pgstore) and the database's clock rules.
func Example() {
	ctx := context.Background()
	clock := fakeclock.New(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	nodeA := turns.New(sleeplock.New(store)) // turn TTL: turns.DefaultTTL (10 min)
	nodeB := turns.New(sleeplock.New(store))
	if err := nodeA.Define(ctx); err != nil { // chat/* and user/*, one slot each
		panic(err)
	}
	const chat, user, hold = "42", "7", 30 * time.Second

	// Node A runs turn-1 of chat 42 for user 7. It keeps the lease, which
	// it need not: its fencing tokens, the chat's and the user's, guard
	// what the turn writes.
	turn1, err := nodeA.Acquire(ctx, chat, user, "turn-1")
	fmt.Println("turn-1:", err)
	for round := 1; round <= 3; round++ {
		if held, err := nodeA.Held(ctx, chat, user, "turn-1"); err != nil || !held {
			fmt.Println("turn-1 lost its locks: stop")
			break
		}
		fmt.Println("turn-1 round", round)
		if round == 2 {
			// The user clicks a confirmation card; node B serves the click.
			_, err := nodeB.AcquireUser(ctx, user, turns.ClickRef(), turns.DefaultTTL, hold)
			fmt.Println("click during the turn:", err)
		}
	}
	_, err = nodeB.Acquire(ctx, chat, "8", "turn-x")
	fmt.Println("second turn in chat 42:", err)
	_ = nodeA.Release(ctx, chat, user, "turn-1")

	// After the turn the click proceeds, and no turn starts while it runs.
	click := turns.ClickRef()
	_, err = nodeB.AcquireUser(ctx, user, click, turns.DefaultTTL, hold)
	fmt.Println("click after the turn:", err)
	_, err = nodeA.Acquire(ctx, "43", user, "turn-2")
	fmt.Println("turn-2 during the click:", err)
	_ = nodeB.ReleaseUser(ctx, user, click)

	// Node A starts turn-3 and goes down: it never releases.
	_, err = nodeA.Acquire(ctx, chat, user, "turn-3")
	fmt.Println("turn-3:", err)
	gone, _ := nodeB.ReleaseStale(ctx, chat, user, "turn-3", turns.DefaultTTL)
	fmt.Println("clean-up of a fresh turn:", gone)
	clock.Advance(turns.DefaultTTL + time.Second) // ten minutes pass on the store's clock
	fresh, _ := nodeB.Fresh(ctx, chat, "turn-3", turns.DefaultTTL)
	fmt.Println("turn-3 fresh:", fresh)
	gone, _ = nodeB.ReleaseStale(ctx, chat, user, "turn-3", turns.DefaultTTL)
	fmt.Println("clean-up after the TTL:", gone)
	turn4, err := nodeB.Acquire(ctx, chat, user, "turn-4")
	fmt.Println("turn-4:", err)
	// A resource that saw turn-1's tokens accepts turn-4's: they are higher.
	t1, t4 := turn1.Tokens(), turn4.Tokens()
	fmt.Println("turn-4's tokens above turn-1's:", t4[0] > t1[0] && t4[1] > t1[1])
	_ = nodeB.Release(ctx, chat, user, "turn-4")

	// Output:
	// turn-1: <nil>
	// turn-1 round 1
	// turn-1 round 2
	// click during the turn: turns: turn in flight: sleeplock: lock "user/7" unavailable: held by a turn
	// turn-1 round 3
	// second turn in chat 42: turns: conversation busy: sleeplock: lock "chat/42" unavailable: held by a turn
	// click after the turn: <nil>
	// turn-2 during the click: turns: click in flight: sleeplock: lock "user/7" unavailable: held by a click
	// turn-3: <nil>
	// clean-up of a fresh turn: false
	// turn-3 fresh: false
	// clean-up after the TTL: true
	// turn-4: <nil>
	// turn-4's tokens above turn-1's: true
}
