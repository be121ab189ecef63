package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sleeplock/sleeplock"
)

// exitLost is the exit status of a supervised command whose lease was lost
// while it ran, whatever the command returned: beside timeout(1)'s 124 to
// 127, where run's other statuses of its own are (not 123, which
// util-linux's flock tests give -E), and never 0 or the busy status
// (--conflict-exit-code cannot be it).
const exitLost = 122

// DefaultGrace is how long before its lease's deadline a supervised
// command gets SIGTERM while renewals fail, unless a third of the lease's
// length is shorter.
const DefaultGrace = 5 * time.Second

// supervision says how supervise guards a command with a lease.
type supervision struct {
	// Lease guards the command: the command is ended before its deadline
	// (sleeplock.Lease.Deadline) while renewals fail, and at once when it
	// is lost.
	Lease sleeplock.Lease
	// Grace is how long before the deadline the command's process group
	// gets SIGTERM; SIGKILL follows a tenth of Grace before the deadline.
	// Zero: DefaultGrace, or a third of the lease's length when shorter.
	Grace time.Duration
	// KeepOnLoss lets the command run on after the lease is lost or its
	// deadline passes (the outcome still reports the loss).
	KeepOnLoss bool
	// KeepOnLossFlag: the caller has a --keep-on-loss flag (run, not
	// elect), which the message of a killed command names.
	KeepOnLossFlag bool
	// FreedAtDeath: the store gives a dead sleeplock's slot back at once
	// (SQLite), so the guard kills the group at once when sleeplock dies:
	// no grace, which the next holder would overlap. Else the group gets
	// SIGTERM, then SIGKILL after the grace, well before the lease's TTL
	// frees the slot.
	FreedAtDeath bool
	// Guard, when not nil, is the guard of the command's group, started
	// before the grant (guardSlot); else supervise starts one.
	Guard *guard
	// Signals are passed on to the command's process group.
	Signals <-chan os.Signal
	// Who prefixes the messages written to ErrOut ("sleeplock run").
	Who    string
	ErrOut io.Writer
}

// supervised is how a supervised command ended.
type supervised struct {
	State *os.ProcessState // nil when the command could not be waited for
	// Lost is why the lease ended while the command ran (nil: it did not).
	Lost error
}

// Status is the exit status to report: exitLost after a loss, else the
// command's own (128+N when signal N ended it).
func (s supervised) Status() int {
	if s.Lost != nil {
		return exitLost
	}
	return exitStatus(s.State)
}

// supervise starts cmd in a process group of its own and waits for it,
// passing it sv.Signals and ending it before sv.Lease can be granted to
// anyone else: while renewals fail, the group gets SIGTERM when the
// lease's deadline is sv.Grace away and SIGKILL when a tenth of it is
// (at once when the deadline is nearer, as after sleeplock itself was
// stopped); a lost lease gets it SIGKILL at once. With sv.KeepOnLoss
// the command is left to run. What the command leaves running in its
// group when it exits gets SIGTERM, then SIGKILL after the grace, before
// supervise returns. A guard process leads the group from before the
// command starts, and ends the group in the same way if sleeplock dies,
// kill -9 included. It returns the start error of a command that could
// not be started.
func supervise(cmd *exec.Cmd, sv supervision) (supervised, error) {
	shareErrOut(cmd, &sv)
	grace := sv.grace()
	deathGrace := grace
	if sv.FreedAtDeath {
		deathGrace = 0
	}
	g := sv.Guard
	if g == nil {
		var gerr error
		if g, gerr = startGuard(deathGrace); gerr != nil {
			noGuard(sv.ErrOut, sv.Who, gerr)
		}
	}
	group := prepareGroup(cmd, g)
	started, waited := startCommand(cmd, g != nil)
	if err := <-started; err != nil {
		g.done()
		return supervised{}, err
	}
	defer group.restore()
	pgid := cmd.Process.Pid
	if g != nil {
		pgid = g.pgid()
	}
	var out supervised
	lost := sv.Lease.Done()
	check := time.NewTimer(0)
	defer check.Stop()
	termed, killed := false, false
	for {
		select {
		case sig := <-sv.Signals:
			_ = signalGroup(pgid, sig)
			continue
		case <-lost:
			lost = nil
			out.Lost = lossOf(sv.Lease)
			fmt.Fprintf(sv.ErrOut, "%s: lost the lease of %q while the command runs: %s\n", sv.Who, sv.Lease.Name(), message(out.Lost))
			if !sv.KeepOnLoss && !killed {
				hint := ""
				if sv.KeepOnLossFlag {
					hint = " (--keep-on-loss lets it run)"
				}
				fmt.Fprintf(sv.ErrOut, "%s: killing the command%s\n", sv.Who, hint)
				_ = signalGroup(pgid, syscall.SIGKILL)
				killed = true
			}
		case <-check.C:
		case werr := <-waited:
			if cmd.ProcessState == nil && werr != nil {
				fmt.Fprintf(sv.ErrOut, "%s: waiting for the command: %v\n", sv.Who, werr)
			}
			out.State = cmd.ProcessState
			endRest(pgid, g, grace, func() {
				fmt.Fprintf(sv.ErrOut, "%s: the command left processes running in its group: ending them (SIGTERM, then SIGKILL after %v)\n", sv.Who, grace)
			})
			if out.Lost == nil && (termed || killed) {
				out.Lost = fmt.Errorf("%w: renewals failed until the command was ended before its deadline", sleeplock.ErrLeaseLost)
			}
			return out, nil
		}
		deadline := sv.Lease.Deadline()
		if deadline.IsZero() || sv.KeepOnLoss || killed {
			continue
		}
		// The timer reads the monotonic clock: after sleeplock was
		// stopped past the deadline it fires at once on resuming.
		switch left := time.Until(deadline); {
		case left <= grace/10:
			fmt.Fprintf(sv.ErrOut, "%s: the lease of %q is about to expire unrenewed: killing the command\n", sv.Who, sv.Lease.Name())
			_ = signalGroup(pgid, syscall.SIGKILL)
			killed = true
		case left <= grace && !termed:
			fmt.Fprintf(sv.ErrOut, "%s: the lease of %q was not renewed and expires in %v: ending the command (SIGTERM, then SIGKILL)\n",
				sv.Who, sv.Lease.Name(), left.Round(time.Millisecond))
			_ = signalGroup(pgid, syscall.SIGTERM)
			termed = true
			check.Reset(left - grace/10)
		case left <= grace:
			check.Reset(left - grace/10)
		default:
			check.Reset(left - grace)
		}
	}
}

