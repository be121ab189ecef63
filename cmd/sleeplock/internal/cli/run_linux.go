package cli

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel send the command SIGKILL when the thread
// that started it (locked by startCommand) ends: when sleeplock dies.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
