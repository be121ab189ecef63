// Package redistest is what tests against Redis share: the test server's
// URL (SLEEPLOCK_TEST_REDIS_URL), a client that skips the test when the
// server cannot be reached (or fails it when the environment variable CI
// is set), a key prefix of the test's own, deleted when the test ends (and
// a check for TestMain, Exit, that no test left keys of its prefix), and
// a redis-server of a test's own (Start) for the tests that stop, restart
// or pause their server, and a Redis Cluster of a test's own
// (StartCluster).
//
// It lives in the redisstore module so that the tests of every module that
// uses redisstore (redisstore's own, the chaos test's, the release test's)
// share it at no cost to redisstore's users: it needs nothing that
// redisstore does not already require. Programs should not import it.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultURL is the test server when SLEEPLOCK_TEST_REDIS_URL is not set.
const DefaultURL = "redis://127.0.0.1:6379/0"

// URL is the test server: SLEEPLOCK_TEST_REDIS_URL, or DefaultURL.
func URL() string {
	if u := os.Getenv("SLEEPLOCK_TEST_REDIS_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Unreachable skips t because the test server cannot be used, or fails it
// when CI is set.
func Unreachable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("Redis at %s unreachable (CI is set): %v", URL(), err)
	}
	t.Skipf("Redis at %s unreachable (set SLEEPLOCK_TEST_REDIS_URL): %v", URL(), err)
}

// Client returns a client of the test server, closed when the test ends,
// or skips the test (fails it under CI) when the server is unreachable.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(URL())
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		Unreachable(t, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Prefix returns a key prefix of the test's own ("sltest:", a random part
// and ":"), whose keys on c are deleted when the test ends (Own).
func Prefix(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	p := "sltest:" + hex.EncodeToString(b[:]) + ":"
	Own(t, c, p)
	return p
}

// Own makes prefix, a key prefix that the test chose for itself, the
// test's: its keys on c are deleted when the test ends (the test fails if
// they cannot be), and Exit reports any that are left on the test server.
// c must stay open until then: a client of Client, not a store's.
func Own(t testing.TB, c redis.UniversalClient, prefix string) {
	t.Helper()
	owned.Lock()
	owned.prefixes = append(owned.prefixes, prefix)
	owned.Unlock()
	t.Cleanup(func() {
		if err := DropPrefix(context.Background(), c, prefix); err != nil {
			t.Errorf("deleting the keys of %s: %v", prefix, err)
		}
	})
}

// owned are the prefixes given out by Prefix and Own in this process.
var owned struct {
	sync.Mutex
	prefixes []string
}

// Left returns the keys on the test server (URL) of the prefixes that
// Prefix and Own gave out in this process: none once every test has
// ended, unless one left keys behind that its end did not delete (written
// after it, or by a process it started that outlived it).
func Left(ctx context.Context) ([]string, error) {
	owned.Lock()
	prefixes := slices.Clone(owned.prefixes)
	owned.Unlock()
	if len(prefixes) == 0 {
		return nil, nil
	}
	o, err := redis.ParseURL(URL())
	if err != nil {
		return nil, err
	}
	c := redis.NewClient(o)
	defer func() { _ = c.Close() }()
	var keys []string
	for _, p := range prefixes {
		iter := c.Scan(ctx, 0, p+"*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return keys, err
		}
	}
	return keys, nil
}

// Exit ends a test binary with code, as TestMain does, or with 1 when
// keys that its tests' prefixes own are left on the test server (Left),
// which it names. Use it as goleak.VerifyTestMain(m,
// goleak.Cleanup(redistest.Exit)), or os.Exit's stand-in after m.Run.
func Exit(code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	keys, err := Left(ctx)
	cancel()
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "redistest: cannot check for keys left on %s: %v\n", URL(), err)
		code = 1
	case len(keys) > 0:
		fmt.Fprintf(os.Stderr, "redistest: the tests left %d keys on %s, among them %q\n", len(keys), URL(), keys[:min(len(keys), 10)])
		code = 1
	}
	os.Exit(code)
}

// DropPrefix deletes every key of c that begins with prefix: on every
// primary of a *redis.ClusterClient.
func DropPrefix(ctx context.Context, c redis.UniversalClient, prefix string) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return dropPrefix(ctx, node, prefix, true)
		})
	}
	return dropPrefix(ctx, c, prefix, false)
}

