// Command ab compares the working tree with a commit on the benchmarks that
// guard sleeplock's hot paths, in one interleaved run.
//
//	go run ./bench/ab [-n 5] [-cases contended,weighted,pg] [-harness work|own] COMMIT
//
// It checks COMMIT out in a temporary worktree (git worktree add --detach),
// builds the test binaries of ./bench and ./pgstore there and in the working
// tree, and runs the two builds alternately, n rounds, each case of a round
// base-then-work or work-then-base in turn. Every case measures sleeplock
// against its peer in the same binary (x/sync's semaphore, or a bare
// upsert on PostgreSQL), so each run gives a ratio that the machine's load
// mostly cancels; ab prints each run's ratio for both builds and, at the
// end, their medians and the median of the rounds' work/base quotients
// (above 1: the working tree does better). Ratios are all "higher is
// better" (throughput, or the peer's time over sleeplock's).
//
// With -harness work (the default), the working tree's benchmark files are
// copied into the base's tree, so that both builds run the same harness;
// when they do not compile there, the base's own files are used, and ab
// says so. The PostgreSQL cases read SLEEPLOCK_TEST_DATABASE_URL as the
// pgstore tests do.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// abCase is one row: a benchmark run of one package and the ratio read from
// its output.
type abCase struct {
	name      string // row name, printed
	group     string // what -cases selects by
	pkg       string // "bench" or "pgstore"
	bench     string // -test.bench
	benchtime string // -test.benchtime
	// ratio reads the run's ratio (higher is better) from the parsed
	// results, keyed by benchmark name without the GOMAXPROCS suffix.
	ratio func(results) (float64, error)
}

// results maps a benchmark's name to its metrics by unit.
type results map[string]map[string]float64

var cases = []abCase{
	{"g64-slots2 throughput vs x/sync", "contended", "bench", "SideBySide/g64-slots2$", "1x", metric("BenchmarkSideBySide/g64-slots2", "throughput-ratio")},
	{"g1000-slots10 throughput vs x/sync", "contended", "bench", "SideBySide/g1000-slots10$", "1x", metric("BenchmarkSideBySide/g1000-slots10", "throughput-ratio")},
	{"g64-slots2 yielding holders vs x/sync", "queued", "bench", "SideBySide/g64-slots2-yield$", "1x", metric("BenchmarkSideBySide/g64-slots2-yield", "throughput-ratio")},
	{"weighted 64g w1-4 8 slots vs x/sync", "weighted", "bench", "SideBySide/g64-weighted-slots8$", "1x", metric("BenchmarkSideBySide/g64-weighted-slots8", "throughput-ratio")},
	{"uncontended by name, x/sync time / ours", "uncontended", "bench", "SideBySide/uncontended$", "1x", inverse(metric("BenchmarkSideBySide/uncontended", "time-ratio"))},
	{"uncontended handle, x/sync time / ours", "uncontended", "bench", "SideBySide/uncontended-handle$", "1x", inverse(metric("BenchmarkSideBySide/uncontended-handle", "time-ratio"))},
	{"64g over 10,000 locks vs sync.Map", "locks", "bench", "SideBySide/g64-locks10000$", "1x", metric("BenchmarkSideBySide/g64-locks10000", "throughput-ratio")},
	{"pg pair 1 client vs upsert", "pg", "pgstore", "Pairs/durable/clients=1/", "1500x", quotient("BenchmarkPairs/durable/clients=1/upsert", "BenchmarkPairs/durable/clients=1/store")},
	{"pg pair 8 clients vs upsert", "pg", "pgstore", "Pairs/durable/clients=8/", "3000x", quotient("BenchmarkPairs/durable/clients=8/upsert", "BenchmarkPairs/durable/clients=8/store")},
	{"pg refused try 8 clients vs upsert", "pg", "pgstore", "HotLock/clients=8/", "6000x", quotient("BenchmarkHotLock/clients=8/upsert", "BenchmarkHotLock/clients=8/store")},
	{"pg hot lock, grants/s 32 clients ÷ 1 client", "pghot", "pgstore", "Cycle/", "1000x", quotient("BenchmarkCycle/clients=1", "BenchmarkCycle/clients=32")},
	{"pg hand-over to another node, pair time ÷ p50", "pghot", "pgstore", "HandoffTrace$", "200x", ratio("BenchmarkHandoffTrace", "pair-ms", "p50-ms")},
	{"pg 1,000 waiters, drain grants/s ÷ pair rate", "pgdrain", "pgstore", "Waiters1000$", "1x", ratio("BenchmarkWaiters1000", "drain-grants/s", "pair/s")},
}

