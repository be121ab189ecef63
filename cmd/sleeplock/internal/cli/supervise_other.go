//go:build !unix

package cli

import (
	"os"
	"os/exec"
)

// terminal is nothing where processes have no groups.
type terminal struct{}

// prepareGroup does nothing where processes have no groups: the command
// alone is signalled, not its children.
func prepareGroup(*exec.Cmd, *guard) terminal { return terminal{} }

func (terminal) restore() {}

// signalGroup sends sig to process pid.
func signalGroup(pid int, sig os.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	if sig == os.Kill {
		return p.Kill()
	}
	return p.Signal(sig)
}
