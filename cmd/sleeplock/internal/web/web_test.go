package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/cmd/sleeplock/internal/lockview"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/store"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(otherProcessEnv); path != "" {
		os.Exit(otherProcess(path))
	}
	goleak.VerifyTestMain(m)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

const testToken = "0123456789abcdef-token"

// env is a Server on a memory store, served by httptest.
type env struct {
	locks *sleeplock.Locks
	hub   *Hub
	srv   *Server
	http  *httptest.Server
	log   *bytes.Buffer
}

func newEnv(t testing.TB, cfg Config) *env {
	t.Helper()
	return newEnvOn(t, memstore.New(), cfg)
}

func newEnvOn(t testing.TB, st store.Store, cfg Config) *env {
	t.Helper()
	e := &env{hub: NewHub(), log: &bytes.Buffer{}}
	e.locks = sleeplock.New(st, sleeplock.WithNotifier(e.hub))
	cfg.Locks, cfg.Hub = e.locks, e.hub
	cfg.Logger = slog.New(slog.NewTextHandler(&syncWriter{w: e.log}, nil))
	if cfg.Refresh == 0 {
		cfg.Refresh = 5 * time.Millisecond
	}
	srv, err := New(cfg)
	must(t, err)
	e.srv = srv
	e.http = httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Close()
		e.http.Close()
		_ = e.locks.Close()
	})
	return e
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// do sends a request and returns the status, headers and body.
func (e *env) do(t testing.TB, method, path, token string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.http.URL+path, nil)
	must(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := e.http.Client().Do(req)
	must(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	must(t, err)
	return res.StatusCode, res.Header, b
}

// TestLocksJSON: GET /api/locks and /api/locks/{name} answer the JSON of
// `state --json` (lockview) of the store's states.
func TestLocksJSON(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{})
	must(t, e.locks.Define(ctx, "pay", 2))
	must(t, e.locks.Define(ctx, "chat/*", 1))
	_, err := e.locks.Acquire(ctx, "pay", sleeplock.Ref("job-1"), sleeplock.Kind("job"))
	must(t, err)
	_, err = e.locks.Acquire(ctx, "chat/42", sleeplock.Ref("turn-9"), sleeplock.Kind("turn"))
	must(t, err)

	code, _, body := e.do(t, "GET", "/api/locks", "")
	if code != 200 {
		t.Fatalf("GET /api/locks: %d %s", code, body)
	}
	var got []lockview.Lock
	must(t, json.Unmarshal(body, &got))
	states, err := e.locks.List(ctx)
	must(t, err)
	want := lockview.All(states)
	for i := range got {
		got[i].Now, want[i].Now = "", ""
		clearClocks(&got[i])
		clearClocks(&want[i])
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GET /api/locks\n got %+v\nwant %+v", got, want)
	}
	if len(got) != 3 || got[0].Name != "chat/*" || got[1].Name != "chat/42" || got[1].Holders[0].Kind != "turn" {
		t.Fatalf("locks %+v", got)
	}

	for _, path := range []string{"/api/locks/chat/42", "/api/locks/chat%2F42"} {
		code, _, body = e.do(t, "GET", path, "")
		var one lockview.Lock
		if code != 200 || json.Unmarshal(body, &one) != nil || one.Name != "chat/42" || one.Holders[0].Ref != "turn-9" || one.Holders[0].AgeMS == nil {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
	}
}

func clearClocks(l *lockview.Lock) {
	for i := range l.Holders {
		l.Holders[i].AgeMS, l.Holders[i].LeftMS = nil, nil
	}
	for i := range l.Queue {
		l.Queue[i].WaitedMS = nil
	}
}

// TestBadRequests: unknown locks are 404 JSON, bad names and parameters
// 400 with the reason; nothing reaches the store unvalidated.
func TestBadRequests(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{AllowRelease: true, Token: testToken})
	must(t, e.locks.Define(ctx, "pay", 1))
	for _, tc := range []struct {
		method, path string
		code         int
		reason       string
	}{
		{"GET", "/api/locks/nope", 404, "lock not found"},
		{"GET", "/api/locks/bad%01name", 400, "control character"},
		{"GET", "/api/locks/" + strings.Repeat("x", 201), 400, "201 bytes"},
		{"GET", "/api/locks/pay?x=1", 400, "no query parameters"},
		{"GET", "/api/locks?limit=0", 400, "limit"},
		{"GET", "/api/locks?limit=abc", 400, "limit"},
		{"GET", "/api/locks?limit=10001", 400, "limit"},
		{"GET", "/api/locks?sort=name", 400, `unknown query parameter "sort"`},
		{"GET", "/api/locks?prefix=" + strings.Repeat("p", 201), 400, "prefix is 201 bytes"},
		{"GET", "/api/events?x=1", 400, `unknown query parameter "x"`},
		{"POST", "/api/locks/pay/release", 400, "give the holder's ref"},
		{"POST", "/api/locks/pay/release?ref=a%02b", 400, "control character"},
		{"POST", "/api/locks/chat/*/release?ref=a", 400, "family pattern"},
		{"POST", "/api/locks/nope/release?ref=a", 404, "lock not found"},
		{"POST", "/api/locks/pay/release?ref=a", 409, "not held"},
		{"POST", "/api/locks/pay/release?ref=a&force=1", 400, `unknown query parameter "force"`},
		{"POST", "/api/locks/pay", 404, "/release"},
	} {
		code, h, body := e.do(t, tc.method, tc.path, testToken)
		var msg struct{ Error string }
		if code != tc.code || h.Get("Content-Type") != "application/json" || json.Unmarshal(body, &msg) != nil || !strings.Contains(msg.Error, tc.reason) {
			t.Errorf("%s %s: %d %q, want %d and %q", tc.method, tc.path, code, body, tc.code, tc.reason)
		}
	}
}

