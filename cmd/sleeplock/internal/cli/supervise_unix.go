//go:build unix

package cli

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"unsafe"
)

// terminal is the controlling terminal a command's group was put in the
// foreground of, to be given back to sleeplock's group when it ends.
type terminal struct {
	fd   int // -1: none
	pgrp int
}

// prepareGroup puts cmd in a process group of its own, so that the whole
// of it (a shell and its children) can be ended: the group that g leads,
// or else one that cmd leads. When sleeplock
// is in the foreground of the terminal on its standard input, the group
// takes the foreground in its place, as a shell puts a job there: it
// reads the terminal and gets ^C itself; restore gives the terminal back.
func prepareGroup(cmd *exec.Cmd, g *guard) terminal {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if g != nil {
		cmd.SysProcAttr.Pgid = g.pgid()
	}
	fd := int(os.Stdin.Fd())
	own := syscall.Getpgrp()
	if fg, err := foreground(fd); err == nil && fg == own && cmd.Stdin == os.Stdin {
		cmd.SysProcAttr.Foreground = true
		cmd.SysProcAttr.Ctty = fd
		return terminal{fd: fd, pgrp: own}
	}
	return terminal{fd: -1}
}

// restore puts sleeplock's group back in the foreground of the terminal.
// A background group that sets it is sent SIGTTOU, ignored meanwhile.
func (t terminal) restore() {
	if t.fd < 0 {
		return
	}
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	pgrp := int32(t.pgrp)
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, uintptr(t.fd), uintptr(syscall.TIOCSPGRP), uintptr(unsafe.Pointer(&pgrp)))
}

// foreground is the foreground process group of the terminal fd (an error
// when fd is not a terminal).
func foreground(fd int) (int, error) {
	var pgrp int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp))); e != 0 {
		return 0, e
	}
	return int(pgrp), nil
}

// signalGroup sends sig to the process group that pid leads.
func signalGroup(pid int, sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return syscall.EINVAL
	}
	return syscall.Kill(-pid, s)
}
