//go:build !unix

package cli

import "time"

// guard is nothing where processes have no groups.
type guard struct{}

// startGuard starts nothing where processes have no groups: a command may
// outlive a sleeplock killed with SIGKILL, and so may its children.
func startGuard(time.Duration) (*guard, error) { return nil, nil }

func (g *guard) pgid() int { return 0 }

func (g *guard) done() {}

// endRest does nothing where processes have no groups.
func endRest(int, *guard, time.Duration, func()) {}