// TestPaging: prefix, after and limit page through 10,000 locks.
func TestPaging(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{})
	for i := range 10_000 {
		must(t, e.locks.Define(ctx, fmt.Sprintf("job/%05d", i), 1))
	}
	must(t, e.locks.Define(ctx, "other", 1))
	seen, after, pages := 0, "", 0
	for {
		q := url.Values{"prefix": {"job/"}, "limit": {"1000"}}
		if after != "" {
			q.Set("after", after)
		}
		code, h, body := e.do(t, "GET", "/api/locks?"+q.Encode(), "")
		var page []lockview.Lock
		if code != 200 || json.Unmarshal(body, &page) != nil {
			t.Fatalf("%d %s", code, body)
		}
		if h.Get("Sleeplock-Total") != "10000" {
			t.Fatalf("total %q", h.Get("Sleeplock-Total"))
		}
		for _, l := range page {
			if want := fmt.Sprintf("job/%05d", seen); l.Name != want {
				t.Fatalf("lock %q, want %q", l.Name, want)
			}
			seen++
		}
		pages++
		if after = h.Get("Sleeplock-Next"); after == "" {
			break
		}
	}
	if seen != 10_000 || pages != 10 {
		t.Fatalf("%d locks in %d pages", seen, pages)
	}
}

// TestRelease: only with AllowRelease and the right bearer token; a
// refused request releases nothing; every action is logged.
func TestRelease(t *testing.T) {
	ctx := context.Background()
	off := newEnv(t, Config{})
	must(t, off.locks.Define(ctx, "pay", 1))
	_, err := off.locks.Acquire(ctx, "pay", sleeplock.Ref("job-1"))
	must(t, err)
	if code, _, _ := off.do(t, "POST", "/api/locks/pay/release?ref=job-1", testToken); code != 403 {
		t.Fatalf("release without AllowRelease: %d, want 403", code)
	}

	e := newEnv(t, Config{AllowRelease: true, Token: testToken})
	must(t, e.locks.Define(ctx, "pay", 1))
	lease, err := e.locks.Acquire(ctx, "pay", sleeplock.Ref("job-1"))
	must(t, err)
	for _, tok := range []string{"", "wrong", testToken + "x", testToken[:len(testToken)-1]} {
		code, h, _ := e.do(t, "POST", "/api/locks/pay/release?ref=job-1", tok)
		if code != 401 || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("token %q: %d, want 401", tok, code)
		}
	}
	if held, err := lease.Held(ctx); err != nil || !held {
		t.Fatalf("after refused releases: held %v, %v", held, err)
	}
	if code, _, body := e.do(t, "POST", "/api/locks/pay/release?ref=job-1", testToken); code != 200 {
		t.Fatalf("release: %d %s", code, body)
	}
	if held, err := lease.Held(ctx); err != nil || held {
		t.Fatalf("after release: held %v, %v", held, err)
	}
	log := e.log.String()
	if strings.Count(log, "missing or wrong token") != 4 || !strings.Contains(log, "released") || !strings.Contains(log, "ref=job-1") {
		t.Fatalf("log:\n%s", log)
	}
	if _, err := New(Config{Locks: e.locks, Hub: e.hub, AllowRelease: true}); err == nil {
		t.Fatal("AllowRelease without a Token accepted")
	}
}

