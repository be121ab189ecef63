//go:build unix

package cli

import (
	"context"
	"database/sql"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/redisstore/redistest"
)

// frozenStores give the --store (and --schema) flags of a store of each
// kind, and the function that makes it stop answering: a Redis of the
// test's own, frozen with SIGSTOP; the test PostgreSQL reached through a
// proxy that stops forwarding; a SQLite file that a transaction of
// another connection keeps locked.
var frozenStores = map[string]func(t *testing.T) (args []string, freeze func()){
	"redis": func(t *testing.T) ([]string, func()) {
		srv := redistest.Start(t, 0)
		return []string{"--store", srv.URL()}, func() {
			if err := srv.Freeze(); err != nil {
				t.Fatal(err)
			}
		}
	},
	"sqlite": func(t *testing.T) ([]string, func()) {
		e := newRunEnv(t)
		return []string{"--store", e.store()}, func() {
			// A write transaction that does not end, of another
			// connection (as of another process).
			db, err := sql.Open("sqlite", e.db)
			if err != nil {
				t.Fatal(err)
			}
			conn, err := db.Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.ExecContext(t.Context(), "BEGIN EXCLUSIVE"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
				_ = conn.Close()
				_ = db.Close()
			})
		}
	},
	"postgres": func(t *testing.T) ([]string, func()) {
		pg := newPG(t)
		u, err := url.Parse(pg.dsn)
		if err != nil || u.Scheme == "" {
			t.Skipf("the test database's DSN %q is not a URL: no proxy for it", pg.dsn)
		}
		p := newFreezingProxy(t, u.Host)
		u.Host = p.addr()
		return []string{"--store", u.String(), "--schema", pg.schema}, p.freeze
	},
}

// TestExitWithStoreFrozen: when the store stops answering while the
// command runs, run and elect still exit once it ends, with its status,
// on every store: the release (the resignation) on the way out gives up
// after releaseTimeout, a warning names the lease left behind and says
// that it expires by its TTL, and closing the store is not waited for.
func TestExitWithStoreFrozen(t *testing.T) {
	for kind, frozen := range frozenStores {
		for _, verb := range []string{"run", "elect"} {
			t.Run(kind+"/"+verb, func(t *testing.T) {
				storeArgs, freeze := frozen(t)
				exitWithStoreFrozen(t, verb, storeArgs, freeze)
			})
		}
	}
}

func exitWithStoreFrozen(t *testing.T, verb string, storeArgs []string, freeze func()) {
	ts, child := newTerms(t)
	args := append(append([]string{verb}, storeArgs...), "--ttl", "30s", "jobs", "--")
	if verb == "run" {
		// run's command has no leader ID to report: give one.
		child = append([]string{"env", "SLEEPLOCK_LEADER_ID=run"}, child...)
	}
	e := startMain(t, ts, append(args, child...)...)
	cmd := ts.next(t, e)
	freeze()
	ended := time.Now()
	cmd.exit(t, 3)
	code := ts.wait(t, e)
	took := time.Since(ended)
	t.Logf("%s exited %v after its command ended, the store frozen", verb, took)
	errOut := e.errOut.String()
	if code != 3 {
		t.Fatalf("%s: exit %d, stderr %q; want the command's 3", verb, code, errOut)
	}
	if want := "token " + strconv.FormatInt(cmd.token, 10); !strings.Contains(errOut, `could not release "jobs"`) ||
		!strings.Contains(errOut, want) || !strings.Contains(errOut, "expires by its TTL (30s)") {
		t.Fatalf("%s: stderr %q; want a warning naming the lease left behind (%s) and its TTL", verb, errOut, want)
	}
	// The bound is the scheduler's as much as ours: checked on
	// demand, on a machine that is not loaded. pgstore waits up
	// to a second more for the cancel request of the release
	// (pgstore.ConfigurePool).
	if bound := releaseTimeout + 2*time.Second; os.Getenv("SLEEPLOCK_TEST_TIMING") != "" && took > bound {
		t.Errorf("%s exited %v after its command ended; want within %v", verb, took, bound)
	}
}

// freezingProxy forwards TCP connections to a server until freeze: from
// then on it forwards nothing, either way, and keeps the connections
// open, as a server whose host hangs. The test's end closes it all.
type freezingProxy struct {
	ln     net.Listener
	frozen chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

func newFreezingProxy(t *testing.T, target string) *freezingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{ln: ln, frozen: make(chan struct{}), done: make(chan struct{})}
	var mu sync.Mutex
	var conns []net.Conn
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			p.wg.Add(2)
			go p.pipe(s, c)
			go p.pipe(c, s)
		}
	}()
	t.Cleanup(func() {
		close(p.done)
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *freezingProxy) addr() string { return p.ln.Addr().String() }

func (p *freezingProxy) freeze() { p.once.Do(func() { close(p.frozen) }) }

// pipe copies from src to dst until either closes, or until the proxy
// freezes: then what it read stays unsent until the test ends.
func (p *freezingProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			select {
			case <-p.frozen:
				<-p.done
				return
			default:
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}
