package cli

// This file is elect's supervision of its command, kept apart on purpose:
// run's supervision is being rewritten (a reusable supervise function, the
// command never outliving its lease, exit status 122 after a loss); once it
// lands, superviseTerm becomes a call of it and this file goes.

import (
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/sleeplock/sleeplock"
)

// exitLeaderLost is elect's exit status when leadership was lost while
// the command ran (the status run gives a lost lease).
const exitLeaderLost = 122

// leaderKillGrace is how long a command gets between SIGTERM and SIGKILL
// after its term ended.
const leaderKillGrace = time.Second

// termEnd is how a supervised command ended: its state, and why its term
// was lost (nil: it was not).
type termEnd struct {
	state *os.ProcessState
	lost  error
}

// superviseTerm runs cmd, passing it sigs, and ends it (SIGTERM, then
// SIGKILL after leaderKillGrace) when lease ends other than by its
// release.
func superviseTerm(cmd *exec.Cmd, lease sleeplock.Lease, sigs <-chan os.Signal) (termEnd, error) {
	started, waited := startCommand(cmd)
	if err := <-started; err != nil {
		return termEnd{}, err
	}
	done := lease.Done()
	var lost error
	var kill <-chan time.Time
	for {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case <-done:
			done = nil
			lost = lease.Err()
			_ = cmd.Process.Signal(syscall.SIGTERM)
			t := time.NewTimer(leaderKillGrace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			_ = cmd.Process.Kill()
		case <-waited:
			return termEnd{cmd.ProcessState, lost}, nil
		}
	}
}