// stream reads a Server-Sent Events stream.
type stream struct {
	res  *http.Response
	msgs chan sse
}

type sse struct{ event, data string }

func (e *env) stream(t testing.TB, query string) *stream {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", e.http.URL+"/api/events"+query, nil)
	must(t, err)
	res, err := e.http.Client().Do(req)
	must(t, err)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /api/events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	s := &stream{res: res, msgs: make(chan sse, 1000)}
	go func() {
		defer close(s.msgs)
		sc := bufio.NewScanner(res.Body)
		var m sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				m.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				m.data = line[6:]
			case line == "" && m.event != "":
				s.msgs <- m
				m = sse{}
			}
		}
	}()
	t.Cleanup(func() { res.Body.Close() })
	return s
}

// next returns the next message for which ok is true.
func (s *stream) next(t testing.TB, ok func(sse) bool) sse {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m, open := <-s.msgs:
			if !open {
				t.Fatal("stream ended")
			}
			if ok(m) {
				return m
			}
		case <-timeout:
			t.Fatal("no such message in 10 s")
		}
	}
}

func lockMsg(name string, cond func(lockview.Lock) bool) func(sse) bool {
	return func(m sse) bool {
		var v lockview.Lock
		return m.event == "lock" && json.Unmarshal([]byte(m.data), &v) == nil && v.Name == name && cond(v)
	}
}

// TestEvents: the stream carries the events and the new state of each
// changed lock, only for locks under its prefix.
func TestEvents(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{})
	must(t, e.locks.Define(ctx, "pay", 1))
	must(t, e.locks.Define(ctx, "other", 1))
	s := e.stream(t, "?prefix=pa")
	s.next(t, func(m sse) bool { return m.event == "hello" })
	_, err := e.locks.Acquire(ctx, "other")
	must(t, err)
	a, err := e.locks.Acquire(ctx, "pay", sleeplock.Ref("job-1"), sleeplock.Kind("job"))
	must(t, err)
	ev := s.next(t, func(m sse) bool { return m.event == "event" && strings.Contains(m.data, `"type":"acquired"`) })
	if !strings.Contains(ev.data, `"lock":"pay"`) || !strings.Contains(ev.data, `"waited_ms":0`) {
		t.Fatalf("event %s", ev.data)
	}
	s.next(t, lockMsg("pay", func(v lockview.Lock) bool { return v.Running == 1 && v.Holders[0].Ref == "job-1" }))
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.locks.Acquire(wctx, "pay", sleeplock.Ref("job-2"))
	}()
	s.next(t, lockMsg("pay", func(v lockview.Lock) bool { return len(v.Queue) == 1 && v.Queue[0].Ref == "job-2" }))
	cancel()
	<-done
	must(t, a.Release(ctx))
	s.next(t, lockMsg("pay", func(v lockview.Lock) bool { return v.Running == 0 && v.Waiting == 0 }))
}

// TestRecentEvents: a new stream gets the recent events first.
func TestRecentEvents(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{})
	must(t, e.locks.Define(ctx, "pay", 1))
	l, err := e.locks.Acquire(ctx, "pay")
	must(t, err)
	must(t, l.Release(ctx))
	e.flush()
	s := e.stream(t, "")
	s.next(t, func(m sse) bool { return m.event == "event" && strings.Contains(m.data, `"type":"released"`) })
}

