//go:build linux

package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CLIConfig is a CLI chaos run (RunCLI): Loops shell loops, each running
// `sleeplock run --ttl TTL --slots Slots` of one lock again and again with
// chaos/runcmd as the command (CLICommand), while a killer sends SIGKILL
// to a random `sleeplock run` every KillMin to KillMax.
type CLIConfig struct {
	// Store and Schema are the --store and --schema of every sleeplock
	// (Schema: none when empty). A PostgreSQL schema must be migrated.
	Store, Schema string
	// SleeplockBin and CommandBin are cmd/sleeplock and chaos/runcmd;
	// built into Dir when empty (BuildCLI builds them once for many runs).
	SleeplockBin, CommandBin string
	// Dir holds the run's markers, ledger and loops' statuses (a
	// temporary directory when empty, removed at the end).
	Dir      string
	Loops    int           // 8
	Slots    int           // 2
	TTL      time.Duration // 2s
	Duration time.Duration // 20s
	KillMin  time.Duration // 100ms
	KillMax  time.Duration // 900ms
	Hold     time.Duration // a command holds up to Hold (300ms)
	// Escape is the negative control: each command's child leaves its
	// process group (setsid) and outlives it, out of run's reach: the run
	// must find more commands inside than slots, and processes left.
	Escape bool
	Log    io.Writer
}

// CLIReport is what a CLI chaos run saw.
type CLIReport struct {
	Runs      int         // commands that entered (ledger "enter" lines)
	Kills     int         // SIGKILLs of a sleeplock run
	MaxInside int         // the most commands inside at once, children included
	Over      int         // entries that counted more than Slots inside
	Statuses  map[int]int // exit statuses of sleeplock run, as the loops saw them
	// Left are the processes (command trees, guards, sleeplocks) alive
	// TTL + 5s after the loops ended: "PID ARGS".
	Left []string
	// SlotsBack: every slot was granted again (run --weight Slots) after
	// the loops ended, within TTL + 5s.
	SlotsBack bool
}

// Write prints the report.
func (r *CLIReport) Write(w io.Writer) {
	fmt.Fprintf(w, "runs %d, kills %d, most inside at once %d (children included), entries over the slots %d\n",
		r.Runs, r.Kills, r.MaxInside, r.Over)
	fmt.Fprintf(w, "sleeplock run exit statuses: %v\n", r.Statuses)
	left := r.Left
	if len(left) > 3 {
		left = append(left[:3:3], "…")
	}
	fmt.Fprintf(w, "processes left: %d %v; every slot back: %v\n", len(r.Left), left, r.SlotsBack)
}

// BuildCLI builds cmd/sleeplock and chaos/runcmd into dir.
func BuildCLI(ctx context.Context, dir string) (sleeplockBin, commandBin string, err error) {
	if sleeplockBin, err = goBuild(ctx, dir, "sleeplock", "github.com/sleeplock/sleeplock/cmd/sleeplock"); err != nil {
		return "", "", err
	}
	commandBin, err = goBuild(ctx, dir, "runcmd", "github.com/sleeplock/sleeplock/chaos/runcmd")
	return sleeplockBin, commandBin, err
}

