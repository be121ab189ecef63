package sqlitestore

import (
	"context"

	"github.com/sleeplock/sleeplock/store"
)

var (
	_ store.Relabeler = (*Store)(nil)
	_ store.Announcer = (*Store)(nil)
)

// Relabel implements store.Relabeler.
func (s *Store) Relabel(ctx context.Context, h store.Handle, kind string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	h.More = nil
	return s.do(ctx, func(t *txn) error {
		l, i, err := t.first(&h, nil)
		if err != nil {
			return err
		}
		if i < 0 {
			return store.ErrNotHeld
		}
		l.holders[i].kind = kind
		return t.exec("UPDATE holders SET kind = ? WHERE lock = ? AND ref = ?", kind, l.name, l.holders[i].ref)
	})
}

// Announce implements store.Announcer. A SQLite file carries no messages:
// it sends nothing, and listeners learn of the change itself (Listen).
func (s *Store) Announce(ctx context.Context, name, msg string) error {
	return s.check(ctx)
}

// Listen implements store.Announcer with the change watch that wakes
// waiters (PRAGMA data_version, read every few milliseconds while anyone
// listens): f gets an empty message after every change of the file, made
// by this process or another, whatever lock it changed.
func (s *Store) Listen(name string, f func(msg string)) (stop func()) {
	if s == nil || s.db == nil || f == nil {
		return func() {}
	}
	s.bmu.Lock()
	if s.shut {
		s.bmu.Unlock()
		return func() {}
	}
	s.listenWG.Add(1)
	s.bmu.Unlock()
	s.nlisten.Add(1)
	s.addWaiter()
	done, exited := make(chan struct{}), make(chan struct{})
	ch := s.changes()
	go func() {
		defer s.listenWG.Done()
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case <-s.closing:
				return
			case <-ch:
				ch = s.changes()
				f("")
			}
		}
	}()
	var stopped bool
	return func() {
		s.bmu.Lock()
		was := stopped
		stopped = true
		s.bmu.Unlock()
		if was {
			return
		}
		close(done)
		<-exited
		s.nlisten.Add(-1)
		s.removeWaiter()
	}
}