// ratio is one metric of a benchmark over another of the same run.
func ratio(bench, num, den string) func(results) (float64, error) {
	return func(r results) (float64, error) {
		n, err := metric(bench, num)(r)
		if err != nil {
			return 0, err
		}
		d, err := metric(bench, den)(r)
		return n / d, err
	}
}

// metric reads one reported metric of one benchmark.
func metric(bench, unit string) func(results) (float64, error) {
	return func(r results) (float64, error) {
		v, ok := r[bench][unit]
		if !ok {
			return 0, fmt.Errorf("no %s of %s in the output", unit, bench)
		}
		return v, nil
	}
}

// inverse turns a lower-is-better ratio into a higher-is-better one.
func inverse(f func(results) (float64, error)) func(results) (float64, error) {
	return func(r results) (float64, error) {
		v, err := f(r)
		return 1 / v, err
	}
}

// quotient is peer's ns/op over ours: our throughput relative to the peer's.
func quotient(peer, ours string) func(results) (float64, error) {
	return func(r results) (float64, error) {
		p, err := metric(peer, "ns/op")(r)
		if err != nil {
			return 0, err
		}
		o, err := metric(ours, "ns/op")(r)
		return p / o, err
	}
}

// build is one tree's test binaries, by package.
type build struct {
	label string
	dir   string
	bins  map[string]string
}

