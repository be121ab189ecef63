package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/cmd/sleeplock/internal/lockview"
)

// showStats prints the counters of Locks.Stats (every lock and family,
// or those named), as a table or as JSON: the numbers serve's page and
// /metrics show, read from the same call.
func showStats(ctx context.Context, locks *sleeplock.Locks, names []string, asJSON bool, out io.Writer) error {
	all, err := locks.Stats(ctx)
	if err != nil {
		return err
	}
	if len(names) > 0 {
		var some []sleeplock.Stats
		for _, n := range names {
			found := false
			for _, s := range all {
				if s.Name == n {
					some, found = append(some, s), true
				}
			}
			if !found {
				return usagef("no lock or family %q in the stats (a family member is counted under its family)", n)
			}
		}
		all = some
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(lockview.StatsOf(all))
	}
	if len(all) == 0 {
		fmt.Fprintln(out, `no locks: define one with "sleeplock define NAME SLOTS" or "sleeplock apply FILE"`)
		return nil
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tLOCKS\tRUNNING\tWAITING\tACQUIRED\tRELEASED\tREFUSED\tEXPIRED\tLOST\tMEAN WAIT\tMEAN HOLD")
	for _, v := range lockview.StatsOf(all) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", v.Name, v.Locks, v.Running, v.Waiting,
			v.Acquisitions, v.Releases, v.Refusals, v.Expiries, v.Losses, meanMS(v.WaitMS, v.Acquisitions), meanMS(v.HoldMS, v.HoldsTimed))
	}
	return tw.Flush()
}

// meanMS is the mean of n durations of total milliseconds, as a duration
// of 3 significant digits (3s, 1.26s, 45.7ms, 123µs), "-" for none.
func meanMS(total float64, n uint64) string {
	if n == 0 {
		return "-"
	}
	d := time.Duration(math.Round(total / float64(n) * float64(time.Millisecond)))
	unit := time.Duration(1)
	for v := d; v >= 1000; v /= 10 {
		unit *= 10
	}
	return d.Round(unit).String()
}