// flush waits until the events so far have reached the hub.
func (e *env) flush() {
	name := fmt.Sprintf("flush-%d", time.Now().UnixNano())
	_ = e.locks.Define(context.Background(), name, 1)
	for {
		e.hub.mu.Lock()
		found := false
		for _, ev := range e.hub.recent {
			found = found || ev.e.Lock == name
		}
		e.hub.mu.Unlock()
		if found {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// blockingWriter is a ResponseWriter whose writes wait for release: a
// client that reads nothing.
type blockingWriter struct {
	h       http.Header
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
	wrote   chan struct{}
	once    sync.Once
}

func (w *blockingWriter) Header() http.Header { return w.h }
func (w *blockingWriter) WriteHeader(int)     {}
func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.wrote) })
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}
func (w *blockingWriter) Flush() {}

// TestSlowClient: a stream that does not read never blocks event delivery
// (nor the lock path); its lost messages are counted and it is sent a
// "lagged" marker.
func TestSlowClient(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{})
	must(t, e.locks.Define(ctx, "pay", 1))
	w := &blockingWriter{h: http.Header{}, release: make(chan struct{}), wrote: make(chan struct{})}
	rctx, cancel := context.WithCancel(ctx)
	req := httptest.NewRequest("GET", "/api/events", nil).WithContext(rctx)
	served := make(chan struct{})
	go func() {
		defer close(served)
		e.srv.ServeHTTP(w, req)
	}()
	<-w.wrote // subscribed, and stuck writing the first message
	n := 3 * clientBuffer
	for range n {
		e.hub.Notify(sleeplock.Event{Type: sleeplock.EventRefused, Lock: "pay"}) // returns: never blocks
	}
	// Lock operations go on while the stream is stuck.
	for range 100 {
		l, err := e.locks.TryAcquire(ctx, "pay")
		must(t, err)
		must(t, l.Release(ctx))
	}
	if d := e.hub.Dropped(); d < int64(n-clientBuffer) {
		t.Fatalf("dropped %d, want at least %d", d, n-clientBuffer)
	}
	close(w.release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.mu.Lock()
		out := w.buf.String()
		w.mu.Unlock()
		if strings.Contains(out, "event: lagged\ndata: {\"dropped\":") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no lagged marker in %d bytes", len(out))
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-served
}

// TestPoll: changes made by another process sharing the store (here
// another Locks on the same memory store, without this hub) reach the
// stream through the List diff; a family member no longer in use is
// "gone".
func TestPoll(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	e := newEnvOn(t, st, Config{Poll: 10 * time.Millisecond})
	other := sleeplock.New(st)
	must(t, other.Define(ctx, "chat/*", 1))
	s := e.stream(t, "")
	s.next(t, func(m sse) bool { return m.event == "hello" })
	l, err := other.Acquire(ctx, "chat/7", sleeplock.Ref("turn-1"))
	must(t, err)
	s.next(t, lockMsg("chat/7", func(v lockview.Lock) bool { return v.Running == 1 && v.Holders[0].Ref == "turn-1" }))
	must(t, l.Release(ctx))
	// The release shows as an idle lock or, where the store drops family
	// members no longer in use from List, as gone.
	idle := lockMsg("chat/7", func(v lockview.Lock) bool { return v.Running == 0 })
	s.next(t, func(m sse) bool { return idle(m) || m.event == "gone" && m.data == `{"name":"chat/7"}` })
}

// TestDeletedLockIsGone: a lock deleted through the page's own Locks
// (sleeplock delete in the same process, or Locks.Delete) is "gone" on the
// stream at its event, with no poll.
func TestDeletedLockIsGone(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{})
	must(t, e.locks.Define(ctx, "typo", 1))
	s := e.stream(t, "")
	s.next(t, func(m sse) bool { return m.event == "hello" })
	l, err := e.locks.Acquire(ctx, "typo")
	must(t, err)
	must(t, l.Release(ctx))
	s.next(t, lockMsg("typo", func(v lockview.Lock) bool { return v.Running == 0 }))
	if _, err := e.locks.Delete(ctx, "typo"); err != nil {
		t.Fatal(err)
	}
	s.next(t, func(m sse) bool { return m.event == "gone" && m.data == `{"name":"typo"}` })
}

