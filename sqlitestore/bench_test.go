package sqlitestore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

// BenchmarkHandoff: two processes take turns on a one-slot lock, each
// holding it for 1ms so that the other is queued; a handoff is the time
// from one's Release to the other's grant (p50 and p99, microseconds).
func BenchmarkHandoff(b *testing.B) {
	path := filepath.Join(b.TempDir(), "locks.db")
	s := openAt(b, path)
	l := sleeplock.New(s)
	defer l.Close()
	if err := l.Define(b.Context(), "h", 1); err != nil {
		b.Fatal(err)
	}
	n := max(b.N, 50)
	var outs []string
	var cmds []*exec.Cmd
	for i := range 2 {
		out := filepath.Join(b.TempDir(), "stamps"+strconv.Itoa(i))
		outs = append(outs, out)
		cmd := exec.Command(os.Args[0], path, "h", strconv.Itoa(n), out)
		cmd.Env = append(os.Environ(), "SQLITESTORE_HELPER=pingpong", "GORACE=atexit_sleep_ms=0")
		cmd.Stderr = os.Stderr
		cmds = append(cmds, cmd)
	}
	b.ResetTimer()
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	type stamp struct {
		at    int64
		proc  int
		grant bool
	}
	var all []stamp
	for i, out := range outs {
		f, err := os.Open(out)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var kind string
			var at int64
			fmt.Sscan(sc.Text(), &kind, &at)
			all = append(all, stamp{at, i, kind == "grant"})
		}
		_ = f.Close()
	}
	slices.SortFunc(all, func(a, b stamp) int { return int(a.at - b.at) })
	var hand []float64
	for i := 1; i < len(all); i++ {
		if all[i].grant && !all[i-1].grant && all[i-1].proc != all[i].proc {
			hand = append(hand, float64(all[i].at-all[i-1].at)/1e3)
		}
	}
	slices.Sort(hand)
	if len(hand) == 0 {
		b.Fatal("no handoffs")
	}
	b.ReportMetric(hand[len(hand)/2], "p50-µs")
	b.ReportMetric(hand[len(hand)*99/100], "p99-µs")
	b.ReportMetric(float64(len(hand)), "handoffs")
}

// pingpong: take and release the lock n times, holding it 1ms, stamping
// each grant and release (ns since the epoch) in out.
func pingpong(path, name string, n int, out string) int {
	ctx := context.Background()
	l, err := openLocks(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	var w strings.Builder
	for range n {
		lease, err := l.Acquire(ctx, name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintf(&w, "grant %d\n", time.Now().UnixNano())
		time.Sleep(time.Millisecond)
		fmt.Fprintf(&w, "release %d\n", time.Now().UnixNano())
		if err := lease.Release(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return writeFile(out, w.String())
}

// BenchmarkKill9Takeover: a process holding a slot (TTL 10 minutes) is
// killed with SIGKILL; the time from the kill to the grant of the waiter
// of this process.
func BenchmarkKill9Takeover(b *testing.B) {
	path := filepath.Join(b.TempDir(), "locks.db")
	l := sleeplock.New(openAt(b, path), sleeplock.WithTTL(10*time.Minute))
	defer l.Close()
	if err := l.Define(b.Context(), "k", 1); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for range b.N {
		h := helper(b, true, "hold", path, "k")
		got := make(chan time.Time, 1)
		go func() {
			lease, err := l.Acquire(b.Context(), "k")
			if err != nil {
				b.Error(err)
			}
			got <- time.Now()
			_ = lease.Release(b.Context())
		}()
		for {
			st, err := l.State(b.Context(), "k")
			if err != nil {
				b.Fatal(err)
			}
			if st.Waiting == 1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		killed := time.Now()
		_ = h.Process.Kill()
		total += (<-got).Sub(killed)
		_ = h.Wait()
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1e3, "ms-to-grant")
}

// BenchmarkPair is an uncontended TryAcquire+Release of a defined lock
// and of a family member (two write transactions each; the counters of
// Stats are one more statement in each).
func BenchmarkPair(b *testing.B) {
	for _, name := range []string{"p", "fam/1"} {
		b.Run(strings.ReplaceAll(name, "/", "-"), func(b *testing.B) {
			s := openAt(b, filepath.Join(b.TempDir(), "locks.db"))
			l := sleeplock.New(s)
			defer l.Close()
			ctx := b.Context()
			if err := l.Define(ctx, "p", 1); err != nil {
				b.Fatal(err)
			}
			if err := l.Define(ctx, "fam/*", 1); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				x, err := l.TryAcquire(ctx, name)
				if err != nil {
					b.Fatal(err)
				}
				if err := x.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
