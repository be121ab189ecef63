package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/cmd/sleeplock/internal/lockview"
	"github.com/sleeplock/sleeplock/pgstore"
)

// TestServeUsage: bad flags are usage errors, before any store is opened.
func TestServeUsage(t *testing.T) {
	t.Setenv("SLEEPLOCK_SERVE_TOKEN", "")
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"serve", "--allow-release"},
		{"serve", "--token-file", empty},
		{"serve", "--allow-release", "--token-file", empty},
		{"serve", "--poll", "0s"},
		{"serve", "extra"},
	} {
		_, errOut, code := run(t, args...)
		if code != 2 || errOut == "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a message", args, code, errOut)
		}
	}
	t.Setenv("SLEEPLOCK_SERVE_TOKEN", "short")
	if _, errOut, code := run(t, "serve", "--allow-release"); code != 2 || !strings.Contains(errOut, "16") {
		t.Errorf("short token: exit %d %q", code, errOut)
	}
}

// serveDSN is the test database, or a skip (a failure under CI).
func serveDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("SLEEPLOCK_TEST_DATABASE_URL")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL unreachable in CI: %v", err)
		}
		t.Skipf("PostgreSQL unreachable: %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "serve_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		_ = conn.Close(context.Background())
	})
	if _, errOut, code := run(t, "migrate", "--store", dsn, "--schema", schema); code != 0 {
		t.Fatalf("migrate: %s", errOut)
	}
	return dsn + "#" + schema
}

// lineWriter sends the first line written to it on first (capacity 1).
type lineWriter struct {
	first chan<- string
	buf   strings.Builder
	sent  bool
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if i := strings.IndexByte(w.buf.String(), '\n'); i >= 0 && !w.sent {
		w.first <- w.buf.String()[:i]
		w.sent = true
	}
	return len(p), nil
}

