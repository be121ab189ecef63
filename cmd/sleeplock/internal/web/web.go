// Package web is the HTTP side of `sleeplock serve`: the JSON API of the
// locks, a Server-Sent Events stream of their changes, /metrics, /healthz
// and a live page embedded in the binary (no CDN, works offline).
package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/cmd/sleeplock/internal/lockview"
	"github.com/sleeplock/sleeplock/store"
)

//go:embed static
var staticFiles embed.FS

// DefaultPoll is serve's Config.Poll unless told otherwise: another
// process's change shows on the page within it.
const DefaultPoll = 500 * time.Millisecond

// Config configures a Server.
type Config struct {
	// Locks are the locks served. Required.
	Locks *sleeplock.Locks
	// Hub delivers the events of Locks to the streams; give the same Hub
	// to sleeplock.WithNotifier. Required.
	Hub *Hub
	// Metrics serves GET /metrics; nil: 404.
	Metrics http.Handler
	// Poll is the period of the List diff that finds changes made by other
	// processes sharing the store (database stores), and derives their
	// events; it reads the store only while a stream is open. 0: no diff
	// (memory).
	Poll time.Duration
	// Refresh is how long lock changes are gathered before their new
	// states are sent to the streams (default 100 ms).
	Refresh time.Duration
	// AllowRelease enables POST /api/locks/{name}/release?ref=REF, with
	// Token as the bearer token (required then).
	AllowRelease bool
	Token        string
	// Logger logs every operator action and refused request (default
	// slog.Default()).
	Logger *slog.Logger
	// LocalOnly refuses requests whose Host is not an IP address or
	// "localhost": on a loopback address, this stops a web site whose name
	// resolves to 127.0.0.1 (DNS rebinding) from reading the locks.
	LocalOnly bool
}

// Server serves the locks of a Config. Close it to end its streams.
type Server struct {
	cfg   Config
	mux   *http.ServeMux
	token [32]byte
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup

	mu   sync.Mutex
	seen map[string]string // lock → fingerprint of the state last sent or polled

	counters bool       // the store keeps counters (store.StatsReader)
	pollMu   sync.Mutex // one poll at a time
	watch    watch      // what the last poll saw (under pollMu)
}

// New returns a Server and starts its refresh (and poll) goroutines.
func New(cfg Config) (*Server, error) {
	if cfg.Locks == nil || cfg.Hub == nil {
		return nil, errors.New("web: Config needs Locks and Hub")
	}
	if cfg.AllowRelease && cfg.Token == "" {
		return nil, errors.New("web: AllowRelease needs a Token")
	}
	if cfg.Poll < 0 || cfg.Refresh < 0 {
		return nil, errors.New("web: Poll and Refresh must not be negative")
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = 100 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), done: make(chan struct{}), seen: map[string]string{}}
	_, s.counters = cfg.Locks.Store().(store.StatsReader)
	if cfg.Poll > 0 {
		cfg.Hub.track()
	}
	s.token = sha256.Sum256([]byte(cfg.Token))
	static, _ := fs.Sub(staticFiles, "static")
	s.mux.Handle("GET /", http.FileServerFS(static))
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /api/locks", s.list)
	s.mux.HandleFunc("GET /api/stats", s.stats)
	s.mux.HandleFunc("GET /api/locks/{name...}", s.one)
	s.mux.HandleFunc("POST /api/locks/{name...}", s.release)
	s.mux.HandleFunc("GET /api/events", s.events)
	s.mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if cfg.Metrics == nil {
			fail(w, http.StatusNotFound, "metrics are not enabled")
			return
		}
		cfg.Metrics.ServeHTTP(w, r)
	})
	s.wg.Add(1)
	go s.refresh()
	if cfg.Poll > 0 {
		s.wg.Add(1)
		go s.poll()
	}
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cfg.LocalOnly && !localHost(r.Host) {
		fail(w, http.StatusMisdirectedRequest, "this server answers only to an IP address or localhost")
		return
	}
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	// The page loads nothing from elsewhere, and no other site may frame it.
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
	s.mux.ServeHTTP(w, r)
}

// localHost reports whether host (with or without a port) is an IP
// address or localhost.
func localHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return net.ParseIP(host) != nil || strings.EqualFold(host, "localhost")
}

// Close ends the event streams and the Server's goroutines. It does not
// close the Locks.
func (s *Server) Close() {
	s.once.Do(func() { close(s.done) })
	s.wg.Wait()
}

