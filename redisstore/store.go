package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock/internal/announce"
	"github.com/sleeplock/sleeplock/internal/endwatch"
	"github.com/sleeplock/sleeplock/store"
)

// Store keeps locks in Redis. It implements store.Store and
// store.StatsReader; Guard (store.Guarder) runs a Tx's writes only while
// a lease is held. Make it with New or Open; it is safe for concurrent
// use.
type Store struct {
	c       redis.UniversalClient
	owned   bool // Open made c: Close closes it
	cluster bool // c is a *redis.ClusterClient: see Shard
	cfg     config
	id      string // this node: its waiters' channel and heartbeat
	head    [2]any // the prefix and id, the first arguments of every function, boxed once

	closed  atomic.Bool
	closing chan struct{}
	once    sync.Once
	bg      sync.WaitGroup // listener and heartbeat
	waits   sync.WaitGroup // callers waiting in Acquire

	fastMu sync.Mutex                         // serialises the copies of fast
	fast   atomic.Pointer[map[string]*[2]any] // fastKeys, by root: never nil once New returns
	ttl    atomic.Pointer[boxed]              // the last TTL boxed (see box)
	wttl   any                                // the waiter TTL (µs), boxed once
	skew   atomic.Int64                       // the server's clock less this process's, µs (see reckon)

	refusals sync.Map // definition → *atomic.Uint64: refused tries write nothing

	w     endwatch.Set // watchers of this node's holds
	ann   announce.Set // listeners of announcements (Listen)
	order sync.RWMutex // scripts that change (read) and their events; State, List, Stats (write)

	mu       sync.Mutex
	shut     bool               // Close began: no new waiter
	waiters  map[string]*waiter // by waiter id
	roots    map[string]int     // roots of the waiters: heartbeat there
	warnings []string

	ps    *redis.PubSub
	ready chan struct{} // closed once subscribed
}

// New returns a store on client, a *redis.Client, a *redis.ClusterClient
// or a failover client. It subscribes to its node's channel before it
// returns. The client stays the caller's: Close does not close it. New
// does not check the server's settings (Check and Open do).
func New(ctx context.Context, client redis.UniversalClient, opts ...Option) (*Store, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if client == nil {
		return nil, store.Invalid(store.ErrInvalidConfig, "client", "is nil")
	}
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	s := &Store{c: client, cluster: clustered(client), cfg: cfg, id: hex.EncodeToString(b[:]), closing: make(chan struct{}),
		waiters: map[string]*waiter{}, roots: map[string]int{},
		ready: make(chan struct{})}
	s.head = [2]any{s.cfg.prefix, s.id}
	s.fast.Store(&map[string]*[2]any{})
	s.wttl = micros(s.cfg.waiterTTL)
	if err := client.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	s.ps = client.Subscribe(ctx, s.channel(), s.announceChannel())
	if _, err := s.ps.Receive(ctx); err != nil {
		_ = s.ps.Close()
		return nil, fmt.Errorf("redisstore: subscribe: %w", err)
	}
	s.bg.Add(2)
	go s.listen()
	go s.heartbeat()
	return s, nil
}

// Open connects to the server of url (redis://, rediss:// or unix://, as
// redis.ParseURL reads them), checks its settings (see Check) and returns
// a store on it; Close closes the connection. When the server is a node
// of a Redis Cluster, Open connects to the whole cluster through it (a
// *redis.ClusterClient, the URL read by redis.ParseClusterURL; database
// 0 only) and checks every primary. Open refuses a server whose
// maxmemory-policy is not noeviction (an evicted key drops a lock) or that
// is a replica, with an error matching ErrUnsafeServer, unless
// WithoutSafetyChecks is given; a server that keeps nothing on disk is
// accepted with a warning (Warnings): its locks vanish when it restarts.
// Open connects once before it hands the URL to go-redis: a server that
// refuses the connection, or does not accept it within the URL's
// dial_timeout (5 s by default), is an error at once, with neither
// go-redis's retries nor its log lines. The client Open makes bounds each
// call by its context's deadline too (go-redis's ContextTimeoutEnabled),
// so that a Release given a second returns within it from a server that
// hangs.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, store.Invalid(store.ErrInvalidConfig, "Redis URL", "cannot be parsed: "+err.Error())
	}
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	if err := reach(ctx, o); err != nil {
		return nil, err
	}
	// A call's context bounds it (go-redis's default is to bound a
	// read by ReadTimeout alone, retried): a Release given a second
	// returns within it when the server hangs.
	o.ContextTimeoutEnabled = true
	c, err := dial(ctx, url, o)
	if err != nil {
		return nil, err
	}
	warnings, err := Check(ctx, c)
	if err != nil && (!cfg.unsafe || !errors.Is(err, ErrUnsafeServer)) {
		_ = c.Close()
		return nil, err
	}
	if err != nil {
		warnings = append(warnings, err.Error())
	}
	s, err := New(ctx, c, opts...)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	s.owned, s.warnings = true, warnings
	return s, nil
}

