package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/cmd/sleeplock/internal/web"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/promevents"
	"github.com/sleeplock/sleeplock/store"
)

var _ = register("serve", "serve the locks over HTTP: JSON API, live page, /metrics", runServe)

func runServe(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("serve", errOut, "[flags]")
	sf := addStoreFlags(fs, errOut)
	sf.warnings(fs, "quiet: no warnings about the store's configuration (a Redis that keeps nothing on disk) on stderr, only errors")
	addr := fs.String("addr", "127.0.0.1:7070", "`ADDR` to listen on (loopback by default: the API shows holder refs)")
	allow := fs.Bool("allow-release", false, "allow POST /api/locks/NAME/release?ref=REF with the bearer token")
	tokenFile := fs.String("token-file", "", "`FILE` holding the bearer token for release; without it the token is the value of $"+serveTokenEnv)
	newToken := fs.String("new-token-file", "", "write a new random bearer token for release to `FILE` (created, mode 0600; never overwritten) and use it")
	poll := duration(fs, "poll", web.DefaultPoll, "while a page or stream is open, how often to read the store's locks and counters, to show what other processes do")
	var elections []string
	fs.Func("election", "report the election `NAME` in /metrics (terms and takeovers); may be repeated", func(name string) error {
		if err := store.CheckName(name); err != nil {
			return err
		}
		elections = append(elections, name)
		return nil
	})
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	if *poll <= 0 {
		return usagef("--poll %v: want a positive duration", *poll)
	}
	token, err := serveToken(*allow, *tokenFile, *newToken)
	if err != nil {
		return err
	}
	s, err := sf.open(ctx)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(errOut, nil))
	hub := web.NewHub()
	locks := sleeplock.New(s, sleeplock.WithNotifier(hub))
	defer func() { _ = locks.Close() }()
	return serveLocks(ctx, locks, hub, serveConfig{
		addr: *addr, allowRelease: *allow, token: token, poll: *poll, logger: logger, out: out, elections: elections,
	})
}

// serveTokenEnv holds serve's bearer token itself (not a path). It is not
// SLEEPLOCK_TOKEN, the fencing token sleeplock run gives its command.
const serveTokenEnv = "SLEEPLOCK_SERVE_TOKEN"

func init() {
	extraHelp["serve"] = `Other processes sharing the store (SQLite, PostgreSQL) show on the page
too: each --poll, while a page is open, serve reads the store's holders,
queues and counters, and derives their grants, waits and ended holds;
holds shorter than the poll are counted, not named, and their refused
tries are not listed.

A release token is at least 16 random bytes. Make one with
  sleeplock serve --allow-release --new-token-file ~/.sleeplock-serve-token
(it writes a new token to the file, readable by you alone, and serves),
then restart with --token-file ~/.sleeplock-serve-token to keep it; or
  (umask 077; openssl rand -hex 16 > FILE)
`
}

// serveToken reads the release token: required with --allow-release,
// refused without it (a token that does nothing is a mistake). newFile,
// when given, is created with a new random token.
func serveToken(allow bool, file, newFile string) (string, error) {
	token := os.Getenv(serveTokenEnv)
	switch {
	case file != "" && newFile != "":
		return "", usagef("--token-file and --new-token-file: give one")
	case newFile != "" && !allow:
		return "", usagef("--new-token-file is only used with --allow-release")
	case newFile != "":
		return newTokenFile(newFile)
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading --token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return "", usagef("--token-file %s is empty", file)
		}
	}
	switch {
	case allow && token == "":
		return "", usagef("--allow-release needs a token: --token-file FILE, or the token itself in $" + serveTokenEnv)
	case !allow && file != "":
		return "", usagef("--token-file is only used with --allow-release")
	case allow && len(token) < 16:
		return "", usagef("the release token is %d bytes: use at least 16 random bytes", len(token))
	}
	return token, nil
}

// newTokenFile writes a new random token (32 hex digits) to path, which
// must not exist, readable by its owner alone.
func newTokenFile(path string) (string, error) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand: never fails
	token := hex.EncodeToString(b[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return "", usagef("--new-token-file %s exists: use --token-file %s to keep its token, or remove it", path, path)
	}
	if err != nil {
		return "", fmt.Errorf("--new-token-file: %w", err)
	}
	_, err = fmt.Fprintln(f, token)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("--new-token-file: %w", err)
	}
	return token, nil
}

// shownAddr is the address to print: the host given (0.0.0.0 stays
// 0.0.0.0, not the listener's [::]) with the port listened on (":0"
// picks one).
func shownAddr(given string, got net.Addr) string {
	host, _, err := net.SplitHostPort(given)
	_, port, err2 := net.SplitHostPort(got.String())
	if err != nil || err2 != nil || host == "" {
		return got.String()
	}
	return net.JoinHostPort(host, port)
}

type serveConfig struct {
	addr         string
	allowRelease bool
	token        string
	poll         time.Duration
	logger       *slog.Logger
	out          io.Writer
	ready        func(addr string) // tests: called once listening
	elections    []string          // reported in /metrics (promevents.WithElections)
}

// serveLocks serves locks until ctx ends, then closes the streams and
// waits for the requests in flight (5 s at most).
func serveLocks(ctx context.Context, locks *sleeplock.Locks, hub *web.Hub, c serveConfig) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(promevents.New(locks, promevents.WithElections(c.elections...)))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "sleeplock", Subsystem: "serve", Name: "stream_dropped_total",
		Help: "Messages dropped for event streams that fell behind.",
	}, func() float64 { return float64(hub.Dropped()) }))
	poll := c.poll
	if _, mem := locks.Store().(*memstore.Store); mem {
		poll = 0 // every change comes through this process's events
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	loopback := false
	if host, _, err := net.SplitHostPort(ln.Addr().String()); err == nil {
		ip := net.ParseIP(host)
		loopback = ip != nil && ip.IsLoopback()
	}
	if !loopback {
		c.logger.Warn("sleeplock serve: listening beyond loopback: anyone who can reach it sees the locks and their holders", "addr", ln.Addr().String())
	}
	srv, err := web.New(web.Config{
		Locks: locks, Hub: hub, Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Poll: poll, AllowRelease: c.allowRelease, Token: c.token, Logger: c.logger,
		LocalOnly: loopback,
	})
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer srv.Close()
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	hs.RegisterOnShutdown(srv.Close) // ends the event streams, which Shutdown would wait for
	shown := shownAddr(c.addr, ln.Addr())
	fmt.Fprintf(c.out, "serving the locks on http://%s/\n", shown)
	if c.ready != nil {
		c.ready(shown)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	c.logger.Info("sleeplock serve: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = hs.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
