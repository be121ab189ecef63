package cli

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sleeplock/sleeplock"
)

var _ = register("demo", "run ex_sleeplock's walk-through: tasks share a lock with few slots", runDemo)

// demo is ex_sleeplock's walk-through: tasks queue for a lock with fewer
// slots than tasks, each works about a second while it holds a slot.
func runDemo(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("demo", errOut, "[flags]")
	tasks := fs.Int("tasks", 6, "number of tasks")
	slots := fs.Int("slots", 2, "slots of the lock")
	work := fs.Duration("work", time.Second, "time each task works while it holds a slot")
	jitter := fs.Duration("jitter", 100*time.Millisecond, "up to this much random extra work per task")
	events := fs.Bool("events", false, "also print the lock's events")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	if *tasks < 1 || *tasks > 10000 {
		return usagef("-tasks must be between 1 and 10000, got %d", *tasks)
	}
	if *work < 0 || *jitter < 0 {
		return usagef("-work and -jitter must not be negative")
	}
	var mu sync.Mutex // keeps lines whole
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}
	var opts []sleeplock.Option
	if *events {
		opts = append(opts, sleeplock.WithNotifier(sleeplock.NotifierFunc(func(e sleeplock.Event) {
			say("  event %-8s running %d, waiting %d", e.Type, e.Running, e.Waiting)
		})))
	}
	locks := sleeplock.New(nil, opts...)
	defer func() { _ = locks.Close() }()
	const name = "test_sleepwalk"
	if err := locks.Define(ctx, name, *slots); err != nil {
		return err
	}
	results := make([]int, *tasks)
	errs := make([]error, *tasks)
	var wg sync.WaitGroup
	for i := range *tasks {
		idx := i + 1
		say("Queued  [%d] at: %s.", idx, now())
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = sleeplock.Execute(ctx, locks, name, func(ctx context.Context) (int, error) {
				say("Lock    [%d] at: %s.", idx, now())
				d := *work
				if *jitter > 0 {
					d += rand.N(*jitter)
				}
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return 0, context.Cause(ctx)
				}
				say("Release [%d] at: %s.", idx, now())
				return idx, nil
			})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	st, err := locks.State(ctx, name)
	if err != nil {
		return err
	}
	say("%v", results)
	say("%s: slots %d, running %d, waiting %d", name, st.Slots, st.Running, st.Waiting)
	return nil
}

func now() string { return time.Now().UTC().Format("2006-01-02 15:04:05.000Z") }
