package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sleeplock/sleeplock"
)

var _ = register("run", "run a command holding a slot of a lock (a counting, FIFO flock)", runRun)

const runSynopsis = "[flags] NAME -- COMMAND [ARGS…]"

// Exit statuses of sleeplock run besides the command's own.
const (
	exitRefused  = 1   // --no-wait and no slot free (unless --conflict-exit-code)
	exitTimeout  = 124 // --wait ran out, as timeout(1)
	exitNoExec   = 126 // the command cannot be run, as shells do
	exitNotFound = 127 // no such command, as shells do
)

// killGrace is how long --kill-on-loss waits after SIGTERM before SIGKILL.
const killGrace = 5 * time.Second

// runSignals are forwarded to the command.
var runSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

type runFlags struct {
	slots      int
	wait       time.Duration
	noWait     bool
	conflict   int
	ttl        time.Duration
	ref, kind  string
	quiet      bool
	killOnLoss bool
}

func runRun(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("run", errOut, runSynopsis)
	sf := addStoreFlags(fs)
	var f runFlags
	fs.IntVar(&f.slots, "slots", 0, "define the lock with `N` slots if it does not exist (an existing lock with other slots is an error)")
	fs.DurationVar(&f.wait, "wait", 0, "give up after waiting this long, exit status 124 (0: wait as long as it takes)")
	fs.BoolVar(&f.noWait, "no-wait", false, "do not wait: exit at once (status 1, or --conflict-exit-code) when no slot is free")
	fs.BoolVar(&f.noWait, "n", false, "short for --no-wait, as flock -n")
	fs.IntVar(&f.conflict, "conflict-exit-code", exitRefused, "exit status when --no-wait is refused, as flock -E")
	fs.DurationVar(&f.ttl, "ttl", sleeplock.DefaultTTL, "lease TTL, renewed while sleeplock runs; bounds a hung sleeplock (a dead one gives its slot back at once)")
	fs.StringVar(&f.ref, "ref", "", "holder ref that others see (default HOST:PID); a ref that holds the lock already re-enters it")
	fs.StringVar(&f.kind, "kind", "", "what the holder is (\"build\", \"deploy\"), shown when others are refused")
	fs.BoolVar(&f.quiet, "q", false, "quiet: print nothing while waiting or when refused")
	fs.BoolVar(&f.killOnLoss, "kill-on-loss", false, "end the command (SIGTERM, SIGKILL 5s later) if the lease is lost")

	name, command, err := parseRunArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case f.slots < 0:
		return usagef("--slots %d: slots must be a positive integer", f.slots)
	case f.wait < 0:
		return usagef("--wait %v: a wait must not be negative", f.wait)
	case f.noWait && f.wait > 0:
		return usagef("--wait and --no-wait exclude each other")
	case f.conflict < 0 || f.conflict > 255:
		return usagef("--conflict-exit-code %d: an exit status is 0 to 255", f.conflict)
	case f.ttl <= 0:
		return usagef("--ttl %v: a TTL must be positive", f.ttl)
	}
	if f.ref == "" {
		host, _ := os.Hostname()
		f.ref = host + ":" + strconv.Itoa(os.Getpid())
	}

	// Catch the signals from the start: one that arrives while waiting ends
	// the wait (nothing held), one that arrives later goes to the command.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, runSignals...)
	defer signal.Stop(sigs)

	s, err := sf.open(ctx)
	if err != nil {
		return err
	}
	locks := sleeplock.New(s, sleeplock.WithTTL(f.ttl))
	defer func() { _ = locks.Close() }()
	if f.slots > 0 {
		if err := locks.Define(ctx, name, f.slots); err != nil {
			return err
		}
	}
	lease, err := acquireForRun(ctx, locks, name, &f, sigs, errOut)
	if err != nil {
		return err
	}
	// From here on the lease is given back whatever happens, also when
	// the caller's context ended (a signal that we forward).
	bg := context.WithoutCancel(ctx)
	release := func() {
		rctx, cancel := context.WithTimeout(bg, 10*time.Second)
		defer cancel()
		_ = lease.Release(rctx)
	}

	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, out, errOut
	cmd.Env = append(os.Environ(),
		"SLEEPLOCK_LOCK="+name,
		"SLEEPLOCK_TOKEN="+strconv.FormatInt(lease.Token(), 10),
		"SLEEPLOCK_REF="+lease.Ref())
	started, waited := startCommand(cmd)
	if err := <-started; err != nil {
		release()
		return startError(command[0], err, errOut)
	}

	lost := lease.Done()
	var kill <-chan time.Time
	for done := false; !done; {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case <-lost:
			lost = nil
			if errors.Is(lease.Err(), sleeplock.ErrReleased) {
				continue
			}
			fmt.Fprintf(errOut, "sleeplock run: lost the lease of %q while the command runs: %v\n", name, lease.Err())
			if f.killOnLoss {
				fmt.Fprintf(errOut, "sleeplock run: ending the command (--kill-on-loss)\n")
				_ = cmd.Process.Signal(syscall.SIGTERM)
				t := time.NewTimer(killGrace)
				defer t.Stop()
				kill = t.C
			}
		case <-kill:
			_ = cmd.Process.Kill()
		case werr := <-waited:
			done = true
			if cmd.ProcessState == nil && werr != nil {
				fmt.Fprintf(errOut, "sleeplock run: waiting for the command: %v\n", werr)
			}
		}
	}
	release()
	if code := exitStatus(cmd.ProcessState); code != 0 {
		return &exitError{code}
	}
	return nil
}

