package election_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/election"
)

// One leader at a time runs the scheduler; its work ends before it hands
// over, and every write it makes carries its term's fencing token.
func Example() {
	ctx := context.Background()
	locks := sleeplock.New(nil) // the memory store; pgstore or sqlitestore across processes
	defer locks.Close()
	e, err := election.New(locks, "scheduler", election.WithTTL(15*time.Second))
	if err != nil {
		panic(err)
	}

	rctx, stop := context.WithCancel(ctx)
	err = e.Run(rctx, election.Candidate{ID: "host-a", Value: "10.0.0.1:8080"},
		func(ctx context.Context, t *election.Term) error {
			l, _ := e.Leader(ctx)
			fmt.Printf("leading: %s at %s, token %d\n", l.ID, l.Value, t.Token())
			stop() // the work is done for this example: Run resigns and returns
			<-ctx.Done()
			return nil
		})
	fmt.Println(err)
	_, err = e.Leader(ctx)
	fmt.Println(err)
	// Output:
	// leading: host-a at 10.0.0.1:8080, token 1
	// context canceled
	// election: no leader
}

// Observe starts with the current state and reports every change.
func ExampleElection_Observe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	locks := sleeplock.New(nil)
	defer locks.Close()
	e, _ := election.New(locks, "primary")

	events := e.Observe(ctx)
	fmt.Println((<-events).Type)
	term, _ := e.Campaign(ctx, election.Candidate{ID: "db-1", Value: "10.0.0.5:5432"})
	ev := <-events
	fmt.Println(ev.Type, ev.Leader.ID, ev.Leader.Value)
	_ = term.Proclaim(ctx, "10.0.0.6:5432")
	ev = <-events
	fmt.Println(ev.Type, ev.Leader.ID, ev.Leader.Value)
	_ = term.Resign(ctx)
	fmt.Println((<-events).Type)
	// Output:
	// vacant
	// elected db-1 10.0.0.5:5432
	// changed db-1 10.0.0.6:5432
	// vacant
}
