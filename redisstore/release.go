package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, h store.Handle, ev store.Emitter) error {
	if err := s.enter(ctx, "Release", &h); err != nil {
		return err
	}
	ref := h.Ref.String()
	var a []any
	if len(h.More) == 0 { // one lock: lua/fast.lua's keys, in one go
		a = append(callOf(fnRelease, 2, 8), s.fastKeys(h.Name)[:]...)
		a = append(a, s.head[:]...)
		a = append(a, ref, "release", 0, 1, h.Name, h.Token, b2i(ev != nil), s.serverNow())
	} else {
		keys, args := s.handleArgs(&h)
		args = append(append(s.withNode(4+len(args)), ref, "release", 0), args...)
		a = fcall(fnRelease, keys, append(args, b2i(ev != nil)))
	}
	r, err := s.runCall(ctx, ev, a)
	if err != nil {
		return err
	}
	if err := r.refusal(); err != nil {
		return err
	}
	switch r.status {
	case "int": // lua/fast.lua's, with no message: end the hold's watchers here
		s.w.Ended(h.Name, "", h.Token, store.ErrReleased)
		return nil
	}
	if missing := list(r.arg(0)); len(missing) > 0 {
		q := make([]string, len(missing))
		for i, m := range missing {
			q[i] = strconv.Quote(str(m))
		}
		return fmt.Errorf("%w: %s", store.ErrNotHeld, strings.Join(q, ", "))
	}
	return nil
}

// ReleaseStale implements store.Store.
func (s *Store) ReleaseStale(ctx context.Context, h store.Handle, staleAfter time.Duration, ev store.Emitter) (bool, error) {
	if err := s.enter(ctx, "ReleaseStale", &h); err != nil {
		return false, err
	}
	keys, args := s.handleArgs(&h)
	r, err := s.run(ctx, fnRelease, ev, keys, append([]any{h.Ref.String(), "stale", micros(staleAfter)}, args...)...)
	if err != nil {
		return false, err
	}
	switch r.status {
	case "notfound":
		return false, store.NotFound(str(r.arg(0)))
	case "no":
		return false, nil
	}
	return true, nil
}