// TestServe runs `sleeplock serve` on PostgreSQL: another node's changes
// show in the API, the stream and /metrics; the operator releases a holder
// with the token; SIGTERM stops it gracefully (open streams closed, exit 0).
func TestServe(t *testing.T) {
	dsnSchema := serveDSN(t)
	dsn, schema, _ := strings.Cut(dsnSchema, "#")
	const token = "serve-test-token-0123456789"
	t.Setenv("SLEEPLOCK_SERVE_TOKEN", token)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM) // as cmd/sleeplock does
	defer stop()
	first := make(chan string, 1)
	out := &lineWriter{first: first}
	errOut := &syncBuf{}
	exited := make(chan int, 1)
	go func() {
		exited <- Main(ctx, []string{"serve", "--store", dsn, "--schema", schema, "--addr", "127.0.0.1:0",
			"--allow-release", "--poll", "20ms"}, out, errOut)
	}()
	var base string
	select {
	case line := <-first:
		base = strings.TrimSuffix(strings.TrimPrefix(line, "serving the locks on "), "/")
	case code := <-exited:
		t.Fatalf("serve exited %d: %s", code, errOut.String())
	}

	// Another node.
	s, err := pgstore.Open(context.Background(), dsn, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	node := sleeplock.New(s)
	defer node.Close()
	bg := context.Background()
	if err := node.Define(bg, "pay", 2); err != nil {
		t.Fatal(err)
	}

	res, err := http.Get(base + "/api/events?prefix=pay")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	lease, err := node.Acquire(bg, "pay", sleeplock.Ref("job-1"), sleeplock.Kind("job"))
	if err != nil {
		t.Fatal(err)
	}
	// The stream shows the other node's holder (from the List diff) and
	// its grant, an event derived by the poll (with its wait when the
	// counters can tell it: not when the grant came between their read and
	// the list's).
	for holder, grant := false, false; !holder || !grant; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("stream ended")
			}
			var v lockview.Lock
			holder = holder || strings.HasPrefix(l, "data: ") && json.Unmarshal([]byte(l[6:]), &v) == nil &&
				v.Name == "pay" && len(v.Holders) == 1 && v.Holders[0].Ref == "job-1"
			grant = grant || strings.HasPrefix(l, `data: {"type":"acquired","lock":"pay"`) && strings.Contains(l, `"ref":"job-1","kind":"job"`) &&
				strings.Contains(l, `"seen":"poll"`)
		case <-time.After(10 * time.Second):
			t.Fatal("the stream did not show the other node's holder and grant in 10 s")
		}
	}

	get := func(path string) (int, string) {
		t.Helper()
		r, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	if code, body := get("/api/locks/pay"); code != 200 || !strings.Contains(body, `"ref":"job-1"`) {
		t.Fatalf("GET /api/locks/pay: %d %s", code, body)
	}
	if code, body := get("/api/locks/nope"); code != 404 || !strings.Contains(body, `"error"`) {
		t.Fatalf("GET /api/locks/nope: %d %s", code, body)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, `sleeplock_running{lock="pay"} 1`) || !strings.Contains(body, `sleeplock_slots{lock="pay"} 2`) {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	// The counters' endpoint answers from the same Locks.Stats: on
	// PostgreSQL too, the gauges and the grant the store counted.
	if code, body := get("/api/stats"); code != 200 || !strings.Contains(body, `"name":"pay"`) || !strings.Contains(body, `"running":1`) ||
		!strings.Contains(body, `"acquisitions":1`) {
		t.Fatalf("GET /api/stats: %d %s", code, body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("healthz %d", code)
	}

	post := func(tok string) int { return releaseJob1(t, base, tok) }
	if code := post("nope"); code != 401 {
		t.Fatalf("release with a wrong token: %d", code)
	}
	if held, err := lease.Held(bg); err != nil || !held {
		t.Fatalf("after a refused release: held %v %v", held, err)
	}
	if code := post(token); code != 200 {
		t.Fatalf("release: %d", code)
	}
	if held, err := lease.Held(bg); err != nil || held {
		t.Fatalf("after the release: held %v %v", held, err)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("exit %d after SIGTERM: %s", code, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop within 10 s of SIGTERM")
	}
	for range lines { // the stream was closed by the server
	}
	log := errOut.String()
	if !strings.Contains(log, "released") || !strings.Contains(log, "missing or wrong token") || !strings.Contains(log, "shutting down") {
		t.Fatalf("log:\n%s", log)
	}
}

// releaseJob1 asks serve at base to release job-1's hold of pay with the
// bearer token tok, and returns the status.
func releaseJob1(t *testing.T, base, tok string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/api/locks/pay/release?ref=job-1", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	return r.StatusCode
}

// syncBuf is a strings.Builder safe for concurrent use.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeNewTokenFile: --new-token-file writes a new random token,
// readable by its owner alone, and serves with it; it never overwrites a
// file, and is a usage error without --allow-release or with
// --token-file.
func TestServeNewTokenFile(t *testing.T) {
	t.Setenv("SLEEPLOCK_SERVE_TOKEN", "")
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "locks.db")
	path := filepath.Join(dir, "token")
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan string, 1)
	exited := make(chan int, 1)
	errOut := &syncBuf{}
	go func() {
		exited <- Main(ctx, []string{"serve", "--store", db, "--addr", "127.0.0.1:0", "--allow-release", "--new-token-file", path},
			&lineWriter{first: first}, errOut)
	}()
	var base string
	select {
	case line := <-first:
		base = strings.TrimSuffix(strings.TrimPrefix(line, "serving the locks on "), "/")
	case code := <-exited:
		t.Fatalf("serve exited %d: %s", code, errOut.String())
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	if fi.Mode().Perm() != 0o600 || len(token) != 32 || strings.Trim(token, "0123456789abcdef") != "" {
		t.Fatalf("token file %v %q", fi.Mode(), b)
	}
	post := func(tok string) int { return releaseJob1(t, base, tok) }
	if code := post(token + "x"); code != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", code)
	}
	if code := post(token); code != http.StatusNotFound { // past the token: no lock pay
		t.Fatalf("the new token: %d", code)
	}
	cancel()
	if code := <-exited; code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}

	for _, args := range [][]string{
		{"serve", "--store", db, "--allow-release", "--new-token-file", path}, // exists
		{"serve", "--store", db, "--new-token-file", filepath.Join(dir, "t2")},
		{"serve", "--store", db, "--allow-release", "--new-token-file", filepath.Join(dir, "t3"), "--token-file", path},
	} {
		if _, errOut, code := run(t, args...); code != 2 || !strings.Contains(errOut, "new-token-file") {
			t.Errorf("%q: exit %d %q", args, code, errOut)
		}
	}
	if b2, _ := os.ReadFile(path); string(b2) != string(b) {
		t.Fatal("the token file was overwritten")
	}
	for _, f := range []string{"t2", "t3"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s written by a refused command line", f)
		}
	}
}