// TestClose: Close ends the open streams.
func TestClose(t *testing.T) {
	e := newEnv(t, Config{})
	s := e.stream(t, "")
	s.next(t, func(m sse) bool { return m.event == "hello" })
	e.srv.Close()
	for range s.msgs {
	}
	if code, _, _ := e.do(t, "GET", "/api/events", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("stream after Close: %d", code)
	}
}

// TestHealthzAndPage: /healthz asks the store; / serves the embedded page,
// which loads nothing from elsewhere.
func TestHealthzAndPage(t *testing.T) {
	e := newEnv(t, Config{})
	if code, _, body := e.do(t, "GET", "/healthz", ""); code != 200 || !strings.Contains(string(body), "ok") {
		t.Fatalf("healthz: %d %s", code, body)
	}
	if code, _, _ := e.do(t, "GET", "/metrics", ""); code != 404 {
		t.Fatalf("metrics without a handler: %d", code)
	}
	for _, p := range []string{"/", "/app.js", "/app.css"} {
		code, _, body := e.do(t, "GET", p, "")
		if code != 200 || len(body) < 100 {
			t.Fatalf("GET %s: %d", p, code)
		}
		if bytes.Contains(body, []byte("http://")) || bytes.Contains(body, []byte("https://")) || bytes.Contains(body, []byte(`src="//`)) {
			t.Errorf("%s refers to another site", p)
		}
	}
	must(t, e.locks.Close())
	if code, _, _ := e.do(t, "GET", "/healthz", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("healthz on a closed store: %d", code)
	}
}

// TestLocalOnly: with LocalOnly, a request naming another host (DNS
// rebinding) is refused; an IP address or localhost is served.
func TestLocalOnly(t *testing.T) {
	e := newEnv(t, Config{LocalOnly: true})
	for host, want := range map[string]int{
		"evil.example:7070": http.StatusMisdirectedRequest, "evil.example": http.StatusMisdirectedRequest,
		"localhost:7070": 200, "127.0.0.1:7070": 200, "[::1]:7070": 200,
	} {
		req, err := http.NewRequest("GET", e.http.URL+"/api/locks", nil)
		must(t, err)
		req.Host = host
		res, err := e.http.Client().Do(req)
		must(t, err)
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, res.StatusCode, want)
		}
	}
}

// TestManyChanges: when many locks change at once, each changed lock's new
// state still reaches the stream (read with one List).
func TestManyChanges(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{Refresh: 50 * time.Millisecond})
	must(t, e.locks.Define(ctx, "job/*", 1))
	s := e.stream(t, "")
	s.next(t, func(m sse) bool { return m.event == "hello" })
	want := map[string]bool{}
	for i := range 3 * manyDirty {
		name := fmt.Sprintf("job/%d", i)
		_, err := e.locks.Acquire(ctx, name, sleeplock.Ref("r"))
		must(t, err)
		want[name] = true
	}
	for len(want) > 0 {
		m := s.next(t, func(m sse) bool { return m.event == "lock" })
		var v lockview.Lock
		must(t, json.Unmarshal([]byte(m.data), &v))
		if v.Running == 1 && v.Holders[0].Ref == "r" {
			delete(want, v.Name)
		}
	}
}

// A GET on the release URL is 405 with Allow: POST, not a 400 about the
// name.
func TestReleaseURLIsPostOnly(t *testing.T) {
	e := newEnv(t, Config{AllowRelease: true, Token: testToken})
	must(t, e.locks.Define(context.Background(), "pay", 1))
	code, h, body := e.do(t, "GET", "/api/locks/pay/release?ref=job-1", testToken)
	if code != http.StatusMethodNotAllowed || h.Get("Allow") != "POST" {
		t.Fatalf("GET release: %d, Allow %q, %s; want 405 and Allow: POST", code, h.Get("Allow"), body)
	}
}
