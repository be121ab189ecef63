package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a PostgreSQL cluster of a test's (or a chaos run's) own, made
// with Debian's pg_createcluster (postgresql-common, as root), for the
// tests that stop, restart, pause or fail over their server: never the
// shared one.
type Cluster struct {
	Version string // e.g. "15"
	Name    string // unique: see CreateCluster
	Port    int
}

// DSN is the URL of database db of the cluster, as the superuser postgres
// over loopback (trust authentication).
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// Dir is the cluster's data directory.
func (c *Cluster) Dir() string { return filepath.Join("/var/lib/postgresql", c.Version, c.Name) }

// Postmaster is the pid of the cluster's postmaster, while it runs.
func (c *Cluster) Postmaster() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir(), "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
}

// Drop stops the cluster and removes it.
func (c *Cluster) Drop(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "pg_dropcluster", c.Version, c.Name, "--stop").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_dropcluster %s %s: %w: %s", c.Version, c.Name, err, lastLines(out))
	}
	return nil
}

// ClusterTools reports why clusters cannot be made here (nil when they
// can): pg_createcluster and its companions missing, or not root.
func ClusterTools() error {
	for _, tool := range []string{"pg_createcluster", "pg_ctlcluster", "pg_dropcluster", "pg_lsclusters"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found (postgresql-common): %w", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		return errors.New("not root: pg_createcluster needs root")
	}
	return nil
}

// A port of 0 given to CreateCluster is chosen among the ports from
// freePorts to freePorts+2767: below Linux's ephemeral range (no outgoing
// connection takes it meanwhile), apart from redistest's (20000–22767, and
// their cluster bus ports 30000–32767). It is one on which nothing listens,
// that no cluster of pg_lsclusters has, and that no other cluster of this
// process was given. A cluster that then cannot bind it (another process
// took it first) is made again on another.
const freePorts = 25000

// given are the ports this process chose for its clusters.
var given = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// CreateCluster creates a cluster of version, named prefix, the creating
// process's pid and a random part (so that runs side by side never meet;
// clusters of the prefix whose process is gone, left by an aborted run,
// are dropped first), on port (0: a free port, see freePorts), with trust
// authentication on loopback. It starts it and waits until it accepts
// connections when start is set. The caller drops it (Drop) when done,
// also on failure; CreateCluster drops what it made when it fails.
func CreateCluster(ctx context.Context, version, prefix string, port int, start bool) (*Cluster, error) {
	if err := ClusterTools(); err != nil {
		return nil, err
	}
	if err := dropOrphans(ctx, version, prefix); err != nil {
		return nil, err
	}
	chosen := port == 0
	for try := 0; ; try++ {
		p := port
		if chosen {
			var err error
			if p, err = freePort(ctx); err != nil {
				return nil, err
			}
		}
		var b [4]byte
		_, _ = rand.Read(b[:])
		c := &Cluster{Version: version, Name: prefix + "_" + strconv.Itoa(os.Getpid()) + "_" + hex.EncodeToString(b[:]), Port: p}
		args := []string{version, c.Name, "--port", strconv.Itoa(p)}
		if start {
			args = append(args, "--start")
		}
		out, err := exec.CommandContext(ctx, "pg_createcluster", append(args, "--", "--auth=trust")...).CombinedOutput()
		if err == nil && start {
			err = c.waitUp(ctx, 30*time.Second)
		}
		if err == nil {
			return c, nil
		}
		err = fmt.Errorf("pg_createcluster %s %s --port %d: %w: %s", version, c.Name, p, err, lastLines(out))
		// (whatever it made: it may have been created, not started)
		if derr := c.Drop(context.Background()); derr != nil && !strings.Contains(derr.Error(), "does not exist") {
			err = errors.Join(err, derr)
		}
		if !chosen || try == 4 || ctx.Err() != nil || !portTaken(string(out)) {
			return nil, err
		}
	}
}

// portTaken reports whether pg_createcluster's output says that the port
// was taken.
func portTaken(out string) bool {
	out = strings.ToLower(out)
	return strings.Contains(out, "in use") || strings.Contains(out, "already used")
}

// freePort chooses a port as freePorts says.
func freePort(ctx context.Context) (int, error) {
	out, err := exec.CommandContext(ctx, "pg_lsclusters", "--no-header").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pg_lsclusters: %w: %s", err, lastLines(out))
	}
	taken := map[int]bool{}
	for line := range strings.SplitSeq(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			if n, err := strconv.Atoi(f[2]); err == nil {
				taken[n] = true
			}
		}
	}
	given.Lock()
	defer given.Unlock()
	var b [2]byte
	for range 100 {
		_, _ = rand.Read(b[:])
		p := freePorts + (int(b[0])<<8|int(b[1]))%2768
		if given.ports[p] || taken[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		_ = l.Close()
		given.ports[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("pgtest: no free port among %d–%d", freePorts, freePorts+2767)
}

// dropOrphans drops the clusters of version named prefix_PID_… whose
// process PID is gone: left by a run that was killed before it could drop
// them.
func dropOrphans(ctx context.Context, version, prefix string) error {
	out, err := exec.CommandContext(ctx, "pg_lsclusters", "--no-header").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_lsclusters: %w: %s", err, lastLines(out))
	}
	var errs []error
	for line := range strings.SplitSeq(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != version || !strings.HasPrefix(f[1], prefix+"_") {
			continue
		}
		pid, rest, ok := strings.Cut(strings.TrimPrefix(f[1], prefix+"_"), "_")
		n, err := strconv.Atoi(pid)
		if !ok || rest == "" || err != nil || n <= 0 || alive(n) {
			continue
		}
		errs = append(errs, (&Cluster{Version: version, Name: f[1]}).Drop(ctx))
	}
	return errors.Join(errs...)
}

// alive reports whether process pid runs.
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}

// waitUp waits until the cluster accepts connections.
func (c *Cluster) waitUp(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster %s/%s not up after %v: %w", c.Version, c.Name, limit, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// OwnCluster is a started cluster of version of the test's own
// (CreateCluster, on a free port), dropped when the test ends, however it
// ends. Without pg_createcluster or root the test is skipped, or fails
// when CI is set.
func OwnCluster(t testing.TB, version string) *Cluster {
	t.Helper()
	if err := ClusterTools(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("a PostgreSQL cluster of the test's own (CI is set): %v", err)
		}
		t.Skipf("a PostgreSQL cluster of the test's own: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := CreateCluster(ctx, version, "sltest", 0, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Drop(context.Background()); err != nil {
			t.Errorf("dropping the test's cluster: %v", err)
		}
	})
	return c
}

// lastLines is the last lines of a tool's output, on one line.
func lastLines(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-3):], " / ")
}