// dropPrefix deletes the keys of prefix on one server, in batches, or one
// key per DEL on a node of a cluster (whose DEL takes keys of one slot).
func dropPrefix(ctx context.Context, c redis.UniversalClient, prefix string, cluster bool) error {
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if cluster {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.Del(ctx, k)
			}
			return nil
		})
		return err
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := c.Del(ctx, keys[:n]...).Err(); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// Server is a redis-server of a test's own.
type Server struct {
	port int
	dir  string
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil when stopped
	exited chan struct{} // closed when cmd has exited
}

// Start starts a redis-server on port (bound to 127.0.0.1; 0: a port of
// 20000–22767 free when chosen, see freePorts) in a temporary directory,
// with no RDB snapshots and the AOF off unless args (redis.conf directives
// as "--name", "value", …, after those) say otherwise; it is killed when the test ends. The test is
// skipped when redis-server is not installed, and fails then when CI is
// set.
func Start(t testing.TB, port int, args ...string) *Server {
	t.Helper()
	return start(t, port, false, args)
}

// A port of 0 given to Start, StartCluster or AddReplica is chosen
// among the ports from freePorts to freePorts+2767, below Linux's
// ephemeral range (so that no outgoing connection takes it meanwhile): one
// on which nothing listens, nor on its cluster bus port (+ 10000) for a
// cluster node, and that no other server of this process was given. A
// server that then cannot bind it (another process took it first) is
// started on another. Tests that choose their ports so run side by side
// with other test processes, and with other checkouts' tests.
const freePorts = 20000

// given are the ports this process chose for its servers.
var given = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePort chooses a port as freePorts says (and its bus port + 10000
// when bus is set).
func freePort(bus bool) (int, error) {
	given.Lock()
	defer given.Unlock()
	var b [2]byte
	for range 100 {
		_, _ = rand.Read(b[:])
		p := freePorts + (int(b[0])<<8|int(b[1]))%2768
		if given.ports[p] || free(p) != nil || (bus && free(p+10000) != nil) {
			continue
		}
		given.ports[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("redistest: no free port among %d–%d", freePorts, freePorts+2767)
}

// start is Start; bus: a cluster node, whose bus port (+ 10000) must be
// free too.
func start(t testing.TB, port int, bus bool, args []string) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not installed (CI is set): %v", err)
		}
		t.Skipf("redis-server not installed: %v", err)
	}
	chosen := port == 0
	for try := 0; ; try++ {
		p := port
		if chosen {
			var err error
			if p, err = freePort(bus); err != nil {
				t.Fatal(err)
			}
		} else if bus {
			if err := free(p + 10000); err != nil {
				t.Fatalf("redistest: the cluster bus port of %d: %v", p, err)
			}
		}
		s := &Server{port: p, dir: t.TempDir(), args: args}
		err := s.start()
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		if !chosen || try == 9 || !strings.Contains(err.Error(), "already in use") {
			t.Fatal(err)
		}
	}
}

// start starts the server and waits until it answers with its own pid
// (not a server left over on the port).
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := filepath.Join(s.dir, "log")
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", log}, s.args...)
	cmd := exec.Command("redis-server", args...)
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _, _ = cmd.Process.Wait(); close(exited) }()
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
	defer func() { _ = c.Close() }()
	want := "process_id:" + strconv.Itoa(cmd.Process.Pid) + "\r\n"
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.Info(context.Background(), "server").Result()
		if err == nil && strings.Contains(info, want) {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		select {
		case <-exited:
		default:
			if time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			_ = cmd.Process.Kill()
			<-exited
		}
		out, _ := os.ReadFile(log)
		return fmt.Errorf("redis-server on port %d did not start: %s", s.port, out)
	}
}

// Stop kills the server (SIGKILL: nothing is saved on the way out, what is
// in the AOF stays) and waits for it to exit.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Restart kills the server if it runs and starts it again, on the same
// port and directory with the same settings: what it had in its AOF (if
// on) it loads again. It may be called from any goroutine.
func (s *Server) Restart() error {
	s.Stop()
	return s.start()
}

// Port is the server's port.
func (s *Server) Port() int { return s.port }

// Dir is the server's directory (its log, its AOF).
func (s *Server) Dir() string { return s.dir }

// URL is the server's URL, database 0.
func (s *Server) URL() string { return "redis://" + s.addr() + "/0" }

// Client returns a new client of the server that never retries a command
// (the caller closes it).
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
}

func (s *Server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }
