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

// Cluster is a Redis Cluster of a test's own: one primary per port, no
// replicas, the hash slots split evenly between the primaries.
type Cluster struct {
	servers []*Server
}

// StartCluster starts a Redis Cluster of a test's own: a redis-server
// with cluster mode on for each of ports (bound to 127.0.0.1; its cluster
// bus on the port + 10000, which must be free too), with no RDB snapshots
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
	for _, p := range ports {
		if err := free(p + 10000); err != nil {
			t.Fatalf("redistest: the cluster bus port of %d: %v", p, err)
		}
	}
	c := &Cluster{}
	for _, p := range ports {
		// nodes.conf is relative to the server's --dir, a directory of its own.
		c.servers = append(c.servers, Start(t, p, "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.form(ctx); err != nil {
		t.Fatalf("redistest: Redis Cluster on ports %v did not form: %v", ports, err)
	}
	return c
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
	want := []string{"cluster_state:ok", "cluster_known_nodes:" + strconv.Itoa(len(c.servers)),
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
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("node %d: %w; its last CLUSTER INFO: %s", s.Port(), ctx.Err(), last), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Addrs returns the nodes' addresses (host:port).
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.servers))
	for i, s := range c.servers {
		out[i] = s.addr()
	}
	return out
}

// Servers returns the cluster's nodes.
func (c *Cluster) Servers() []*Server { return c.servers }

// Client returns a new client of the cluster (the caller closes it).
func (c *Cluster) Client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
}
