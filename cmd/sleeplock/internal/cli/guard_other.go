//go:build !unix

package cli

import (
	"errors"
	"time"
)

// guard is nothing where processes have no groups.
type guard struct{}

// startGuard fails where processes have no groups: a command may outlive
// a sleeplock killed with SIGKILL.
func startGuard(time.Duration) (*guard, error) {
	return nil, errors.New("no process groups to guard")
}

func (g *guard) pgid() int { return 0 }

func (g *guard) done() {}

// endRest does nothing where processes have no groups.
func endRest(int, *guard, time.Duration, func()) {}
