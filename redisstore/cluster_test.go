package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/redisstore"
	"github.com/sleeplock/sleeplock/redisstore/redistest"
	"github.com/sleeplock/sleeplock/store"
	"github.com/sleeplock/sleeplock/storetest"
)

// TestCluster runs the store on a Redis Cluster of the test's own (three
// primaries, no replicas) through a *redis.ClusterClient: the whole
// conformance suite, then what only a cluster shows.
func TestCluster(t *testing.T) {
	rc := redistest.StartCluster(t, 0, 0, 0)
	t.Run("Conformance", func(t *testing.T) { clusterConformance(t, rc) })
	t.Run("CheckEveryPrimary", func(t *testing.T) { clusterCheck(t, rc) })
	t.Run("WakeUpsAcrossNodes", func(t *testing.T) { clusterWakeUps(t, rc) })
	t.Run("ReshardToNodeWithoutLibrary", func(t *testing.T) { clusterReshard(t, rc) })
	t.Run("OpenANode", func(t *testing.T) { clusterOpen(t, rc) })
	t.Run("GuardKeys", func(t *testing.T) { clusterGuardKeys(t, rc) })
}

// clusterClient returns a client of rc, closed after the test.
func clusterClient(t *testing.T, rc *redistest.Cluster) *redis.ClusterClient {
	c := rc.Client()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// openCluster returns a store of prefix on c, closed after the test.
func openCluster(t *testing.T, c *redis.ClusterClient, prefix string, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(context.Background(), c, append([]redisstore.Option{redisstore.WithPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// clusterConformance runs the conformance suite on rc, each test with a
// key prefix of its own, another node with a client of its own.
func clusterConformance(t *testing.T, rc *redistest.Cluster) {
	clusterConformanceOf(t, rc, func(t *testing.T, c *redis.ClusterClient, prefix string) *redisstore.Store {
		return openCluster(t, c, prefix)
	})
}

// clusterConformanceOf runs the conformance suite on rc with the stores
// that open makes.
func clusterConformanceOf(t *testing.T, rc *redistest.Cluster, open func(*testing.T, *redis.ClusterClient, string) *redisstore.Store) {
	h := harness // Advance and Begin as on one server
	h.New = func(t *testing.T) store.Store {
		c := clusterClient(t, rc)
		return open(t, c, redistest.Prefix(t, c))
	}
	h.Reopen = func(t *testing.T, s store.Store) store.Store {
		return open(t, clusterClient(t, rc), s.(*redisstore.Store).Prefix())
	}
	storetest.Run(t, h)
}

// clusterCheck: Check reads the settings of every primary, and names the
// one that would break locks.
func clusterCheck(t *testing.T, rc *redistest.Cluster) {
	ctx := context.Background()
	c := clusterClient(t, rc)
	warnings, err := redisstore.Check(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != len(rc.Servers()) {
		t.Fatalf("warnings %q: want one per primary (none keeps anything on disk)", warnings)
	}
	last := rc.Servers()[len(rc.Servers())-1]
	node := last.Client()
	defer func() { _ = node.Close() }()
	if err := node.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = node.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err() }()
	_, err = redisstore.Check(ctx, c)
	if !errors.Is(err, redisstore.ErrUnsafeServer) || !strings.Contains(err.Error(), rc.Addrs()[len(rc.Addrs())-1]+": maxmemory-policy is allkeys-lru") {
		t.Fatalf("Check of a cluster with an evicting primary = %v, want ErrUnsafeServer naming it", err)
	}
}

// rootsByNode returns, for each of the n primaries of c, a lock name
// whose keys it keeps.
func rootsByNode(t *testing.T, c *redis.ClusterClient, prefix string, n int) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for i := 0; len(out) < n && i < 1000; i++ {
		name := "n" + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
		node, err := c.MasterForKey(ctx, prefix+redisstore.KeyTag(name)+":d")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := out[node.Options().Addr]; !ok {
			out[node.Options().Addr] = name
		}
	}
	if len(out) < n {
		t.Fatalf("found names on %d primaries only", len(out))
	}
	return out
}

// twoNodes returns the Locks of two stores on one prefix of its own, each
// with a client of its own (two processes of an application), closed
// after the test, with the first one's client and the prefix.
func twoNodes(t *testing.T, rc *redistest.Cluster) (*redis.ClusterClient, string, *sleeplock.Locks, *sleeplock.Locks) {
	c1 := clusterClient(t, rc)
	prefix := redistest.Prefix(t, c1)
	l1 := sleeplock.New(openCluster(t, c1, prefix))
	l2 := sleeplock.New(openCluster(t, clusterClient(t, rc), prefix))
	t.Cleanup(func() { _ = l1.Close(); _ = l2.Close() })
	return c1, prefix, l1, l2
}

// clusterWakeUps: for a lock on each primary, a waiter of another store
// (its own client, its subscription on whichever node) is granted the
// slot by the holder's release, pushed (Cluster broadcasts PUBLISH to
// every node), and a waiter granted through a family is too.
func clusterWakeUps(t *testing.T, rc *redistest.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c1, prefix, l1, l2 := twoNodes(t, rc)
	for addr, name := range rootsByNode(t, c1, prefix, len(rc.Servers())) {
		if err := l1.Define(ctx, name, 1); err != nil {
			t.Fatal(err)
		}
		if err := l1.Define(ctx, name+"/*", 1); err != nil {
			t.Fatal(err)
		}
		for _, lock := range []string{name, name + "/1"} {
			x, err := l1.TryAcquire(ctx, lock, sleeplock.TTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			granted := queue(ctx, t, l2, lock)
			if err := x.Release(ctx); err != nil {
				t.Fatal(err)
			}
			y, err := granted()
			if err != nil {
				t.Fatalf("the waiter for %s (on %s): %v", lock, addr, err)
			}
			if y.Token() <= x.Token() {
				t.Fatalf("%s: token %d after %d", lock, y.Token(), x.Token())
			}
			if err := y.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// queue starts an Acquire of lock on l, the only waiter of lock, and
// returns once it is queued; the function returned waits for its lease.
func queue(ctx context.Context, t *testing.T, l *sleeplock.Locks, lock string) func() (sleeplock.Lease, error) {
	t.Helper()
	type result struct {
		lease sleeplock.Lease
		err   error
	}
	got := make(chan result, 1)
	go func() {
		y, err := l.Acquire(ctx, lock, sleeplock.TTL(time.Minute))
		got <- result{y, err}
	}()
	waitUntil(t, "the waiter to queue", func() bool {
		st, err := l.State(ctx, lock)
		return err == nil && st.Waiting == 1
	})
	return func() (sleeplock.Lease, error) {
		r := <-got
		return r.lease, r.err
	}
}

// clusterReshard: the slot of a held lock with a waiter moves to another
// primary, which lacks the library (FUNCTION FLUSH). The release that
// follows reaches the new primary (MOVED), loads the library there and
// hands the slot to the waiter; the holds and tokens moved with the keys.
func clusterReshard(t *testing.T, rc *redistest.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c1, prefix, l1, l2 := twoNodes(t, rc)
	const name = "moving"
	if err := l1.Define(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	x, err := l1.TryAcquire(ctx, name, sleeplock.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	granted := queue(ctx, t, l2, name)

	key := prefix + redisstore.KeyTag(name) + ":d"
	slot := int(c1.ClusterKeySlot(ctx, key).Val())
	from, err := c1.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var to *redistest.Server
	for _, s := range rc.Servers() {
		if "127.0.0.1:"+strconv.Itoa(s.Port()) != from.Options().Addr {
			to = s
			break
		}
	}
	moveSlot(t, rc, slot, from.Options().Addr, to)

	if err := x.Release(ctx); err != nil {
		t.Fatalf("release after the slot moved: %v", err)
	}
	y, err := granted()
	if err != nil {
		t.Fatalf("the waiter after the slot moved: %v", err)
	}
	if y.Token() <= x.Token() {
		t.Fatalf("token %d after %d", y.Token(), x.Token())
	}
	if _, err := l1.TryAcquire(ctx, name); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("a try while the waiter holds the lock = %v, want ErrUnavailable", err)
	}
	if err := y.Release(ctx); err != nil {
		t.Fatal(err)
	}
	tc := to.Client()
	defer func() { _ = tc.Close() }()
	if n := tc.Exists(ctx, key).Val(); n != 1 {
		t.Fatal("the new primary of the slot does not have the lock's keys")
	}
	if libs := tc.FunctionList(ctx, redis.FunctionListQuery{}).Val(); len(libs) != 1 {
		t.Fatalf("the new primary has %d libraries, want the store's, loaded again", len(libs))
	}
}

// moveSlot moves slot, with its keys, from the primary at addr to the
// primary to (CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE
// on every node), after removing the library from to.
func moveSlot(t *testing.T, rc *redistest.Cluster, slot int, addr string, to *redistest.Server) {
	t.Helper()
	ctx := context.Background()
	var src *redistest.Server
	for _, s := range rc.Servers() {
		if "127.0.0.1:"+strconv.Itoa(s.Port()) == addr {
			src = s
		}
	}
	sc, tc := src.Client(), to.Client()
	defer func() { _ = sc.Close(); _ = tc.Close() }()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tc.FunctionFlush(ctx).Err())
	srcID, err := sc.Do(ctx, "CLUSTER", "MYID").Text()
	must(err)
	toID, err := tc.Do(ctx, "CLUSTER", "MYID").Text()
	must(err)
	must(tc.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	must(sc.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID).Err())
	for {
		keys, err := sc.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		must(err)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", to.Port(), "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(sc.Do(ctx, args...).Err())
	}
	for _, s := range rc.Servers() {
		c := s.Client()
		err := c.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", toID).Err()
		_ = c.Close()
		must(err)
	}
}

// clusterOpen: Open of the URL of one node connects to the whole cluster
// (locks on every primary work, and several locks of one root in one
// call), checks every primary, and refuses a database other than 0.
func clusterOpen(t *testing.T, rc *redistest.Cluster) {
	ctx := context.Background()
	c := clusterClient(t, rc)
	prefix := redistest.Prefix(t, c)
	url := "redis://" + rc.Addrs()[0] + "/0"
	s, err := redisstore.Open(ctx, url, redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, ok := s.Client().(*redis.ClusterClient); !ok {
		t.Fatalf("Open of a cluster node made a %T, want a *redis.ClusterClient", s.Client())
	}
	if w := s.Warnings(); len(w) != len(rc.Servers()) {
		t.Fatalf("warnings %q: want one per primary", w)
	}
	l := sleeplock.New(s)
	defer func() { _ = l.Close() }()
	for _, name := range rootsByNode(t, c, prefix, len(rc.Servers())) {
		if err := l.Define(ctx, name+"/*", 1); err != nil {
			t.Fatal(err)
		}
		x, err := l.AcquireAll(ctx, []string{name + "/a", name + "/b"}, sleeplock.NoWait())
		if err != nil {
			t.Fatal(err)
		}
		if err := x.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := redisstore.Open(ctx, "redis://"+rc.Addrs()[0]+"/3"); !errors.Is(err, sleeplock.ErrInvalidConfig) {
		t.Fatalf("Open of database 3 of a cluster node = %v, want ErrInvalidConfig", err)
	}
}

// clusterGuardKeys: a Tx's key that carries the lock's KeyTag is written
// under the lock's check; a Tx with a key that does not is refused with a
// *ShardError, and none of its writes is made.
func clusterGuardKeys(t *testing.T, rc *redistest.Cluster) {
	ctx := context.Background()
	c := clusterClient(t, rc)
	prefix := redistest.Prefix(t, c)
	l := sleeplock.New(openCluster(t, c, prefix))
	defer func() { _ = l.Close() }()
	if err := l.Define(ctx, "report", 1); err != nil {
		t.Fatal(err)
	}
	x, err := l.TryAcquire(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	good, bad := prefix+"out"+redisstore.KeyTag("report"), prefix+"stray"
	var tx redisstore.Tx
	tx.Set(good, "1", 0)
	tx.Set(bad, "2", 0)
	err = x.Guard(ctx, &tx)
	var se *sleeplock.ShardError
	if !errors.As(err, &se) || !errors.Is(err, sleeplock.ErrUnsupported) || se.Locks != [2]string{"report", bad} {
		t.Fatalf("Guard of a Tx with a key of another slot = %v, want a *ShardError naming the key", err)
	}
	if n := c.Exists(ctx, good, bad).Val(); n != 0 {
		t.Fatalf("a refused Guard wrote %d keys", n)
	}
	var ok redisstore.Tx
	ok.Set(good, "1", 0)
	if err := x.Guard(ctx, &ok); err != nil {
		t.Fatal(err)
	}
	if v := c.Get(ctx, good).Val(); v != "1" {
		t.Fatalf("the guarded write: %q", v)
	}
	if err := x.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestClusterFailover: a primary of a Redis Cluster (two primaries, the
// first with a replica) is killed and its replica takes its slots over
// (CLUSTER FAILOVER TAKEOVER). The lock held there stays held and its
// waiter (another process's store) queued; the release that follows,
// once the client finds the new primary, hands the slot to the waiter
// with a greater token: the library came with the replication, and the
// waiter's subscription and heartbeat moved to the new primary.
func TestClusterFailover(t *testing.T) {
	rc := redistest.StartCluster(t, 0, 0)
	primary := rc.Servers()[0]
	replica := rc.AddReplica(t, 0, primary)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c1, prefix, l1, l2 := twoNodes(t, rc)
	name := rootsByNode(t, c1, prefix, 2)["127.0.0.1:"+strconv.Itoa(primary.Port())]
	if err := l1.Define(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	x, err := l1.TryAcquire(ctx, name, sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	granted := queue(ctx, t, l2, name)
	pc := primary.Client()
	acked, err := pc.Do(ctx, "WAIT", 1, 5000).Int()
	_ = pc.Close()
	if err != nil || acked != 1 {
		t.Fatalf("WAIT for the replica: %d, %v", acked, err)
	}

	primary.Stop()
	rcl := replica.Client()
	defer func() { _ = rcl.Close() }()
	if err := rcl.Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the replica to take over", func() bool {
		info, err := rcl.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:master\r\n")
	})
	var last sleeplock.State
	var lastErr error
	defer func() {
		if t.Failed() {
			t.Logf("the last state read: %+v, %v", last, lastErr)
		}
	}()
	took := time.Now()
	waitUntil(t, "the holder and the waiter on the new primary", func() bool {
		last, lastErr = l1.State(ctx, name)
		return lastErr == nil && last.Running == 1 && last.Waiting == 1
	})
	t.Logf("the store read the lock on the new primary %v after the takeover", time.Since(took).Round(time.Millisecond))
	if err := x.Release(ctx); err != nil {
		t.Fatalf("release after the failover: %v", err)
	}
	y, err := granted()
	if err != nil {
		t.Fatalf("the waiter after the failover: %v", err)
	}
	if y.Token() <= x.Token() {
		t.Fatalf("token %d after %d", y.Token(), x.Token())
	}
	if err := y.Release(ctx); err != nil {
		t.Fatal(err)
	}
	z, err := l1.TryAcquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if z.Token() <= y.Token() {
		t.Fatalf("token %d after %d", z.Token(), y.Token())
	}
	if err := z.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
