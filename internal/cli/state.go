package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sleeplock/sleeplock"
)

var _ = register("state", "show locks: slots, running, waiting and holders", runState)

func runState(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("state", errOut, "[flags] [NAME…]")
	sf := addStoreFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	s, err := sf.open(ctx)
	if err != nil {
		return err
	}
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	var states []sleeplock.State
	if fs.NArg() == 0 {
		if states, err = locks.List(ctx); err != nil {
			return err
		}
	} else {
		for _, name := range fs.Args() {
			st, err := locks.StateDetail(ctx, name)
			if err != nil {
				return err
			}
			states = append(states, st)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(states)
	}
	printStates(out, states)
	return nil
}

func printStates(out io.Writer, states []sleeplock.State) {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tSLOTS\tRUNNING\tWAITING\tHOLDERS")
	for _, st := range states {
		name := st.Name
		var holders []string
		for _, h := range st.Holders {
			s := h.Ref
			if h.Kind != "" {
				s += " (" + h.Kind + ")"
			}
			if !h.Acquired.IsZero() {
				s += " age " + roundDur(st.Now.Sub(h.Acquired))
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
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", name, st.Slots, st.Running, st.Waiting, strings.Join(holders, "; "))
	}
	_ = tw.Flush()
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

var _ = register("release", "release a holder's slot by its ref (operator clean-up)", runRelease)

func runRelease(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("release", errOut, "[flags] NAME…")
	sf := addStoreFlags(fs)
	ref := fs.String("ref", "", "the holder's ref (required)")
	stale := fs.Bool("stale", false, "release only if the holder's lease of the first NAME has expired")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *ref == "" || fs.NArg() == 0 {
		return usagef("give the lock names and --ref REF")
	}
	s, err := sf.open(ctx)
	if err != nil {
		return err
	}
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	if *stale {
		ok, err := locks.ReleaseStale(ctx, *ref, fs.Args(), 0)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%q holds no expired lease of %q: nothing released", *ref, fs.Arg(0))
		}
		fmt.Fprintf(out, "released the stale lease of %q\n", *ref)
		return nil
	}
	lease, err := locks.LeaseOf(*ref, fs.Args())
	if err != nil {
		return err
	}
	if err := lease.Release(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "released %q\n", *ref)
	return nil
}
