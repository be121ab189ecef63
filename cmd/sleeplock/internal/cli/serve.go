package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
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
)

var _ = register("serve", "serve the locks over HTTP: JSON API, live page, /metrics", runServe)

func runServe(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("serve", errOut, "[flags]")
	sf := addStoreFlags(fs)
	addr := fs.String("addr", "127.0.0.1:7070", "address to listen on (loopback by default: the API shows holder refs)")
	allow := fs.Bool("allow-release", false, "allow POST /api/locks/NAME/release?ref=REF with the bearer token")
	tokenFile := fs.String("token-file", "", "`FILE` holding the bearer token for release; without it the token is the value of $"+serveTokenEnv)
	poll := fs.Duration("poll", time.Second, "how often to diff the store's locks, to show changes made by other processes")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	if *poll <= 0 {
		return usagef("--poll %v: want a positive duration", *poll)
	}
	token, err := serveToken(*allow, *tokenFile)
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
		addr: *addr, allowRelease: *allow, token: token, poll: *poll, logger: logger, out: out,
	})
}

// serveTokenEnv holds serve's bearer token itself (not a path). It is not
// SLEEPLOCK_TOKEN, the fencing token sleeplock run gives its command.
const serveTokenEnv = "SLEEPLOCK_SERVE_TOKEN"

// serveToken reads the release token: required with --allow-release,
// refused without it (a token that does nothing is a mistake).
func serveToken(allow bool, file string) (string, error) {
	token := os.Getenv(serveTokenEnv)
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
}

// serveLocks serves locks until ctx ends, then closes the streams and
// waits for the requests in flight (5 s at most).
func serveLocks(ctx context.Context, locks *sleeplock.Locks, hub *web.Hub, c serveConfig) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(promevents.New(locks))
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