// reach connects to the server of o once and hangs up: a refused
// connection (or one that times out, or an address that does not
// resolve) is an answer, returned at once as an error of ours. go-redis
// would dial it five times per call and call again three times, waiting
// between, for some five seconds in all, and log each failed call
// through its process-wide logger (redis.SetLogger), which is the
// application's to set, not ours.
func reach(ctx context.Context, o *redis.Options) error {
	network := o.Network
	if network == "" {
		network = "tcp"
	}
	d := net.Dialer{Timeout: o.DialTimeout}
	if o.DialTimeout == 0 {
		d.Timeout = 5 * time.Second // go-redis's default
	}
	if o.DialTimeout < 0 {
		d.Timeout = 0
	}
	conn, err := d.DialContext(ctx, network, o.Addr)
	if err != nil {
		return fmt.Errorf("redisstore: cannot connect to the server: %w", err)
	}
	_ = conn.Close()
	return nil
}

var (
	errNilContext = store.Invalid(store.ErrInvalidConfig, "nil", "a context is required")
	errNoStore    = store.Invalid(store.ErrInvalidConfig, "a nil or zero *redisstore.Store", "a Store comes from redisstore.New or Open")
)

// check reports a store or a context that cannot be used.
func (s *Store) check(ctx context.Context) error {
	switch {
	case s == nil || s.c == nil:
		return errNoStore
	case ctx == nil:
		return errNilContext
	}
	return nil
}

// checkHandle reports a handle naming no lock or an invalid name.
func checkHandle(h *store.Handle) error {
	var err error
	h.Each(func(l store.Lock) {
		if err == nil {
			err = store.CheckName(l.Name)
		}
	})
	return err
}

// Warnings returns what Open found wrong with the server's settings
// without refusing it (no persistence; with WithoutSafetyChecks, what it
// would have refused).
func (s *Store) Warnings() []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s.warnings...)
}

// Prefix returns the store's key prefix.
func (s *Store) Prefix() string {
	if s == nil {
		return ""
	}
	return s.cfg.prefix
}

// Client returns the store's Redis client.
func (s *Store) Client() redis.UniversalClient {
	if s == nil {
		return nil
	}
	return s.c
}

func (s *Store) channel() string { return s.cfg.prefix + "node:" + s.id }

// Close implements store.Store: callers waiting in Acquire return
// ErrClosed, and this node's waiters leave the queues before Close
// returns. Leases are not released.
func (s *Store) Close() error {
	if s == nil || s.c == nil {
		return errNoStore
	}
	var err error
	s.once.Do(func() {
		s.mu.Lock()
		s.shut = true
		roots := make([]string, 0, len(s.roots))
		for r := range s.roots {
			roots = append(roots, r)
		}
		s.mu.Unlock()
		close(s.closing)
		s.waits.Wait()
		err = s.leaveRoots(context.Background(), roots)
		s.closed.Store(true)
		_ = s.ps.Close()
		s.bg.Wait()
		if s.owned {
			if cerr := s.c.Close(); err == nil {
				err = cerr
			}
		}
	})
	return err
}

// leaveRoots takes this node's waiters out of the queues of roots.
func (s *Store) leaveRoots(ctx context.Context, roots []string) error {
	if len(roots) == 0 {
		return nil
	}
	calls := make([]call, len(roots))
	for i, r := range roots {
		calls[i] = call{keys: []string{s.rootKey(r, "d")}, args: []any{r}}
	}
	_, err := s.runEach(ctx, fnClose, calls)
	return err
}

var (
	_ store.Store   = (*Store)(nil)
	_ store.Watcher = (*Store)(nil)
)
