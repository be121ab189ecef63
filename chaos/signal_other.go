//go:build !unix

package chaos

import (
	"errors"
	"os"
)

var errNoPause = errors.New("chaos: pausing a process needs SIGSTOP (unix)")

func stopProcess(*os.Process) error { return errNoPause }
func contProcess(*os.Process) error { return errNoPause }