// fail writes a JSON error.
func fail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": msg, "status": status})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// storeFail maps a store error to a status.
func storeFail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, sleeplock.ErrInvalid):
		fail(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, sleeplock.ErrNotFound):
		fail(w, http.StatusNotFound, err.Error())
	case errors.Is(err, sleeplock.ErrNotHeld):
		fail(w, http.StatusConflict, err.Error())
	case errors.Is(err, sleeplock.ErrClosed), errors.Is(err, context.DeadlineExceeded):
		fail(w, http.StatusServiceUnavailable, err.Error())
	default:
		fail(w, http.StatusInternalServerError, err.Error())
	}
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	// Any answer from the store, "not found" included, shows it is up.
	_, err := s.cfg.Locks.State(ctx, "sleeplock-healthz")
	if err != nil && !errors.Is(err, sleeplock.ErrNotFound) {
		fail(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// maxLimit is the most locks one GET /api/locks returns with a limit.
const maxLimit = 10_000

// list serves GET /api/locks[?prefix=P][&after=NAME][&limit=N]: the locks
// sorted by name, as `sleeplock state --json` prints them. With a limit
// and more locks left, the header Sleeplock-Next holds the after value of
// the next page; Sleeplock-Total is the number of locks matching prefix.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "prefix" && k != "after" && k != "limit" {
			fail(w, http.StatusBadRequest, fmt.Sprintf("unknown query parameter %q: want prefix, after or limit", k))
			return
		}
	}
	prefix, after := q.Get("prefix"), q.Get("after")
	for _, p := range []struct{ name, v string }{{"prefix", prefix}, {"after", after}} {
		if len(p.v) > store.MaxNameBytes {
			fail(w, http.StatusBadRequest, fmt.Sprintf("%s is %d bytes: at most %d", p.name, len(p.v), store.MaxNameBytes))
			return
		}
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			fail(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want a whole number from 1 to %d", v, maxLimit))
			return
		}
		limit = n
	}
	states, err := s.cfg.Locks.List(r.Context())
	if err != nil {
		storeFail(w, err)
		return
	}
	var page []store.State
	total := 0
	next := ""
	for _, st := range states {
		if !strings.HasPrefix(st.Name, prefix) {
			continue
		}
		total++
		if after != "" && st.Name <= after {
			continue
		}
		if limit > 0 && len(page) == limit {
			next = page[len(page)-1].Name
			continue
		}
		page = append(page, st)
	}
	w.Header().Set("Sleeplock-Total", strconv.Itoa(total))
	if next != "" {
		w.Header().Set("Sleeplock-Next", next)
	}
	writeJSON(w, http.StatusOK, lockview.All(page))
}

// stats serves GET /api/stats: the counters of every lock and family
// (Locks.Stats), as `sleeplock state --stats --json` prints them and as
// /metrics reports them.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.Query()) > 0 {
		fail(w, http.StatusBadRequest, "/api/stats takes no query parameters")
		return
	}
	all, err := s.cfg.Locks.Stats(r.Context())
	if err != nil {
		storeFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, lockview.StatsOf(all))
}

// lockName returns the validated lock name of the request's path, or
// writes a 400.
func lockName(w http.ResponseWriter, name string) bool {
	if err := store.CheckDefinition(name, 1); err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return false
	}
	return true
}

// one serves GET /api/locks/{name}: one lock (or family definition).
func (s *Server) one(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if strings.HasSuffix(name, "/release") {
		w.Header().Set("Allow", http.MethodPost)
		fail(w, http.StatusMethodNotAllowed, "release is POST /api/locks/{name}/release?ref=REF")
		return
	}
	if len(r.URL.Query()) > 0 {
		fail(w, http.StatusBadRequest, "GET /api/locks/{name} takes no query parameters")
		return
	}
	if !lockName(w, name) {
		return
	}
	st, err := s.cfg.Locks.StateDetail(r.Context(), name)
	if err != nil {
		storeFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, lockview.Of(st))
}

// release serves POST /api/locks/{name}/release?ref=REF.
func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	path := r.PathValue("name")
	name, ok := strings.CutSuffix(path, "/release")
	log := s.cfg.Logger.With("action", "release", "remote", r.RemoteAddr, "lock", name)
	if !ok {
		fail(w, http.StatusNotFound, "POST only to /api/locks/{name}/release")
		return
	}
	if !s.cfg.AllowRelease {
		log.Warn("sleeplock serve: release refused: not enabled")
		fail(w, http.StatusForbidden, "release is disabled: start serve with --allow-release")
		return
	}
	if !s.authorized(r) {
		log.Warn("sleeplock serve: release refused: missing or wrong token")
		w.Header().Set("WWW-Authenticate", `Bearer realm="sleeplock"`)
		fail(w, http.StatusUnauthorized, "missing or wrong bearer token")
		return
	}
	q := r.URL.Query()
	for k := range q {
		if k != "ref" {
			fail(w, http.StatusBadRequest, fmt.Sprintf("unknown query parameter %q: want ref", k))
			return
		}
	}
	ref := q.Get("ref")
	if ref == "" {
		fail(w, http.StatusBadRequest, "give the holder's ref: ?ref=REF")
		return
	}
	if err := store.CheckName(name); err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := store.CheckRef("ref", ref); err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	log = log.With("ref", ref)
	// Ask for the lock first, so that an unknown one is a 404 on every store.
	_, err := s.cfg.Locks.State(r.Context(), name)
	var lease sleeplock.Lease
	if err == nil {
		lease, err = s.cfg.Locks.LeaseOf(ref, []string{name})
	}
	if err == nil {
		err = lease.Release(r.Context())
	}
	if err != nil {
		log.Warn("sleeplock serve: release failed", "err", err)
		storeFail(w, err)
		return
	}
	log.Info("sleeplock serve: released")
	writeJSON(w, http.StatusOK, map[string]string{"released": ref, "lock": name})
}

// authorized compares the bearer token in constant time (hashes of equal
// length, so not even the token's length leaks).
func (s *Server) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	got := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(got[:], s.token[:]) == 1
}
