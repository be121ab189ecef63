package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the server die with the process that started it,
// should that one end without stopping it (a test's timeout).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
