//go:build !linux

package cli

import "os/exec"

// dieWithParent does nothing where the kernel cannot tie a child's life to
// its parent's: a command may outlive a sleeplock killed with SIGKILL.
func dieWithParent(*exec.Cmd) {}