func main() {
	n := flag.Int("n", 5, "rounds: runs of each case for each build")
	sel := flag.String("cases", "contended,weighted,uncontended,pg", "groups of cases: contended, weighted, uncontended, locks, queued, pg, pghot, pgdrain")
	harness := flag.String("harness", "work", "benchmark files for the base: work (the working tree's, copied) or own")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: go run ./bench/ab [flags] COMMIT")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || *n < 1 || (*harness != "work" && *harness != "own") {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(context.Background(), flag.Arg(0), *n, *sel, *harness == "work"); err != nil {
		fmt.Fprintln(os.Stderr, "ab:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, commit string, n int, sel string, copyHarness bool) error {
	chosen, pkgs, err := choose(sel)
	if err != nil {
		return err
	}
	root, err := output(ctx, "", "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "sleeplock-ab-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	baseDir := filepath.Join(tmp, "base")
	if _, err := output(ctx, root, "git", "worktree", "add", "--detach", baseDir, commit); err != nil {
		return err
	}
	defer func() { _, _ = output(context.Background(), root, "git", "worktree", "remove", "--force", baseDir) }()
	rev, _ := output(ctx, baseDir, "git", "rev-parse", "--short", "HEAD")
	base := &build{label: "base " + rev, dir: baseDir, bins: map[string]string{}}
	work := &build{label: "work", dir: root, bins: map[string]string{}}
	for _, pkg := range pkgs {
		if err := compile(ctx, work, pkg, tmp); err != nil {
			return err
		}
		if copyHarness {
			if err := copyBenchFiles(root, baseDir, pkg); err != nil {
				return err
			}
		}
		if err := compile(ctx, base, pkg, tmp); err != nil {
			if !copyHarness {
				return err
			}
			fmt.Printf("# %s: the working tree's harness does not build at %s; using its own (%v)\n", pkg, rev, firstLine(err))
			if _, err := output(ctx, baseDir, "git", "checkout", "--", pkg); err != nil {
				return err
			}
			if err := compile(ctx, base, pkg, tmp); err != nil {
				return err
			}
		}
	}
	return rounds(ctx, chosen, n, base, work)
}

// choose returns the cases of the groups named and the packages they need.
func choose(sel string) ([]abCase, []string, error) {
	groups := strings.Split(sel, ",")
	var out []abCase
	var pkgs []string
	for _, c := range cases {
		if slices.Contains(groups, c.group) {
			out = append(out, c)
			if !slices.Contains(pkgs, c.pkg) {
				pkgs = append(pkgs, c.pkg)
			}
		}
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("no case in %q", sel)
	}
	return out, pkgs, nil
}

// copyBenchFiles copies pkg's benchmark files from the working tree into the
// base's tree: every _test.go file of bench, pgstore's *bench_test.go.
func copyBenchFiles(root, baseDir, pkg string) error {
	pattern := "*_test.go"
	if pkg != "bench" {
		pattern = "*bench_test.go"
	}
	files, err := filepath.Glob(filepath.Join(root, pkg, pattern))
	if err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(baseDir, pkg, filepath.Base(f)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func compile(ctx context.Context, b *build, pkg, tmp string) error {
	bin := filepath.Join(tmp, strings.ReplaceAll(b.label, " ", "-")+"-"+pkg+".test")
	if _, err := output(ctx, filepath.Join(b.dir, pkg), "go", "test", "-c", "-o", bin, "."); err != nil {
		return fmt.Errorf("%s: %w", b.label, err)
	}
	b.bins[pkg] = bin
	return nil
}

// rounds runs every case n times for each build, alternating which build
// goes first, and prints each run's ratios and then the medians.
func rounds(ctx context.Context, chosen []abCase, n int, base, work *build) error {
	ratios := make([][3][]float64, len(chosen)) // base, work, work/base
	fmt.Printf("# %d rounds; base = %s, work = %s\n", n, base.label, work.dir)
	for r := range n {
		fmt.Printf("# round %d, load %s\n", r+1, load())
		for i, c := range chosen {
			order := []*build{base, work}
			if r%2 == 1 {
				order = []*build{work, base}
			}
			got := map[*build]float64{}
			for _, b := range order {
				v, err := once(ctx, b, c)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", b.label, c.name, err)
				}
				got[b] = v
			}
			ratios[i][0] = append(ratios[i][0], got[base])
			ratios[i][1] = append(ratios[i][1], got[work])
			ratios[i][2] = append(ratios[i][2], got[work]/got[base])
			fmt.Printf("%-40s base %6.3f  work %6.3f  work/base %6.3f\n", c.name, got[base], got[work], got[work]/got[base])
		}
	}
	fmt.Printf("# medians of %d rounds (higher is better), load %s\n", n, load())
	fmt.Printf("%-40s %8s %8s %10s\n", "case", "base", "work", "work/base")
	for i, c := range chosen {
		fmt.Printf("%-40s %8.3f %8.3f %10.3f\n", c.name, median(ratios[i][0]), median(ratios[i][1]), median(ratios[i][2]))
	}
	return nil
}

// once runs one case on one build and reads its ratio.
func once(ctx context.Context, b *build, c abCase) (float64, error) {
	dir := filepath.Join(b.dir, c.pkg)
	out, err := output(ctx, dir, b.bins[c.pkg], "-test.run", "^$", "-test.bench", c.bench, "-test.benchtime", c.benchtime)
	if err != nil {
		return 0, err
	}
	r := parse(strings.NewReader(out))
	if len(r) == 0 {
		return 0, errors.New("no benchmark ran: " + firstLine(errors.New(out)))
	}
	v, err := c.ratio(r)
	if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
		err = fmt.Errorf("ratio %v", v)
	}
	return v, err
}

// parse reads `go test -bench` output lines: a name, an iteration count,
// then value-unit pairs.
func parse(r io.Reader) results {
	out := results{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		m := map[string]float64{}
		for j := 2; j+1 < len(f); j += 2 {
			if v, err := strconv.ParseFloat(f[j], 64); err == nil {
				m[f[j+1]] = v
			}
		}
		out[name] = m
	}
	return out
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// load is the machine's load averages, as uptime gives them.
func load() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// output runs a command in dir and returns its trimmed standard output, or
// an error with its output.
func output(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return strings.TrimSpace(out.String()), nil
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
