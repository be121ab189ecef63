package redisstore

import (
	"context"

	"github.com/sleeplock/sleeplock/store"
)

// Delete implements store.Store in one script (lua/delete.lua), which
// writes nothing when it refuses.
func (s *Store) Delete(ctx context.Context, name string, force bool, ev store.Emitter) (store.Deleted, error) {
	if err := s.check(ctx); err != nil {
		return store.Deleted{}, err
	}
	if err := store.CheckDefinition(name, 1); err != nil {
		return store.Deleted{}, err
	}
	r, err := s.run(ctx, fnDelete, ev, []string{s.rootKey(root(name), "d")}, name, b2i(force))
	if err != nil {
		return store.Deleted{}, err
	}
	switch r.status {
	case "notfound":
		return store.Deleted{}, store.NotDeletable(name)
	case "inuse":
		return store.Deleted{}, &store.InUseError{Lock: str(r.arg(0)), Holders: int(integer(r.arg(1))), Waiters: int(integer(r.arg(2)))}
	}
	return store.Deleted{Holds: int(integer(r.arg(0))), Waiters: int(integer(r.arg(1)))}, nil
}
