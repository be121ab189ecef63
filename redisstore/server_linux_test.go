package redisstore_test

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the server die with the test process, should the test
// end without its cleanup (a timeout).
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
