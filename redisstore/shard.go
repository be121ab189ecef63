package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock/store"
)

var _ store.Sharder = (*Store)(nil)

// shardHint tells how to keep locks in one shard of Redis Cluster.
const shardHint = `on Redis Cluster, the locks of one call must share a root, the name up to its first "/"`

// clustered reports whether c spreads keys over the servers of a Redis
// Cluster.
func clustered(c redis.UniversalClient) bool {
	_, ok := c.(*redis.ClusterClient)
	return ok
}

// dial returns a client of the server of url (options o), or of the whole
// cluster when that server is a node of a Redis Cluster.
func dial(ctx context.Context, url string, o *redis.Options) (redis.UniversalClient, error) {
	probe := *o
	probe.DB = 0 // a cluster node refuses SELECT
	c := redis.NewClient(&probe)
	info, err := c.Info(ctx, "cluster").Result()
	_ = c.Close()
	if err != nil || !strings.Contains(info, "cluster_enabled:1") {
		return redis.NewClient(o), nil // Check reports a server that does not answer
	}
	if o.DB != 0 {
		return nil, store.Invalid(store.ErrInvalidConfig, "Redis URL", fmt.Sprintf("names database %d of a Redis Cluster node (a cluster has database 0 only)", o.DB))
	}
	co, err := redis.ParseClusterURL(url)
	if err != nil {
		return nil, store.Invalid(store.ErrInvalidConfig, "Redis URL", "of a Redis Cluster node cannot be parsed: "+err.Error())
	}
	co.ContextTimeoutEnabled = o.ContextTimeoutEnabled
	return redis.NewClusterClient(co), nil
}

// reroute has a cluster client read which primary serves each slot
// again, in the background, after err, an error of the connection rather
// than an answer of Redis: no MOVED comes from a primary that died, so
// go-redis would send its slots' calls to it until its next periodic
// reload (ClusterStateReloadInterval, 60 s by default), long after a
// replica took its place.
func (s *Store) reroute(err error) {
	var answer redis.Error
	if !s.cluster || err == nil || errors.As(err, &answer) || errors.Is(err, redis.ErrClosed) {
		return
	}
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
}

// Shard implements store.Sharder: on Redis Cluster (a *redis.ClusterClient)
// the shard of a name is its keys' hash tag (KeyTag), its root's; on one
// server, "" for every name.
func (s *Store) Shard(name string) string {
	if s == nil || !s.cluster {
		return ""
	}
	return KeyTag(name)
}

// span returns the *store.ShardError of op on names when the store is on
// Redis Cluster and names are of several roots (whose keys Cluster may
// keep on several servers, and never lets one script reach), else nil. It
// judges by root, not by slot, so that whether a call works never depends
// on how the roots happen to hash.
func (s *Store) span(op string, names []string) error {
	if !s.cluster || len(names) < 2 {
		return nil
	}
	r := root(names[0])
	for _, n := range names[1:] {
		if root(n) != r {
			return &store.ShardError{Op: op, Locks: [2]string{names[0], n},
				Shards: [2]string{KeyTag(names[0]), KeyTag(n)}, Hint: shardHint}
		}
	}
	return nil
}

// enter opens an operation op on a handle: the store is open and ctx
// live, the handle well formed, and (on a Cluster) its locks on one shard.
func (s *Store) enter(ctx context.Context, op string, h *store.Handle) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := checkHandle(h); err != nil {
		return err
	}
	return s.spanHandle(op, h)
}

// spanHandle is span for the locks of a handle.
func (s *Store) spanHandle(op string, h *store.Handle) error {
	if !s.cluster || len(h.More) == 0 {
		return nil
	}
	names := make([]string, 0, 1+len(h.More))
	h.Each(func(l store.Lock) { names = append(names, l.Name) })
	return s.span(op, names)
}

// spanDefs is span for definitions.
func (s *Store) spanDefs(op string, defs []store.Definition) error {
	if !s.cluster || len(defs) < 2 {
		return nil
	}
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	return s.span(op, names)
}

// errPruneSpans refuses a Reconcile with Prune on Redis Cluster: it reads
// the definitions of every root.
var errPruneSpans = &store.ShardError{Op: "Reconcile with Prune",
	Hint: "on Redis Cluster, it would read the definitions of every root in one script; delete locks one by one (Delete)"}

// spanKeys is span for the keys a Guard's Tx writes: on Redis Cluster each
// must carry the hash tag of lock name's root (KeyTag).
func (s *Store) spanKeys(name string, keys []string) error {
	if !s.cluster {
		return nil
	}
	for _, k := range keys {
		if tag := hashTag(k); tag != root(name) {
			return &store.ShardError{Op: "Guard", Locks: [2]string{name, k}, Shards: [2]string{KeyTag(name), "{" + tag + "}"},
				Hint: "on Redis Cluster, a key a Tx writes must carry the lock's KeyTag"}
		}
	}
	return nil
}

// hashTag returns what Redis Cluster hashes of key: the part between its
// first "{" and the next "}" when not empty, else the whole key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// spanRequest is span for the locks of an acquisition.
func (s *Store) spanRequest(req *store.AcquireRequest) error {
	if !s.cluster || len(req.More) == 0 {
		return nil
	}
	return s.span("AcquireAll", req.Names())
}
