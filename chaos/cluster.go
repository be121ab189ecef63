package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// cluster is a PostgreSQL cluster of the run's own (pg_createcluster), the
// only kind the driver ever restarts.
type cluster struct {
	version, name string
	port          int
	dsn           string
}

// createCluster creates and starts the cluster version/name on port with
// trust authentication on loopback. A cluster of that name left by an
// aborted run is dropped first.
func createCluster(ctx context.Context, version, name string, port int) (*cluster, error) {
	for _, tool := range []string{"pg_createcluster", "pg_ctlcluster", "pg_dropcluster", "pg_lsclusters"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s not found (postgresql-common): %w", tool, err)
		}
	}
	c := &cluster{version: version, name: name, port: port,
		dsn: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}
	out, err := exec.CommandContext(ctx, "pg_lsclusters", "--no-header").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("pg_lsclusters: %w: %s", err, out)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		switch {
		case f[0] == version && f[1] == name:
			if err := c.drop(ctx); err != nil {
				return nil, fmt.Errorf("dropping the cluster %s/%s left by an earlier run: %w", version, name, err)
			}
		case f[2] == strconv.Itoa(port):
			return nil, fmt.Errorf("port %d is the port of cluster %s/%s", port, f[0], f[1])
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("port %d is in use: %w", port, err)
	}
	_ = l.Close()
	out, err = exec.CommandContext(ctx, "pg_createcluster", version, name, "--port", strconv.Itoa(port), "--start",
		"--", "--auth=trust").CombinedOutput()
	if err != nil {
		_ = c.drop(context.Background())
		return nil, fmt.Errorf("pg_createcluster %s %s: %w: %s", version, name, err, lastLines(out))
	}
	if err := c.waitUp(ctx, 30*time.Second); err != nil {
		_ = c.drop(context.Background())
		return nil, err
	}
	return c, nil
}

// restart stops the cluster at once (as a crash: -m immediate) and starts
// it again.
func (c *cluster) restart(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "pg_ctlcluster", c.version, c.name, "restart", "-m", "immediate").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctlcluster restart: %w: %s", err, lastLines(out))
	}
	return c.waitUp(ctx, 30*time.Second)
}

// drop stops and removes the cluster.
func (c *cluster) drop(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "pg_dropcluster", c.version, c.name, "--stop").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_dropcluster: %w: %s", err, lastLines(out))
	}
	return nil
}

func (c *cluster) waitUp(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var last error
	for {
		conn, err := pgx.Connect(ctx, c.dsn)
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("cluster %s/%s not up after %v", c.version, c.name, limit), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func lastLines(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-3):], " / ")
}
