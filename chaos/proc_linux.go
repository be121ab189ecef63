package chaos

import (
	"os/exec"
	"syscall"
)

// dieWithDriver makes the worker get SIGKILL if the driver dies first, so
// that an interrupted run leaves no worker behind.
func dieWithDriver(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