func (c *CLIConfig) defaults() {
	c.Loops = cmp(c.Loops, 8)
	c.Slots = cmp(c.Slots, 2)
	c.TTL = cmp(c.TTL, 2*time.Second)
	c.Duration = cmp(c.Duration, 20*time.Second)
	c.KillMin = cmp(c.KillMin, 100*time.Millisecond)
	c.KillMax = cmp(c.KillMax, 900*time.Millisecond)
	c.Hold = cmp(c.Hold, 300*time.Millisecond)
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// cmp is v, or def when v is zero.
func cmp[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// RunCLI runs the loops and the killer for Duration, stops the loops,
// and reports what was inside and what is left. Its error is a failure of
// the run itself (a build, a loop that would not stop), not a finding.
func RunCLI(ctx context.Context, cfg CLIConfig) (*CLIReport, error) {
	cfg.defaults()
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "sleeplock-cli-chaos-")
		if err != nil {
			return nil, err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		cfg.Dir = dir
	}
	if cfg.SleeplockBin == "" || cfg.CommandBin == "" {
		var err error
		if cfg.SleeplockBin, cfg.CommandBin, err = BuildCLI(ctx, cfg.Dir); err != nil {
			return nil, err
		}
	}
	store := []string{"--store", cfg.Store}
	if cfg.Schema != "" {
		store = append(store, "--schema", cfg.Schema)
	}
	const lock = "cli-chaos"
	stop := filepath.Join(cfg.Dir, "stop")
	statuses := filepath.Join(cfg.Dir, "statuses")
	runArgs := append(append([]string{cfg.SleeplockBin, "run"}, store...),
		"--ttl", cfg.TTL.String(), "--slots", strconv.Itoa(cfg.Slots), "-q", lock, "--",
		cfg.CommandBin, "-dir", cfg.Dir, "-hold", cfg.Hold.String())
	if cfg.Escape {
		runArgs = append(runArgs, "-escape")
	}
	script := fmt.Sprintf(`while [ ! -e %s ]; do %s; echo $? >> %s; done`, shellQuote(stop), shellJoin(runArgs), shellQuote(statuses))
	loops := make([]*exec.Cmd, cfg.Loops)
	loopPids := map[int]bool{}
	// A file, not a pipe: the loops' Wait must not wait for what holds
	// their stderr (the negative control's escaped children).
	stderr, err := os.Create(filepath.Join(cfg.Dir, "stderr"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = stderr.Close() }()
	for i := range loops {
		loops[i] = exec.Command("sh", "-c", script)
		loops[i].Stderr = stderr
		dieWithDriver(loops[i])
		if err := loops[i].Start(); err != nil {
			return nil, err
		}
		loopPids[loops[i].Process.Pid] = true
	}
	fmt.Fprintf(cfg.Log, "%d loops of: %s\n", cfg.Loops, shellJoin(runArgs))
	rep := &CLIReport{Statuses: map[int]int{}}
	end := time.Now().Add(cfg.Duration)
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			end = time.Now()
			continue
		case <-time.After(cfg.KillMin + rand.N(cfg.KillMax-cfg.KillMin+1)):
		}
		runs := childrenOf(loopPids, cfg.SleeplockBin)
		if len(runs) == 0 {
			continue
		}
		if syscall.Kill(runs[rand.N(len(runs))], syscall.SIGKILL) == nil {
			rep.Kills++
		}
	}
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		return nil, err
	}
	stopped := make(chan error, 1)
	go func() {
		var errs []error
		for _, l := range loops {
			errs = append(errs, l.Wait())
		}
		stopped <- errors.Join(errs...)
	}()
	select {
	case err := <-stopped:
		if err != nil {
			return nil, fmt.Errorf("chaos: a loop failed: %w", err)
		}
	case <-time.After(cfg.TTL + 30*time.Second):
		for _, l := range loops {
			_ = l.Process.Kill()
		}
		err := <-stopped
		return nil, fmt.Errorf("chaos: the loops did not stop within TTL + 30s of being told to (killed: %w)", err)
	}

	bound := time.Now().Add(cfg.TTL + 5*time.Second)
	for {
		rep.Left = processesOf(cfg.SleeplockBin, cfg.CommandBin)
		if len(rep.Left) == 0 || time.Now().After(bound) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	check := exec.CommandContext(ctx, cfg.SleeplockBin, append(append([]string{"run"}, store...),
		"-q", "--wait", max(time.Until(bound), time.Second).Round(time.Millisecond).String(), "--weight", strconv.Itoa(cfg.Slots), lock, "--", "true")...)
	out, err := check.CombinedOutput()
	rep.SlotsBack = err == nil
	if err != nil {
		fmt.Fprintf(cfg.Log, "taking every slot after the run: %v: %s\n", err, out)
	}
	for _, pid := range processIDs(rep.Left) { // leave nothing behind us either
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if b, err := os.ReadFile(stderr.Name()); err == nil && len(b) > 0 {
		fmt.Fprintf(cfg.Log, "the loops' stderr (last lines):\n%s\n", lastLines(b))
	}
	return rep, readCLILedger(cfg, statuses, rep)
}

// readCLILedger fills the report's counts from the ledger and the loops'
// statuses.
func readCLILedger(cfg CLIConfig, statuses string, rep *CLIReport) error {
	b, err := os.ReadFile(filepath.Join(cfg.Dir, "ledger"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for line := range strings.Lines(string(b)) {
		var ev string
		var pid, n int
		if _, err := fmt.Sscan(line, &ev, &pid, &n); err != nil {
			return fmt.Errorf("chaos: ledger line %q: %w", line, err)
		}
		if ev == "enter" {
			rep.Runs++
			rep.MaxInside = max(rep.MaxInside, n)
			if n > cfg.Slots {
				rep.Over++
			}
		}
	}
	b, err = os.ReadFile(statuses)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, f := range strings.Fields(string(b)) {
		code, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("chaos: status %q: %w", f, err)
		}
		rep.Statuses[code]++
	}
	return nil
}

// childrenOf are the live processes of bin whose parent is in parents.
func childrenOf(parents map[int]bool, bin string) []int {
	var pids []int
	for _, p := range procs() {
		if parents[p.ppid] && p.exe == bin {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// processesOf are the live processes of the binaries, as "PID ARGS".
func processesOf(bins ...string) []string {
	var left []string
	for _, p := range procs() {
		if slices.Contains(bins, p.exe) {
			left = append(left, strconv.Itoa(p.pid)+" "+p.args)
		}
	}
	return left
}

// processIDs are the pids of processesOf's lines.
func processIDs(lines []string) []int {
	var pids []int
	for _, l := range lines {
		pid, _, _ := strings.Cut(l, " ")
		if n, err := strconv.Atoi(pid); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// hostProc is a live process (zombies are dead: the container's init may
// never reap them).
type hostProc struct {
	pid, ppid int
	exe, args string // argv[0], and all of argv joined by spaces
}

// procs are the live processes of the host, from /proc.
func procs() []hostProc {
	var out []hostProc
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+1:]))
		if i < 0 || len(f) < 2 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		out = append(out, hostProc{pid: pid, ppid: ppid, exe: argv[0], args: strings.Join(argv, " ")})
	}
	return out
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// shellJoin quotes each of args for sh and joins them.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}
