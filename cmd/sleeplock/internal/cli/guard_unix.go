//go:build unix

package cli

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// guardArg, as the first argument of the sleeplock binary, makes it the
// guard of a command's process group (startGuard), not a command line.
const guardArg = "--sleeplock-guard-of-a-command"

// guardDone is what a sleeplock that lives tells its guard before it
// closes its end of the pipe: the guard exits and ends nothing.
const guardDone = "done"

// The guard is started as the sleeplock binary (the test binary, in this
// package's tests) with guardArg: it runs before any command line is read,
// and exits at once when done (syscall.Exit: nothing to flush, and no
// exit hooks to wait for, as a -race build's).
func init() {
	if len(os.Args) == 3 && os.Args[1] == guardArg {
		syscall.Exit(guardMain(os.Args[2]))
	}
}

// guard is a process that leads a command's process group and outlives
// sleeplock: when sleeplock dies (kill -9 included) without telling it
// guardDone, it ends the group: SIGTERM, then SIGKILL when the grace it
// was given has passed and anything of the group is left. It ignores the
// signals that the group is sent (forwarded, or ^C at the terminal), but
// not SIGKILL, which ends it with the rest of the group.
type guard struct {
	proc   *exec.Cmd
	orders *os.File // the write end of the pipe that the guard reads
	once   sync.Once
}

// startGuard starts the guard of a command's process group, to give the
// group grace between SIGTERM and SIGKILL when sleeplock dies (none: SIGKILL
// at once). The group is the guard's: the command is to join it (Pgid),
// so that there is no moment at which the command runs unguarded. It
// returns once the guard ignores the group's signals.
func startGuard(grace time.Duration) (*guard, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ordersR, ordersW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		_ = ordersR.Close()
		_ = ordersW.Close()
		return nil, err
	}
	cmd := exec.Command(exe, guardArg, grace.String())
	cmd.ExtraFiles = []*os.File{ordersR, readyW} // its fds 3 and 4
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = ordersR.Close()
	_ = readyW.Close()
	if err != nil {
		_ = readyR.Close()
		_ = ordersW.Close()
		return nil, err
	}
	ready := make([]byte, 1)
	n, _ := readyR.Read(ready)
	_ = readyR.Close()
	if n != 1 {
		_ = ordersW.Close()
		_ = cmd.Wait()
		return nil, errors.New("the guard of the command's process group did not start")
	}
	return &guard{proc: cmd, orders: ordersW}, nil
}

// pgid is the process group that the guard leads.
func (g *guard) pgid() int { return g.proc.Process.Pid }

// done tells the guard that sleeplock lives on and ends the group itself,
// and waits for the guard to exit (at once). Nothing when g is nil, or
// after the first call.
func (g *guard) done() {
	if g == nil {
		return
	}
	g.once.Do(func() {
		_, _ = io.WriteString(g.orders, guardDone) // fails when SIGKILL ended the group, guard included
		_ = g.orders.Close()
		_ = g.proc.Wait()
	})
}

// guardMain is the guard: it leads its process group, and ends it when
// its orders (fd 3) close without guardDone, the other end's sleeplock
// having died. It tells that it is ready on fd 4.
func guardMain(graceText string) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE)
	grace, err := time.ParseDuration(graceText)
	pgid := syscall.Getpgrp()
	if err != nil || pgid != os.Getpid() {
		return 2 // not started by startGuard
	}
	orders, ready := os.NewFile(3, "orders"), os.NewFile(4, "ready")
	if orders == nil || ready == nil {
		return 2
	}
	if _, err := ready.Write([]byte{'+'}); err != nil {
		return 2
	}
	_ = ready.Close()
	got, _ := io.ReadAll(orders)
	if string(got) == guardDone {
		return 0
	}
	endGroup(pgid, grace)
	return 0
}

// endGroup ends the process group pgid that the caller leads: SIGTERM,
// then SIGKILL (the caller's end too) once grace has passed and any other
// process of the group lives; none at all when grace is 0.
func endGroup(pgid int, grace time.Duration) {
	if grace > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for groupAlive(pgid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if groupAlive(pgid) {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// groupAlive reports whether any process of group pgid other than this
// one lives. A zombie does not: it is dead, though in the group until it
// is waited for, which an init that does not reap (in a container) never
// does.
func groupAlive(pgid int) bool {
	return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) && othersInGroup(pgid)
}

// endRest ends what the command left running in its process group pgid
// after it exited: the guard g is let go first, then the rest of the
// group gets SIGTERM and, when grace has passed, SIGKILL. It returns at
// once when nothing is left.
func endRest(pgid int, g *guard, grace time.Duration, warn func()) {
	g.done()
	if !groupAlive(pgid) {
		return
	}
	warn()
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for groupAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !groupAlive(pgid) {
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for end := time.Now().Add(time.Second); groupAlive(pgid) && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
}
