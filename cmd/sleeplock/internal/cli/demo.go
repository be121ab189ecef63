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

var _ = register("demo", "the walk-through: tasks share a lock with few slots, in FIFO order", runDemo)

func init() {
	extraHelp["demo"] = `This is the walk-through of ex_sleeplock, the Elixir library of named,
FIFO, counting locks that sleeplock began as a port of (its README shows
the same run): tasks queue for a lock with fewer slots than tasks, each
works about a second while it holds a slot. It uses the memory store and
changes no store.
`
}

// demo is ex_sleeplock's walk-through: tasks queue for a lock with fewer
// slots than tasks, each works about a second while it holds a slot.
//
// Tasks start one at a time: "Queued [i]" is printed once task i has
// joined the lock's queue (or got a slot at once), and only then does task
// i+1 start. So the queue order is the Queued order, and the Lock lines,
// printed from the lock's events in grant order, follow it (FIFO).
func runDemo(ctx context.Context, args []string, out, errOut io.Writer) error {
	cfg, err := parseDemo(args, errOut)
	if err != nil {
		return err
	}
	d := newDemo(cfg, out)
	locks := sleeplock.New(nil, sleeplock.WithNotifier(sleeplock.NotifierFunc(d.notify)))
	defer func() { _ = locks.Close() }()
	d.say("%d tasks take turns on the lock %q, which has %s: at most %d work at once,",
		cfg.tasks, demoLock, slotCount(cfg.slots), min(cfg.slots, cfg.tasks))
	d.say("the others wait in line and get a slot in the order they queued (FIFO).")
	if err := locks.Define(ctx, demoLock, cfg.slots); err != nil {
		return err
	}
	results, err := d.runTasks(ctx, locks)
	if err != nil {
		return err
	}
	st, err := locks.State(ctx, demoLock)
	if err != nil {
		return err
	}
	if cfg.events {
		if err := locks.Close(); err != nil { // delivers every event
			return err
		}
		d.printEvents()
	}
	d.say("Each task returned its number; Execute gave them back in task order:")
	d.say("%v", results)
	d.say("%s: slots %d, running %d, waiting %d", demoLock, st.Slots, st.Running, st.Waiting)
	return nil
}

// The demo's lock, and the prefix of its tasks' refs ("task-3").
const demoLock, demoRefPrefix = "test_sleepwalk", "task-"

// demoConfig is the demo's flags.
type demoConfig struct {
	tasks, slots int
	work, jitter time.Duration
	events       bool
}

func parseDemo(args []string, errOut io.Writer) (demoConfig, error) {
	fs := flags("demo", errOut, "[flags]")
	tasks := fs.Int("tasks", 6, "`N` tasks")
	slots := fs.Int("slots", 2, "`N` slots of the lock")
	work := duration(fs, "work", time.Second, "time each task works while it holds a slot")
	jitter := duration(fs, "jitter", 100*time.Millisecond, "up to this much random extra work per task")
	events := fs.Bool("events", false, "also print the lock's events, in the order the store made them (by Seq)")
	if err := parse(fs, args); err != nil {
		return demoConfig{}, err
	}
	cfg := demoConfig{tasks: *tasks, slots: *slots, work: *work, jitter: *jitter, events: *events}
	switch {
	case fs.NArg() > 0:
		return cfg, usagef("unexpected arguments %q", fs.Args())
	case cfg.tasks < 1 || cfg.tasks > 10000:
		return cfg, usagef("--tasks must be between 1 and 10000, got %d", cfg.tasks)
	case cfg.slots < 1 || cfg.slots > store.MaxSlots:
		return cfg, usagef("--slots must be between 1 and %d, got %d", store.MaxSlots, cfg.slots)
	case cfg.work < 0 || cfg.jitter < 0:
		return cfg, usagef("--work and --jitter must not be negative")
	}
	return cfg, nil
}

