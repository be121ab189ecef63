package cli

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// silentServer listens on a free local port, accepts every connection
// and never answers (a server that hangs, or a TLS client's handshake
// sent to a server without TLS); it returns the address.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// runWithin is run under a deadline: a command that hangs fails the test
// (it ends with the context's error, not with the one it is expected to
// report) instead of holding it until go test's own timeout.
func runWithin(t *testing.T, d time.Duration, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	var out, errOut bytes.Buffer
	code := Main(ctx, args, &out, &errOut)
	if ctx.Err() != nil {
		t.Fatalf("%q: still connecting after %s: exit %d, stderr %q", args, d, code, errOut.String())
	}
	return out.String(), errOut.String(), code
}

// A store whose server accepts the connection and never answers makes
// every command fail, naming the server that does not answer and the
// bound it set, instead of hanging (PostgreSQL had no connect timeout at
// all; Redis took over a minute and then said "context deadline
// exceeded"). The bound is the DSN's own, kept small here.
func TestStoreNoAnswer(t *testing.T) {
	addr := silentServer(t)
	for _, c := range []struct {
		store string
		want  []string
	}{
		{"postgres://postgres@" + addr + "/test?sslmode=disable&connect_timeout=1",
			[]string{"no answer from " + addr + " within 1s", "connect_timeout"}},
		{"host=127.0.0.1 port=" + addr[strings.LastIndex(addr, ":")+1:] + " user=postgres sslmode=disable connect_timeout=1",
			[]string{"no answer from " + addr + " within 1s", "connect_timeout"}},
		{"redis://" + addr + "/0?dial_timeout=200ms&read_timeout=100ms",
			[]string{"no answer from " + addr}},
		// TLS to a server that does not speak it (rediss:// to a plain
		// Redis, which waits for the end of the "command" forever).
		{"rediss://" + addr + "/0?dial_timeout=200ms",
			[]string{"no answer from " + addr + " within 200ms", "dial_timeout", "TLS"}},
	} {
		for _, cmd := range [][]string{{"state"}, {"migrate"}} {
			_, errOut, code := runWithin(t, time.Minute, append(cmd, "--store", c.store)...)
			if code == 0 {
				t.Errorf("%s --store %s: exit 0", cmd[0], c.store)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("%s --store %s: stderr %q, want %q", cmd[0], c.store, errOut, w)
				}
			}
		}
	}
}

// Without a connect timeout of its own, a PostgreSQL DSN gets
// connect_timeout=10 (PGCONNECT_TIMEOUT counts as its own), and a Redis
// URL a bound of 10 s on opening; one that sets its own keeps it.
func TestDefaultConnectTimeout(t *testing.T) {
	t.Setenv("PGCONNECT_TIMEOUT", "")
	for _, c := range []struct{ dsn, want string }{
		{"postgres://u@h/db", "postgres://u@h/db?connect_timeout=10"},
		{"postgresql://u@h:5433/db?sslmode=disable", "postgresql://u@h:5433/db?sslmode=disable&connect_timeout=10"},
		{"postgres://u@h1:5432,h2:5432/db", "postgres://u@h1:5432,h2:5432/db?connect_timeout=10"},
		{"host=h dbname=db", "host=h dbname=db connect_timeout=10"},
		{"postgres://u@h/db?connect_timeout=3", "postgres://u@h/db?connect_timeout=3"},
		{"host=h connect_timeout=3", "host=h connect_timeout=3"},
	} {
		if got, _, d := pgConnectTimeout(c.dsn); got != c.want || d <= 0 {
			t.Errorf("pgConnectTimeout(%q) = %q, %s; want %q", c.dsn, got, d, c.want)
		}
	}
	t.Setenv("PGCONNECT_TIMEOUT", "4")
	if got, _, d := pgConnectTimeout("postgres://u@h/db"); got != "postgres://u@h/db" || d != 4*time.Second {
		t.Errorf("with PGCONNECT_TIMEOUT=4: %q, %s", got, d)
	}
	for url, want := range map[string]time.Duration{
		"redis://h:6379/0":                  defaultConnectTimeout,
		"rediss://h:6379/0?dial_timeout=2s": 2 * time.Second,
		"redis://h:6379/0?dial_timeout=-1":  0,
	} {
		if d, _, _ := redisConnectTimeout(url); d != want {
			t.Errorf("redisConnectTimeout(%q) = %s, want %s", url, d, want)
		}
	}
}
