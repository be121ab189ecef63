package chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/pgstore/pgtest"
)

// cluster is a PostgreSQL cluster of the run's own (pg_createcluster), the
// only kind the driver ever restarts.
type cluster struct {
	version, name string
	port          int
	dsn           string
}

// createCluster creates the cluster version/name_PID_RANDOM
// (pgtest.CreateCluster: a name no other run has, clusters of name left
// by an aborted run dropped first) on port (0: a free port, another tried
// when it is taken meanwhile) with trust authentication on loopback, and
// starts it unless noStart.
func createCluster(ctx context.Context, version, name string, port int, noStart bool) (*cluster, error) {
	c, err := pgtest.CreateCluster(ctx, version, name, port, !noStart)
	if err != nil {
		return nil, err
	}
	return &cluster{version: c.Version, name: c.Name, port: c.Port, dsn: c.DSN("postgres")}, nil
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
	return (&pgtest.Cluster{Version: c.version, Name: c.name, Port: c.port}).Drop(ctx)
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