// demoRun is one run of the demo. Its lines come from the lock's events,
// which are delivered one at a time in the store's order: "Queued [i]"
// when task i joins the queue (or, for a task that gets a slot at once,
// just before its Lock line), "Lock [i]" when it is granted a slot.
// joined[i] is closed after task i+1's Queued line, locked[i] after its
// Lock line.
type demoRun struct {
	cfg    demoConfig
	out    io.Writer
	mu     sync.Mutex // keeps lines whole
	joined []chan struct{}
	locked []chan struct{}
	// Only the notifier touches these (seen: until the locks are closed).
	queuedSaid []bool
	seen       []sleeplock.Event
}

func newDemo(cfg demoConfig, out io.Writer) *demoRun {
	d := &demoRun{cfg: cfg, out: out, joined: make([]chan struct{}, cfg.tasks),
		locked: make([]chan struct{}, cfg.tasks), queuedSaid: make([]bool, cfg.tasks)}
	for i := range d.joined {
		d.joined[i], d.locked[i] = make(chan struct{}), make(chan struct{})
	}
	return d
}

func (d *demoRun) say(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, format+"\n", args...)
}

// notify prints the Queued and Lock lines from the lock's events.
func (d *demoRun) notify(e sleeplock.Event) {
	if d.cfg.events {
		d.seen = append(d.seen, e)
	}
	if e.Lock != demoLock || (e.Type != sleeplock.EventAcquired && e.Type != sleeplock.EventWaiting) {
		return
	}
	n, err := strconv.Atoi(strings.TrimPrefix(e.Ref, demoRefPrefix))
	if err != nil || n < 1 || n > len(d.joined) {
		return
	}
	if !d.queuedSaid[n-1] {
		d.queuedSaid[n-1] = true
		d.say("Queued  [%d] at: %s.", n, now())
		close(d.joined[n-1])
	}
	if e.Type == sleeplock.EventAcquired {
		d.say("Lock    [%d] at: %s.", n, now())
		close(d.locked[n-1])
	}
}

// runTasks starts the tasks one at a time, each once the one before has
// joined the queue, so that the queue order is the task order, and
// returns their results once all have ended.
func (d *demoRun) runTasks(ctx context.Context, locks *sleeplock.Locks) ([]int, error) {
	results := make([]int, d.cfg.tasks)
	errs := make([]error, d.cfg.tasks)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range d.cfg.tasks {
		done := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done)
			results[i], errs[i] = sleeplock.Execute(ctx, locks, demoLock, func(ctx context.Context) (int, error) {
				return d.work(ctx, i)
			}, sleeplock.Ref(demoRefPrefix+strconv.Itoa(i+1)))
		}()
		select {
		case <-d.joined[i]:
		case <-done: // finished, or failed before it joined
			if errs[i] != nil {
				return nil, errs[i]
			}
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// work is task i's work while it holds a slot: it starts after its Lock
// line is out, lasts the work time plus jitter, and returns the task's
// number.
func (d *demoRun) work(ctx context.Context, i int) (int, error) {
	select {
	case <-d.locked[i]:
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
	t := d.cfg.work
	if d.cfg.jitter > 0 {
		t += rand.N(d.cfg.jitter)
	}
	select {
	case <-time.After(t):
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
	d.say("Release [%d] at: %s.", i+1, now())
	return i + 1, nil
}

// printEvents prints the events seen, in the store's order (Seq): they are
// delivered off the lock path, so arrival order may differ.
func (d *demoRun) printEvents() {
	slices.SortFunc(d.seen, func(a, b sleeplock.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	d.say("The lock's events, in the order the store made them:")
	for _, e := range d.seen {
		d.say("  event %3d %-8s %-8s running %d, waiting %d", e.Seq, e.Type, e.Ref, e.Running, e.Waiting)
	}
}

func now() string { return time.Now().UTC().Format("2006-01-02 15:04:05.000Z") }
