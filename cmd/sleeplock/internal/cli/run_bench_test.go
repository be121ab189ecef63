package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// buildSleeplock builds cmd/sleeplock for benchmarks that run it as users
// do (the test binary starts slower).
func buildSleeplock(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "sleeplock")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/sleeplock/sleeplock/cmd/sleeplock").CombinedOutput()
	if err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func timeRun(b *testing.B, name string, args ...string) time.Duration {
	start := time.Now()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		b.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return time.Since(start)
}

// BenchmarkRunVsFlock runs `sleeplock run -n lock -- true` (SQLite store)
// and `flock -n file true` in turns, and reports the wall time of each and
// their ratio.
func BenchmarkRunVsFlock(b *testing.B) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		b.Skip("no flock(1)")
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true(1)")
	}
	bin := buildSleeplock(b)
	dir := b.TempDir()
	st := "sqlite:" + filepath.Join(dir, "locks.db")
	lockFile := filepath.Join(dir, "flock")
	timeRun(b, bin, "run", "--store", st, "--slots", "1", "lock", "--", truePath)
	b.ResetTimer()
	var sl, fl time.Duration
	for range b.N {
		sl += timeRun(b, bin, "run", "--store", st, "-n", "lock", "--", truePath)
		fl += timeRun(b, flock, "-n", lockFile, truePath)
	}
	b.ReportMetric(float64(sl.Microseconds())/float64(b.N), "sleeplock-µs")
	b.ReportMetric(float64(fl.Microseconds())/float64(b.N), "flock-µs")
	b.ReportMetric(float64(sl)/float64(fl), "ratio")
}

// BenchmarkRunSixteenProcesses: 16 processes run `sleeplock run --slots 2
// pool -- true` over and over (b.N runs in all); reports runs per second.
func BenchmarkRunSixteenProcesses(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true(1)")
	}
	bin := buildSleeplock(b)
	st := "sqlite:" + filepath.Join(b.TempDir(), "locks.db")
	timeRun(b, bin, "run", "--store", st, "--slots", "2", "pool", "--", truePath)
	const procs = 16
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < b.N; i += procs {
				cmd := exec.Command(bin, "run", "--store", st, "-q", "--slots", "2", "pool", "--", truePath)
				cmd.Stderr = os.Stderr
				if err := cmd.Run(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "runs/s")
}
