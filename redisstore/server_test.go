package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ports are the ports this package's own servers may use.
var ports = struct {
	sync.Mutex
	next int
}{next: 6380}

// server is a redis-server of a test's own, for tests that stop, restart
// or pause it.
type server struct {
	t    testing.TB
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
}

// startServer starts a redis-server with args (redis.conf directives as
// "--name value" pairs) in a temporary directory, on a port of 6380–6389;
// it is stopped after the test. The test is skipped when redis-server is
// not installed, and fails then when CI is set.
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not installed (CI is set): %v", err)
		}
		t.Skipf("redis-server not installed: %v", err)
	}
	ports.Lock()
	port := ports.next
	if ports.next++; ports.next > 6389 {
		ports.next = 6380
	}
	ports.Unlock()
	s := &server{t: t, port: port, dir: t.TempDir(), args: args}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *server) start() {
	s.t.Helper()
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", filepath.Join(s.dir, "log")}, s.args...)
	s.cmd = exec.Command("redis-server", args...)
	dieWithTest(s.cmd)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	c := s.client()
	defer func() { _ = c.Close() }()
	deadline := time.Now().Add(10 * time.Second)
	// Ours answers with its own pid (not a server left over on the port).
	want := "process_id:" + strconv.Itoa(s.cmd.Process.Pid) + "\r\n"
	for {
		info, err := c.Info(context.Background(), "server").Result()
		if err == nil && strings.Contains(info, want) {
			return
		}
		if time.Now().After(deadline) || s.cmd.ProcessState != nil {
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			s.t.Fatalf("redis-server on %d did not start: %s", s.port, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the server (SIGKILL: nothing is saved on the way out) and
// waits for it.
func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

func (s *server) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

func (s *server) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port), MaxRetries: -1})
}
