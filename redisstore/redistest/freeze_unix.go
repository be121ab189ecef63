//go:build unix

package redistest

import (
	"errors"
	"syscall"
)

// Freeze stops the server with SIGSTOP: it keeps its connections and its
// port but answers nothing, as a server whose host hangs. Thaw, Stop or
// the test's end lets it go.
func (s *Server) Freeze() error { return s.signal(syscall.SIGSTOP) }

// Thaw lets a frozen server run again (SIGCONT).
func (s *Server) Thaw() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("redistest: the server is stopped")
	}
	return s.cmd.Process.Signal(sig)
}