// noGuard says that a command runs without a guard.
func noGuard(errOut io.Writer, who string, err error) {
	fmt.Fprintf(errOut, "%s: no guard for the command's process group (%v): if sleeplock is killed, what the command started may outlive it\n", who, err)
}

// guardSlot holds the guard of the command that the next grant is for, on
// a store that gives a dead holder's slot back at once (SQLite): started
// before the grant, its process group is recorded with the hold
// (storeFlags.openGuarded), so that a sleeplock killed with SIGKILL leaves
// the slot taken until the guard has ended the group. Elsewhere the guard
// is started with the command, and the lease's TTL outlasts its grace.
type guardSlot struct{ cur atomic.Pointer[guard] }

// newGuardSlot is a guardSlot when the store frees a dead holder's slot at
// once, else nil.
func newGuardSlot(freedAtDeath bool) *guardSlot {
	if !freedAtDeath {
		return nil
	}
	return &guardSlot{}
}

// pgid is the process group of the guard held now (0: none).
func (gs *guardSlot) pgid() int {
	if g := gs.cur.Load(); g != nil {
		return g.pgid()
	}
	return 0
}

// start starts the guard of the next command (no grace: the slot is free
// once the group is gone) and returns it; nil, after saying so, when it
// cannot, and when gs is nil.
func (gs *guardSlot) start(errOut io.Writer, who string) *guard {
	if gs == nil {
		return nil
	}
	g, err := startGuard(0)
	if err != nil {
		noGuard(errOut, who, err)
	}
	gs.cur.Store(g)
	return g
}

// grace is sv.Grace, or its default for the lease.
func (sv supervision) grace() time.Duration {
	if sv.Grace > 0 {
		return sv.Grace
	}
	return defaultGrace(sv.Lease.Deadline(), time.Now())
}

// defaultGrace is DefaultGrace, or a third of the lease's length (from now
// to its deadline, just after the grant) when shorter.
func defaultGrace(deadline, now time.Time) time.Duration {
	if deadline.IsZero() {
		return DefaultGrace
	}
	return min(DefaultGrace, deadline.Sub(now)/3)
}

// lossOf is why the lease ended while the command ran.
func lossOf(lease sleeplock.Lease) error {
	err := lease.Err()
	if errors.Is(err, sleeplock.ErrReleased) {
		// Through another lease of its ref (--reenter): unguarded all the same.
		return fmt.Errorf("%w: released by another holder of its ref", sleeplock.ErrLeaseLost)
	}
	return err
}

// startCommand starts cmd on a goroutine locked to its OS thread and waits
// for it there. Without a guard the command is told to die with that
// thread (dieWithParent), so that a sleeplock killed with SIGKILL, whose
// slot may be given back at once, does not leave it running unguarded;
// with one, the guard ends it with the rest of its group, after the grace.
func startCommand(cmd *exec.Cmd, guarded bool) (started, waited <-chan error) {
	s, w := make(chan error, 1), make(chan error, 1)
	if !guarded {
		dieWithParent(cmd)
	}
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

// shareErrOut makes supervise's own messages and the command's output
// take turns when they go to one writer that is not a file: os/exec then
// copies the command's output from a goroutine of its own, which would
// write at the same time as supervise. A file is passed to the command as
// it is, and the kernel orders the writes.
func shareErrOut(cmd *exec.Cmd, sv *supervision) {
	if _, isFile := sv.ErrOut.(*os.File); isFile || sv.ErrOut == nil {
		return
	}
	lw := &lockedWriter{w: sv.ErrOut}
	if cmd.Stderr == sv.ErrOut {
		cmd.Stderr = lw
	}
	if cmd.Stdout == sv.ErrOut {
		cmd.Stdout = lw
	}
	sv.ErrOut = lw
}

// lockedWriter serialises the writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
