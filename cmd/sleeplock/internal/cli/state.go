package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/cmd/sleeplock/internal/lockview"
)

var _ = register("state", "show locks: slots, running, waiting, holders and queue", runState)

func runState(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("state", errOut, "[flags] [NAME…]")
	sf := addStoreFlags(fs, errOut)
	sf.warnings(fs, "quiet: no warnings or notes about the store's configuration (a Redis that keeps nothing on disk, a PostgreSQL schema's table mode) on stderr, only errors")
	asJSON := fs.Bool("json", false, "print JSON: a list of locks, [] for none")
	watch := fs.Bool("watch", false, "redraw every --every until interrupted")
	every := duration(fs, "every", time.Second, "with --watch, the time between redraws")
	stats := fs.Bool("stats", false, "print the counters instead (acquisitions, releases, refusals, expiries, losses, wait and hold times; a family's members folded in)")
	if err := parse(fs, args); err != nil {
		return err
	}
	everySet := false
	fs.Visit(func(f *flag.Flag) { everySet = everySet || f.Name == "every" })
	switch {
	case *every <= 0:
		return usagef("--every must be positive, got %v", *every)
	case everySet && !*watch:
		return usagef("--every is for --watch: give --watch too")
	}
	s, err := sf.open(ctx)
	if err != nil {
		return err
	}
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	names := fs.Args()
	show := showStates
	if *stats {
		show = showStats
	}
	if !*asJSON && !*sf.quiet {
		// Once, on stderr (not at each redraw of --watch): stdout is the
		// table alone.
		if err := noteTablesMode(ctx, s, errOut); err != nil {
			return err
		}
	}
	if !*watch {
		return show(ctx, locks, names, *asJSON, out)
	}
	clear := isTerminal(out)
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for {
		switch {
		case clear:
			fmt.Fprint(out, "\x1b[H\x1b[2J") // home, clear screen
		case !*asJSON: // JSON documents follow each other as a stream
			fmt.Fprintln(out, "--", now())
		}
		if err := show(ctx, locks, names, *asJSON, out); err != nil {
			if ctx.Err() != nil {
				return nil // ended while drawing
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil // the user ended the watch: a success
		case <-tick.C:
		}
	}
}

// showStates prints the states of names, or of every lock when names is
// empty, as a table or as JSON.
func showStates(ctx context.Context, locks *sleeplock.Locks, names []string, asJSON bool, out io.Writer) error {
	var states []sleeplock.State
	var err error
	if len(names) == 0 {
		if states, err = locks.List(ctx); err != nil {
			return err
		}
	} else {
		for _, name := range names {
			st, err := locks.StateDetail(ctx, name)
			if err != nil {
				return lockError(name, err)
			}
			states = append(states, st)
		}
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(lockview.All(states))
	}
	printStates(out, states)
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func printStates(out io.Writer, states []sleeplock.State) {
	if len(states) == 0 {
		fmt.Fprintln(out, `no locks: define one with "sleeplock define NAME SLOTS" or "sleeplock apply FILE"`)
		return
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tSLOTS\tRUNNING\tEXPIRED\tWAITING\tHOLDERS\tQUEUE")
	for _, st := range states {
		var holders []string
		for _, h := range st.Holders {
			s := h.Ref
			if h.Kind != "" {
				s += " (" + h.Kind + ")"
			}
			s += weightText(h.Weight, st.Slots)
			if !h.Acquired.IsZero() {
				s += " age " + roundDur(st.Now.Sub(h.Acquired))
			}
			if kept := h.Kept(); !kept.IsZero() {
				s += ", renewed " + roundDur(st.Now.Sub(kept)) + " ago"
				if h.Late(st.Now) {
					s += " (LATE: owed every " + roundDur(h.Length()/3) + ")"
				}
			}
			if !h.Expires.IsZero() {
				if left := h.Expires.Sub(st.Now); left > 0 {
					s += ", " + roundDur(left) + " left"
				} else {
					s += ", expired"
				}
			}
			holders = append(holders, s)
		}
		var queue []string
		for i, w := range st.Queue {
			s := fmt.Sprintf("%d. %s", i+1, w.Ref)
			if w.Kind != "" {
				s += " (" + w.Kind + ")"
			}
			s += weightText(w.Weight, st.Slots)
			if !w.Since.IsZero() {
				s += " waited " + roundDur(st.Now.Sub(w.Since))
			}
			if len(w.Locks) > 1 {
				s += " for " + strings.Join(w.Locks, "+")
			}
			queue = append(queue, s)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", st.Name, st.Slots, st.Running, st.Expired, st.Waiting, orDash(holders), orDash(queue))
	}
	_ = tw.Flush()
	printElections(out, states)
}

// printElections prints, below the locks, the elections among them
// (lockview.ElectionOf): leader, value, term token, since when, and the
// candidates waiting. Nothing when there is none.
func printElections(out io.Writer, states []sleeplock.State) {
	var tw *tabwriter.Writer
	for _, st := range states {
		el := lockview.ElectionOf(st)
		if el == nil {
			continue
		}
		if tw == nil {
			fmt.Fprintln(out)
			tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ELECTION\tLEADER\tVALUE\tTOKEN\tSINCE\tWAITING")
		}
		if el.Vacant {
			fmt.Fprintf(tw, "%s\t(vacant)\t-\t-\t-\t%d\n", st.Name, el.Waiting)
			continue
		}
		since := "-"
		if el.AgeMS != nil {
			since = roundDur(time.Duration(*el.AgeMS)*time.Millisecond) + " ago"
		}
		value := el.Value
		if value == "" {
			value = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\n", st.Name, el.Leader, value, el.Token, since, el.Waiting)
	}
	if tw != nil {
		_ = tw.Flush()
	}
}

// weightText is how the table shows a holder's or waiter's weight, the
// same for both: " exclusive" when it takes every slot (lockview.Exclusive),
// " weight K" for another weight above 1, else nothing.
func weightText(weight, slots int) string {
	switch {
	case lockview.Exclusive(weight, slots):
		return " exclusive"
	case weight > 1:
		return " weight " + strconv.Itoa(weight)
	}
	return ""
}

func orDash(items []string) string {
	if len(items) == 0 {
		return "-"
	}
	return strings.Join(items, "; ")
}

func roundDur(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

var _ = register("release", "release a holder's slots by its ref (operator clean-up)", runRelease)

// runRelease releases what --ref holds of every NAME, all or nothing: it
// first checks that the ref holds each of them (and, with --stale, that
// its lease of the first has expired) and changes nothing otherwise.
func runRelease(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("release", errOut, "[flags] NAME…")
	sf := addStoreFlags(fs, errOut)
	ref := fs.String("ref", "", "the holder's `REF` (required)")
	stale := fs.Bool("stale", false, "release only if the holder's hold of the first NAME has expired")
	if err := parse(fs, args); err != nil {
		return err
	}
	names := fs.Args()
	if *ref == "" || len(names) == 0 {
		return usagef("give the lock names and --ref REF")
	}
	for i, n := range names {
		if slices.Contains(names[:i], n) {
			return usagef("lock %q is named twice", n)
		}
	}
	s, err := sf.open(ctx)
	if err != nil {
		return err
	}
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	lease, err := locks.LeaseOf(*ref, names) // checks the names; changes nothing
	if err != nil {
		return err
	}
	// All or nothing: refuse unless ref holds every name.
	var missing []string
	for _, n := range names {
		st, err := locks.StateDetail(ctx, n)
		if err != nil {
			return fmt.Errorf("%w: nothing released", lockError(n, err))
		}
		if !slices.ContainsFunc(st.Holders, func(h sleeplock.Holder) bool { return h.Ref == *ref }) {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %q does not hold %s: nothing released", sleeplock.ErrNotHeld, *ref, strings.Join(missing, ", "))
	}
	list := strings.Join(names, ", ")
	if *stale {
		ok, err := locks.ReleaseStale(ctx, *ref, names, 0)
		if err != nil {
			return err
		}
		if !ok {
			msg := fmt.Sprintf("the lease of %q on %s has not expired: nothing released", *ref, names[0])
			if st, err := lease.Status(ctx); err == nil && !st.Expires.IsZero() {
				msg += fmt.Sprintf(" (it expires in %s)", roundDur(st.Expires.Sub(st.Now)))
			} else if err == nil && st.Held {
				msg += " (it never expires)"
			}
			return errors.New(msg)
		}
		fmt.Fprintf(out, "released the stale lease of %q on %s\n", *ref, list)
		return nil
	}
	if err := lease.Release(ctx); err != nil {
		if errors.Is(err, sleeplock.ErrNotHeld) {
			return fmt.Errorf("%q no longer holds some of %s (expired, taken over or released by someone else; an expired lease goes with --stale); see sleeplock state: %w", *ref, list, err)
		}
		return err
	}
	fmt.Fprintf(out, "released %q on %s\n", *ref, list)
	return nil
}
