package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// Cluster is a Redis Cluster of a test's own: one primary per port of
// StartCluster, the hash slots split evenly between them, and the
// replicas AddReplica adds.
type Cluster struct {
	servers  []*Server // the primaries StartCluster started
	replicas []*Server
}

// StartCluster starts a Redis Cluster of a test's own: a redis-server
// with cluster mode on for each of ports (bound to 127.0.0.1; its cluster
// bus on the port + 10000, which must be free too; a port of 0 is chosen
// free, as Start does), with no RDB snapshots
// and no AOF, each given an equal range of the hash slots and introduced
// to the others (CLUSTER ADDSLOTSRANGE and CLUSTER MEET: no redis-cli
// needed). It returns once every node reports cluster_state:ok and knows
// every other; the servers are killed when the test ends. The test is
// skipped, with a loud line on stderr, when redis-server is not installed,
// and fails then when CI is set; it fails when a port is taken or the
// cluster does not form within 30 s.
func StartCluster(t testing.TB, ports ...int) *Cluster {
	t.Helper()
	if len(ports) == 0 {
		t.Fatal("redistest: StartCluster needs at least one port")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not installed (CI is set): cannot start a Redis Cluster: %v", err)
		}
		msg := fmt.Sprintf("*** SKIPPING %s: redis-server not installed, no Redis Cluster (%v) ***", t.Name(), err)
		fmt.Fprintf(os.Stderr, "\n%s\n\n", msg)
		t.Skip(msg)
	}
	c := &Cluster{}
	for _, p := range ports {
		c.servers = append(c.servers, startNode(t, p))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.form(ctx); err != nil {
		var got []int
		for _, s := range c.servers {
			got = append(got, s.Port())
		}
		t.Fatalf("redistest: Redis Cluster on ports %v did not form: %v", got, err)
	}
	return c
}

// startNode starts a redis-server in cluster mode on port (0: a free one).
func startNode(t testing.TB, port int) *Server {
	t.Helper()
	// nodes.conf is relative to the server's --dir, a directory of its own.
	return start(t, port, true, []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "5000"})
}

// AddReplica starts a redis-server on port (its cluster bus on port +
// 10000; 0: a free port, as Start chooses) as a replica of primary, a node
// of the cluster, and returns once it has copied the primary's data and
// every node knows it and reports the cluster ok; it is killed when the test ends.
func (c *Cluster) AddReplica(t testing.TB, port int, primary *Server) *Server {
	t.Helper()
	r := startNode(t, port)
	c.replicas = append(c.replicas, r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.replicate(ctx, r, primary); err != nil {
		t.Fatalf("redistest: replica %d of %d: %v", port, primary.Port(), err)
	}
	return r
}

// replicate introduces r to the cluster, makes it a replica of primary
// and waits until it is in sync and known to every node.
func (c *Cluster) replicate(ctx context.Context, r, primary *Server) error {
	rc, pc := r.Client(), primary.Client()
	defer func() { _ = rc.Close(); _ = pc.Close() }()
	if err := rc.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(primary.Port())).Err(); err != nil {
		return err
	}
	id, err := pc.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		return err
	}
	for { // CLUSTER REPLICATE needs the primary known to r
		err := rc.Do(ctx, "CLUSTER", "REPLICATE", id).Err()
		if err == nil {
			break
		}
		if werr := pause(ctx); werr != nil {
			return errors.Join(werr, err)
		}
	}
	for {
		info, err := rc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up\r\n") {
			break
		}
		if werr := pause(ctx); werr != nil {
			return errors.Join(werr, err, errors.New(info))
		}
	}
	for _, s := range c.nodes() {
		if err := c.waitReady(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// pause waits a moment before a condition is polled again, or returns
// ctx's error.
func pause(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(20 * time.Millisecond):
		return nil
	}
}

// nodes returns every node: the primaries, then the replicas.
func (c *Cluster) nodes() []*Server {
	return append(append([]*Server(nil), c.servers...), c.replicas...)
}

// free reports an error when something listens on port already.
func free(port int) error {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return err
	}
	return l.Close()
}

// form gives each node its range of slots, introduces the nodes to the
// first one and waits until every node sees the whole cluster.
func (c *Cluster) form(ctx context.Context) error {
	n := len(c.servers)
	for i, s := range c.servers {
		cl := s.Client()
		lo, hi := i*clusterSlots/n, (i+1)*clusterSlots/n-1
		err := cl.ClusterAddSlotsRange(ctx, lo, hi).Err()
		if err == nil && i > 0 {
			err = cl.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(c.servers[0].Port())).Err()
		}
		_ = cl.Close()
		if err != nil {
			return fmt.Errorf("node %d: %w", s.Port(), err)
		}
	}
	for _, s := range c.servers {
		if err := c.waitReady(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// waitReady polls a node's CLUSTER INFO until it reports the cluster ok
// with every node known, or ctx ends.
func (c *Cluster) waitReady(ctx context.Context, s *Server) error {
	cl := s.Client()
	defer func() { _ = cl.Close() }()
	want := []string{"cluster_state:ok", "cluster_known_nodes:" + strconv.Itoa(len(c.nodes())),
		"cluster_slots_ok:" + strconv.Itoa(clusterSlots)}
	var last string
	for {
		info, err := cl.ClusterInfo(ctx).Result()
		if err == nil {
			ready := true
			for _, w := range want {
				ready = ready && strings.Contains(info, w+"\r\n")
			}
			if ready {
				return nil
			}
			last = info
		}
		if werr := pause(ctx); werr != nil {
			return errors.Join(fmt.Errorf("node %d: %w; its last CLUSTER INFO: %s", s.Port(), werr, last), err)
		}
	}
}

// Addrs returns the addresses (host:port) of the primaries StartCluster
// started.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.servers))
	for i, s := range c.servers {
		out[i] = s.addr()
	}
	return out
}

// Servers returns the primaries StartCluster started, not the replicas
// (AddReplica returns each).
func (c *Cluster) Servers() []*Server { return c.servers }

// Client returns a new client of the cluster, which finds it through any
// of its nodes (the caller closes it).
func (c *Cluster) Client() *redis.ClusterClient {
	addrs := make([]string, 0, len(c.servers)+len(c.replicas))
	for _, s := range c.nodes() {
		addrs = append(addrs, s.addr())
	}
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
}
