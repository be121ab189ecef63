package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/store"
)

var _ = register("demo", "run ex_sleeplock's walk-through: tasks share a lock with few slots", runDemo)

// demo is ex_sleeplock's walk-through: tasks queue for a lock with fewer
// slots than tasks, each works about a second while it holds a slot.
//
// Tasks start one at a time: "Queued [i]" is printed once task i has
// joined the lock's queue (or got a slot at once), and only then does task
// i+1 start. So the queue order is the Queued order, and the Lock lines,
// printed from the lock's events in grant order, follow it (FIFO).
func runDemo(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("demo", errOut, "[flags]")
	tasks := fs.Int("tasks", 6, "number of tasks")
	slots := fs.Int("slots", 2, "slots of the lock")
	work := fs.Duration("work", time.Second, "time each task works while it holds a slot")
	jitter := fs.Duration("jitter", 100*time.Millisecond, "up to this much random extra work per task")
	events := fs.Bool("events", false, "also print the lock's events, in the order the store made them (by Seq)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	switch {
	case *tasks < 1 || *tasks > 10000:
		return usagef("--tasks must be between 1 and 10000, got %d", *tasks)
	case *slots < 1 || *slots > store.MaxSlots:
		return usagef("--slots must be between 1 and %d, got %d", store.MaxSlots, *slots)
	case *work < 0 || *jitter < 0:
		return usagef("--work and --jitter must not be negative")
	}
	var mu sync.Mutex // keeps lines whole
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}
	const name, refPrefix = "test_sleepwalk", "task-"
	// The lines come from the lock's events, which are delivered one at a
	// time in the store's order: "Queued [i]" when task i joins the queue
	// (or, for a task that gets a slot at once, just before its Lock line),
	// "Lock [i]" when it is granted a slot. joined[i] is closed after
	// task i+1's Queued line, locked[i] after its Lock line.
	joined := make([]chan struct{}, *tasks)
	locked := make([]chan struct{}, *tasks)
	for i := range joined {
		joined[i], locked[i] = make(chan struct{}), make(chan struct{})
	}
	queuedSaid := make([]bool, *tasks) // only the notifier touches it
	var seen []sleeplock.Event         // with -events; only the notifier touches it until wg.Wait
	notifier := sleeplock.NotifierFunc(func(e sleeplock.Event) {
		if *events {
			seen = append(seen, e)
		}
		if e.Lock != name || (e.Type != sleeplock.EventAcquired && e.Type != sleeplock.EventWaiting) {
			return
		}
		n, err := strconv.Atoi(strings.TrimPrefix(e.Ref, refPrefix))
		if err != nil || n < 1 || n > len(joined) {
			return
		}
		if !queuedSaid[n-1] {
			queuedSaid[n-1] = true
			say("Queued  [%d] at: %s.", n, now())
			close(joined[n-1])
		}
		if e.Type == sleeplock.EventAcquired {
			say("Lock    [%d] at: %s.", n, now())
			close(locked[n-1])
		}
	})
	locks := sleeplock.New(nil, sleeplock.WithNotifier(notifier))
	defer func() { _ = locks.Close() }()
	say("%d tasks take turns on the lock %q, which has %s: at most %d work at once,",
		*tasks, name, slotCount(*slots), min(*slots, *tasks))
	say("the others wait in line and get a slot in the order they queued (FIFO).")
	if err := locks.Define(ctx, name, *slots); err != nil {
		return err
	}
	results := make([]int, *tasks)
	errs := make([]error, *tasks)
	var wg sync.WaitGroup
	defer wg.Wait()
	// Start the tasks one at a time, each once the one before has joined
	// the queue: the queue order is the task order.
	for i := range *tasks {
		idx := i + 1
		done := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done)
			results[i], errs[i] = sleeplock.Execute(ctx, locks, name, func(ctx context.Context) (int, error) {
				select { // work after the Lock line is out
				case <-locked[i]:
				case <-ctx.Done():
					return 0, context.Cause(ctx)
				}
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
			}, sleeplock.Ref(refPrefix+strconv.Itoa(idx)))
		}()
		select {
		case <-joined[i]:
		case <-done: // finished, or failed before it joined
			if errs[i] != nil {
				return errs[i]
			}
		case <-ctx.Done():
			return context.Cause(ctx)
		}
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
	if *events {
		if err := locks.Close(); err != nil { // delivers every event
			return err
		}
		// Events are delivered off the lock path; Seq is the store's order.
		slices.SortFunc(seen, func(a, b sleeplock.Event) int { return cmp.Compare(a.Seq, b.Seq) })
		say("The lock's events, in the order the store made them:")
		for _, e := range seen {
			say("  event %3d %-8s %-8s running %d, waiting %d", e.Seq, e.Type, e.Ref, e.Running, e.Waiting)
		}
	}
	say("Each task returned its number; Execute gave them back in task order:")
	say("%v", results)
	say("%s: slots %d, running %d, waiting %d", name, st.Slots, st.Running, st.Waiting)
	return nil
}

func now() string { return time.Now().UTC().Format("2006-01-02 15:04:05.000Z") }
