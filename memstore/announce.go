package memstore

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
	h.More = nil
	o := op{s: s}
	if err := s.enterHandle(ctx, &o, &h); err != nil {
		return err
	}
	defer o.done()
	lk := o.held(h.Name)
	if lk == nil {
		return store.ErrNotHeld
	}
	hd := lk.find(h.Ref, h.Token)
	if hd == nil {
		return store.ErrNotHeld
	}
	hd.ext().kind = kind
	return nil
}

// Announce implements store.Announcer: the listeners of name in this
// process are called before it returns.
func (s *Store) Announce(ctx context.Context, name, msg string) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	s.ann.Send(name, msg)
	return nil
}

// Listen implements store.Announcer.
func (s *Store) Listen(name string, f func(msg string)) (stop func()) {
	if s == nil {
		return func() {}
	}
	return s.ann.Listen(name, f)
}