// parseRunArgs parses the flags and returns the lock name and the command.
// Flags may come after NAME when "--" ends them; without "--" the command
// starts right after NAME (as with flock), and its own flags stay its own.
func parseRunArgs(fs *flag.FlagSet, args []string) (string, []string, error) {
	pre, command, dashed := args, []string(nil), false
	for i, a := range args {
		if a == "--" {
			pre, command, dashed = args[:i], args[i+1:], true
			break
		}
	}
	if !dashed {
		if i := firstPositional(fs, args); i >= 0 {
			pre, command = args[:i+1], args[i+1:]
		}
	}
	var pos []string
	for rest := pre; ; {
		if err := parse(fs, rest); err != nil {
			return "", nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	switch {
	case len(pos) == 0:
		return "", nil, usagef("no lock name: sleeplock run %s", runSynopsis)
	case len(pos) > 1:
		return "", nil, usagef("one lock name before \"--\", got %q: sleeplock run %s", pos, runSynopsis)
	case len(command) == 0:
		return "", nil, usagef("no command to run: sleeplock run %s", runSynopsis)
	}
	return pos[0], command, nil
}

// firstPositional returns the index of the first argument that is neither
// a flag of fs nor a flag's value, or -1.
func firstPositional(fs *flag.FlagSet, args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			return i
		}
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // parse reports it
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		i++ // the flag's value
	}
	return -1
}

// acquireForRun takes the slot: at once with --no-wait, else waiting (up
// to --wait) and telling on stderr its place in the queue. A signal while
// waiting ends the wait with status 128+signal.
func acquireForRun(ctx context.Context, locks *sleeplock.Locks, name string, f *runFlags, sigs <-chan os.Signal, errOut io.Writer) (sleeplock.Lease, error) {
	opts := []sleeplock.AcquireOption{sleeplock.WithRef(f.ref), sleeplock.WithKind(f.kind)}
	if f.noWait {
		lease, err := locks.TryAcquire(ctx, name, opts...)
		if errors.Is(err, sleeplock.ErrUnavailable) {
			if !f.quiet {
				fmt.Fprintf(errOut, "sleeplock run: %v\n", err)
			}
			return lease, &exitError{f.conflict}
		}
		return lease, err
	}
	actx, cancel := context.WithCancel(ctx)
	if f.wait > 0 {
		actx, cancel = context.WithTimeout(ctx, f.wait)
	}
	defer cancel()
	caught := make(chan os.Signal, 1)
	stop := make(chan struct{})
	joined := make(chan struct{})
	go func() {
		defer close(joined)
		select {
		case sig := <-sigs:
			caught <- sig
			cancel()
		case <-stop:
		}
	}()
	reported := make(chan struct{})
	if f.quiet {
		close(reported)
	} else {
		go func() {
			defer close(reported)
			reportQueue(actx, locks, name, f.ref, errOut)
		}()
	}
	lease, err := locks.Acquire(actx, name, opts...)
	close(stop)
	<-joined
	cancel()
	<-reported
	if err == nil {
		select {
		case sig := <-caught: // granted as the signal came: give it back
			_ = lease.Release(context.WithoutCancel(ctx))
			return lease, signalExit(sig, name, errOut)
		default:
			return lease, nil
		}
	}
	select {
	case sig := <-caught:
		return lease, signalExit(sig, name, errOut)
	default:
	}
	if ctx.Err() != nil {
		// The caller's context ended: most likely a signal that we were
		// also told of, a moment later.
		select {
		case sig := <-sigs:
			return lease, signalExit(sig, name, errOut)
		case <-time.After(100 * time.Millisecond):
		}
		return lease, ctx.Err()
	}
	if f.wait > 0 && errors.Is(err, context.DeadlineExceeded) {
		if !f.quiet {
			fmt.Fprintf(errOut, "sleeplock run: gave up waiting for %q after %v\n", name, f.wait)
		}
		return lease, &exitError{exitTimeout}
	}
	return lease, err
}

func signalExit(sig os.Signal, name string, errOut io.Writer) error {
	fmt.Fprintf(errOut, "sleeplock run: %v while waiting for %q: nothing held\n", sig, name)
	if s, ok := sig.(syscall.Signal); ok {
		return &exitError{128 + int(s)}
	}
	return &exitError{1}
}

// reportQueue prints the caller's place in the queue of name whenever it
// changes, until ctx ends.
func reportQueue(ctx context.Context, locks *sleeplock.Locks, name, ref string, errOut io.Writer) {
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	last := -1
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := locks.StateDetail(ctx, name)
		if err == nil && ctx.Err() == nil {
			pos := -1
			for i, w := range st.Queue {
				if w.Ref == ref {
					pos = i
					break
				}
			}
			if pos >= 0 && pos != last {
				fmt.Fprintf(errOut, "sleeplock run: waiting for %q (%d slots, %d running): %d ahead of you\n",
					name, st.Slots, st.Running, pos)
				last = pos
			}
		}
		t.Reset(500 * time.Millisecond)
	}
}

// startError reports a command that could not be started with the status
// a shell would give.
func startError(name string, err error, errOut io.Writer) error {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(errOut, "sleeplock run: %s: command not found\n", name)
		return &exitError{exitNotFound}
	default:
		fmt.Fprintf(errOut, "sleeplock run: %s: cannot run: %v\n", name, err)
		return &exitError{exitNoExec}
	}
}

// startCommand starts cmd on a goroutine locked to its OS thread and waits
// for it there: the command is told to die with that thread
// (dieWithParent), so a sleeplock killed with SIGKILL, whose slot is given
// back at once, does not leave its command running unguarded.
func startCommand(cmd *exec.Cmd) (started, waited <-chan error) {
	s, w := make(chan error, 1), make(chan error, 1)
	dieWithParent(cmd)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			s <- err
			return
		}
		s <- nil
		w <- cmd.Wait()
	}()
	return s, w
}

// exitStatus is the command's exit status, 128+signal when a signal ended it.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return 1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
