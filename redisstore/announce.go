package redisstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock/store"
)

var (
	_ store.Relabeler = (*Store)(nil)
	_ store.Announcer = (*Store)(nil)
)

// announceChannel is the channel of announcements, shared by every store
// on the prefix: "NAME\nMSG".
func (s *Store) announceChannel() string { return s.cfg.prefix + "announce" }

// Relabel implements store.Relabeler in one script.
func (s *Store) Relabel(ctx context.Context, h store.Handle, kind string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	h.More = nil
	if err := checkHandle(&h); err != nil {
		return err
	}
	r, err := s.run(ctx, fnRelabel, nil, []string{s.lockKey(h.Name)}, h.Ref.String(), kind, h.Name, h.Token)
	if err != nil {
		return err
	}
	return r.refusal()
}

// Announce implements store.Announcer with a PUBLISH on the prefix's
// announcement channel, to which every store on the prefix subscribes. On
// Redis Cluster it is sent to the primary of the lock's slot: Cluster
// relays a PUBLISH to every node, keeping the order of those sent to one
// node only, and a PUBLISH that go-redis sent to any node could overtake
// the one before it (an observer would see a term begin after its end).
func (s *Store) Announce(ctx context.Context, name, msg string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	var c redis.Cmdable = s.c
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		if node, err := cc.MasterForKey(ctx, s.lockKey(name)); err == nil {
			c = node
		}
	}
	if err := c.Publish(ctx, s.announceChannel(), name+"\n"+msg).Err(); err != nil {
		return fmt.Errorf("redisstore: announce: %w", err)
	}
	return nil
}

// Listen implements store.Announcer on the store's subscription; f gets
// an empty message when the subscription comes back after it was lost.
func (s *Store) Listen(name string, f func(msg string)) (stop func()) {
	if s == nil || s.c == nil || f == nil {
		return func() {}
	}
	return s.ann.Listen(name, f)
}

// announced passes an announcement to the listeners of its lock.
func (s *Store) announced(payload string) {
	if name, msg, ok := strings.Cut(payload, "\n"); ok {
		s.ann.Send(name, msg)
	}
}
