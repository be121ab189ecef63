package pgstore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sleeplock/sleeplock/internal/endwatch"
	"github.com/sleeplock/sleeplock/store"
)

// Defaults of the options.
const (
	// DefaultSchema is the schema of the tables unless WithSchema names another.
	DefaultSchema = "sleeplock"
	// DefaultPollInterval is the longest pause between two checks of a
	// waiter while the store has no LISTEN connection.
	DefaultPollInterval = 25 * time.Millisecond
	// DefaultWaiterTTL is the lease of a waiter's place in the queue: the
	// waiters of a node that dies or pauses stop blocking others after it.
	DefaultWaiterTTL = time.Second
	// DefaultListenPoll is the longest pause between two checks of a
	// waiter at the head of this node's queue while notifications arrive.
	DefaultListenPoll = 250 * time.Millisecond
)

// Option configures New, NewSQL, Open, Migrate and MigrateSQL.
type Option func(*config)

type config struct {
	schema    string
	poll      time.Duration
	waiterTTL time.Duration
	unlogged  bool
	listen    listenMode
	listenDSN string
	err       error
}

// listenMode says where a store listens for wake-ups.
type listenMode uint8

const (
	listenAuto listenMode = iota // a connection like the pool's (New, Open); none for NewSQL
	listenDSN                    // WithListenDSN
	listenOff                    // WithoutListen
)

// WithListenDSN names the database connection (a postgres:// URL or
// key=value string) on which the store LISTENs for wake-ups of its
// waiters. By default a store made by New or Open opens one connection
// like its pool's; a store made by NewSQL listens only with this option.
// Behind a pooler in transaction mode (PgBouncer), where LISTEN does not
// work, give a DSN that reaches PostgreSQL directly, or use WithoutListen.
func WithListenDSN(dsn string) Option {
	return func(c *config) {
		if _, err := pgx.ParseConfig(dsn); err != nil && c.err == nil {
			c.err = store.Invalid(store.ErrInvalidConfig, "listen DSN", "cannot be parsed: "+redactDSN(err.Error(), dsn))
		}
		c.listen, c.listenDSN = listenDSN, dsn
	}
}

// WithoutListen makes the store's waiters poll (WithPollInterval) instead
// of being woken by notifications: for a pooler in transaction mode when
// no direct connection can be given to WithListenDSN.
func WithoutListen() Option { return func(c *config) { c.listen = listenOff } }

// WithSchema names the PostgreSQL schema of the tables (default
// "sleeplock"). Any name works, quoted as an identifier; it must be 1 to 63
// bytes.
func WithSchema(name string) Option {
	return func(c *config) {
		if err := checkSchema(name); err != nil && c.err == nil {
			c.err = err
		}
		c.schema = name
	}
}

// WithPollInterval sets the longest pause between two checks of a waiting
// Acquire while the store has no LISTEN connection (WithoutListen, NewSQL
// without WithListenDSN, or the listener reconnecting; default 25ms): a
// waiter checks after 1ms, then twice as long each time up to this
// interval. With notifications, waiters check when woken.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 && c.err == nil {
			c.err = store.Invalid(store.ErrInvalidConfig, d.String(), "a poll interval must be positive")
		}
		c.poll = d
	}
}

// WithWaiterTTL sets the lease of a waiter's place in the queue (default
// 1s, at least 100ms): each store renews the leases of its waiters every
// quarter of it, so the waiters of a node that died or paused stop
// blocking others after this long (and a paused node's waiters queue
// again at the back when it resumes).
func WithWaiterTTL(d time.Duration) Option {
	return func(c *config) {
		if d < 100*time.Millisecond && c.err == nil {
			c.err = store.Invalid(store.ErrInvalidConfig, d.String(), "a waiter TTL must be at least 100ms")
		}
		c.waiterTTL = d
	}
}

// Unlogged makes Migrate create the lease and queue tables UNLOGGED (or
// turn existing ones UNLOGGED). Grants and releases then skip the WAL and
// its fsync, several times faster, but every lease and waiter vanishes when
// the database crashes or fails over to a replica. Definitions and the
// fencing-token sequence stay durable, so tokens still only grow. New
// ignores it: the tables are what they were made.
func Unlogged() Option { return func(c *config) { c.unlogged = true } }

func newConfig(opts []Option) (config, error) {
	c := config{schema: DefaultSchema, poll: DefaultPollInterval, waiterTTL: DefaultWaiterTTL}
	for _, o := range opts {
		o(&c)
	}
	if c.err != nil {
		return c, c.err
	}
	return c, nil
}

// Store keeps sleeplock's locks in PostgreSQL tables shared by every node
// that uses the same database and schema. It implements store.Store and
// store.Guarder. Its methods are safe for concurrent use.
type Store struct {
	c      conn
	pool   *pgxpool.Pool // owned by the store (Open), closed by Close
	lcfg   *pgx.ConnConfig
	cfg    config
	q      queries
	closed atomic.Bool
	w      endwatch.Set
	d      dispatcher
	fast   fastHints
}

var (
	_ store.Store   = (*Store)(nil)
	_ store.Guarder = (*Store)(nil)
	_ store.Watcher = (*Store)(nil)
)

// queries are the store's statements, with the schema filled in.
type queries struct {
	release, undo, keep, held, states, define, resize, guard            string
	acquireOne, releaseOne, releaseOneEv, keepOne, heldOne              string
	acquireOneEv, acquireSlow, releaseSlow, acquireMany, releaseMany    string
	advanceHolders, advanceWaiters, undefined, heartbeat, sweep, listen string
	check, nodeDown, dropWaiter, spillHeld, isolation                   string
}

func newQueries(schema string) queries {
	s := quoteIdent(schema)
	seqs := quoteLiteral(s+".seqs") + "::regclass"
	return queries{
		acquireOne:   statement(acquireOneSQL, schema),
		releaseOne:   statement(releaseOneSQL, schema),
		releaseOneEv: statement(releaseOneEvSQL, schema),
		acquireOneEv: statement(acquireOneEvSQL, schema),
		acquireSlow:  statement(acquireSlowSQL, schema),
		releaseSlow:  statement(releaseSlowSQL, schema),
		acquireMany:  statement(acquireManySQL, schema),
		releaseMany:  statement(releaseManySQL, schema),
		keepOne:      statement(keepOneSQL, schema),
		heldOne:      statement(heldOneSQL, schema),
		// A waiter's check: acquire() with its ticket, or the grant a
		// release made on its behalf (migration 004); with no ticket, the
		// first call of an acquisition of several locks or with StaleAfter.
		// acquire()'s event Seq is drawn while the statement holds the
		// lock's row, after reaping the queues (migration 005).
		check: "SELECT * FROM " + s + ".check_one($1::text::text[], $2::text, $3::text, $4::bigint, $5::bigint, " +
			"$6::boolean, $7::boolean, $8::bigint, $9::bigint, $10::bigint, $11::bigint, $12::bigint)",
		// The general release, after taking and spilling the locks' rows
		// (migration 006).
		release: "SELECT b.*, CASE WHEN b.r_ev = 'released' THEN nextval(" + seqs + ") ELSE 0 END FROM " +
			s + ".release($1::text::text[], $2::text::bigint[], $3::text, $4::bigint, $5::boolean) b",
		undo: "SELECT b.*, CASE WHEN b.r_ev = 'released' THEN nextval(" + seqs + ") ELSE 0 END FROM " +
			s + ".undo($1::text::text[], $2::text, $3::bigint) b",
		keep:   "SELECT * FROM " + s + ".keep($1::text::text[], $2::text::bigint[], $3::text, $4::bigint, $5::bigint)",
		held:   "SELECT * FROM " + s + ".held($1::text::text[], $2::text::bigint[], $3::text)",
		states: "SELECT r_name, r_slots, r_family, r_running, r_waiting, r_now, coalesce(r_holders, ''), coalesce(r_queue, '') FROM " + s + ".states($1::text, $2::boolean)",
		define: "SELECT r_created, r_slots, r_running, r_waiting, r_at, coalesce(r_old, 0), " +
			"CASE WHEN r_created THEN nextval(" + seqs + ") ELSE 0 END, " +
			"CASE WHEN r_created AND r_old IS NOT NULL THEN nextval(" + seqs + ") ELSE 0 END FROM " + s + ".define($1::text, $2::integer, $3::boolean)",
		resize: "SELECT r.*, nextval(" + seqs + ") FROM " + s + ".resize($1::text, $2::integer) r",
		// The first name of $1 that no definition covers.
		undefined: "SELECT u FROM unnest($1::text::text[]) WITH ORDINALITY x(u, i) WHERE " + s + ".slots_of(u) IS NULL ORDER BY i LIMIT 1",
		// Waiter leases are soft state: the renewal commits asynchronously
		// (migration 004), so the listener's connection, which runs it
		// between notifications, never waits for a WAL flush. One row per
		// node, plus the waiters of several locks (migration 005).
		heartbeat: "SELECT n FROM (SELECT " + s + ".soft()) x, " +
			s + ".node_beat($1::bigint, $2::bigint, $3::text::bigint[], $4::text::text[], $5::text::text[]) n",
		sweep:    "SELECT (" + s + ".sweep_nodes(64) + " + s + ".sweep(64))::bigint",
		nodeDown: "DELETE FROM " + s + ".nodes WHERE id = $1::bigint",
		// An abandoned acquisition's place in the queue, when its undo
		// failed (migration 005).
		dropWaiter: "SELECT " + s + ".drop_waiter($1::bigint)::bigint",
		listen:     "LISTEN " + quoteIdent(channelOf(schema)),
		// The holds found, locked against release and takeover until the
		// caller's transaction ends; spillHeld first makes a hold in a
		// lock's row a holder row (migration 006).
		guard: "SELECT count(*)::bigint FROM (SELECT 1 FROM " + s + ".holders h " +
			"JOIN unnest($1::text::text[], $2::text::bigint[]) u(l, t) ON h.lock = u.l AND (u.t = 0 OR h.token = u.t) " +
			"WHERE h.ref = $3::text FOR KEY SHARE OF h) s",
		spillHeld: "SELECT " + s + ".spill_held($1::text::text[], $2::text::bigint[], $3::text)",
		isolation: "SELECT current_setting('transaction_isolation')",
		advanceHolders: "WITH h AS (UPDATE " + s + ".holders SET acquired = acquired - $1::bigint * interval '1 microsecond', renewed = renewed - $1::bigint * interval '1 microsecond', expires = expires - $1::bigint * interval '1 microsecond') " +
			"UPDATE " + s + ".locks SET acquired = acquired - $1::bigint * interval '1 microsecond', renewed = renewed - $1::bigint * interval '1 microsecond', expires = expires - $1::bigint * interval '1 microsecond', freed = freed - $1::bigint * interval '1 microsecond', " +
			"xacquired = " + s + ".shift(xacquired, $1::bigint), xrenewed = " + s + ".shift(xrenewed, $1::bigint), " +
			"xexpires = " + s + ".shift(xexpires, $1::bigint) " +
			"WHERE name IN (SELECT name FROM " + s + ".locks WHERE fast FOR UPDATE SKIP LOCKED)",
		advanceWaiters: "UPDATE " + s + ".waiters SET since = since - $1::bigint * interval '1 microsecond'",
	}
}

// New returns a store on pool, whose lifetime stays the caller's. It checks
// that the schema exists at the version this build uses: if not, the error
// matches ErrSchemaMissing and says to run `sleeplock migrate`.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, store.Invalid(store.ErrInvalidConfig, "nil", "pgstore.New needs a *pgxpool.Pool")
	}
	if ctx == nil {
		return nil, store.Invalid(store.ErrInvalidConfig, "nil", "pgstore.New needs a context")
	}
	pc, err := poolConfig(pool)
	if err != nil {
		return nil, err
	}
	return newStore(ctx, pgxConn{pool}, nil, pc.ConnConfig, opts)
}

// NewSQL returns a store on db, a database/sql handle of any PostgreSQL
// driver (for example github.com/jackc/pgx/v5/stdlib or lib/pq). The SQL is
// the same as New's.
func NewSQL(ctx context.Context, db *sql.DB, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, store.Invalid(store.ErrInvalidConfig, "nil", "pgstore.NewSQL needs a *sql.DB")
	}
	if ctx == nil {
		return nil, store.Invalid(store.ErrInvalidConfig, "nil", "pgstore.NewSQL needs a context")
	}
	if err := checkDB(db); err != nil {
		return nil, err
	}
	return newStore(ctx, sqlConn{q: db, db: db}, nil, nil, opts)
}

// poolConfig returns pool's configuration, or an error for a pool that
// pgxpool.New did not make (a zero pgxpool.Pool panics when used).
func poolConfig(pool *pgxpool.Pool) (cfg *pgxpool.Config, err error) {
	defer func() {
		if recover() != nil {
			cfg, err = nil, store.Invalid(store.ErrInvalidConfig, "pool", "not made by pgxpool.New or NewWithConfig")
		}
	}()
	return pool.Config(), nil
}

// checkDB returns an error for a *sql.DB that sql.Open did not make.
func checkDB(db *sql.DB) (err error) {
	defer func() {
		if recover() != nil {
			err = store.Invalid(store.ErrInvalidConfig, "db", "not made by sql.Open or sql.OpenDB")
		}
	}()
	if db.Driver() == nil {
		return store.Invalid(store.ErrInvalidConfig, "db", "not made by sql.Open or sql.OpenDB")
	}
	return nil
}

// Open connects to the database named by dsn (a postgres:// URL or
// key=value string) with a pool of its own, which Close closes. A dsn that
// does not parse is an error matching store.ErrInvalidConfig.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	if ctx == nil {
		return nil, store.Invalid(store.ErrInvalidConfig, "nil", "pgstore.Open needs a context")
	}
	if dsn == "" {
		return nil, store.Invalid(store.ErrInvalidConfig, `""`, "pgstore.Open needs a DSN")
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, store.Invalid(store.ErrInvalidConfig, "DSN", "cannot be parsed: "+redactDSN(err.Error(), dsn))
	}
	ConfigurePool(pc)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	s, err := newStore(ctx, pgxConn{pool}, pool, pc.ConnConfig, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// ConfigurePool sets in cfg what pgstore recommends for a pool it uses
// (Open does it for its own): a context that ends while a statement runs
// sends PostgreSQL a cancel request and waits (up to a second) for the
// statement to stop, instead of dropping the connection and leaving the
// statement running on the server. Either way an abandoned acquisition is
// undone; with the cancel request no grant can land after the undo.
func ConfigurePool(cfg *pgxpool.Config) {
	if cfg == nil || cfg.ConnConfig == nil {
		return
	}
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: time.Second}
	}
}

// newStore makes a store on c; pool is closed by Close (Open's own), and
// poolCfg is the pool's connection configuration (nil for database/sql),
// the default of the LISTEN connection.
func newStore(ctx context.Context, c conn, pool *pgxpool.Pool, poolCfg *pgx.ConnConfig, opts []Option) (*Store, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	s := &Store{c: c, pool: pool, cfg: cfg, q: newQueries(cfg.schema)}
	switch cfg.listen {
	case listenAuto:
		if poolCfg != nil {
			s.lcfg = poolCfg.Copy()
		}
	case listenDSN:
		if s.lcfg, err = pgx.ParseConfig(cfg.listenDSN); err != nil {
			return nil, store.Invalid(store.ErrInvalidConfig, "listen DSN", "cannot be parsed: "+redactDSN(err.Error(), cfg.listenDSN))
		}
	}
	if s.lcfg != nil {
		s.lcfg.Tracer = nil
	}
	s.d.init(s)
	s.fast.init()
	if err := checkVersion(ctx, c, cfg.schema); err != nil {
		return nil, err
	}
	return s, nil
}

// Schema returns the name of the store's schema.
func (s *Store) Schema() string {
	if s == nil {
		return ""
	}
	return s.cfg.schema
}

// Close makes later calls fail with store.ErrClosed, ends the waiting
// Acquire calls with store.ErrClosed after removing their places in the
// queue, stops the listener and closes the pool if Open made it. Leases are
// not released.
func (s *Store) Close() error {
	if s == nil || s.c == nil {
		return store.Invalid(store.ErrInvalidConfig, "nil", "a pgstore.Store must be made by New, NewSQL or Open")
	}
	if s.closed.Swap(true) {
		return nil
	}
	s.d.close()
	if s.pool != nil {
		s.pool.Close()
	}
	return nil
}

// Advance dates every lease and waiter of the store's schema back by d, as
// if d had passed on the database's clock. It is meant for tests (of the
// store or of code that uses it) that must make a TTL pass without
// waiting; it changes nothing else, and waiters' own liveness leases are
// left as they are.
func (s *Store) Advance(ctx context.Context, d time.Duration) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := s.c.exec(ctx, s.q.advanceHolders, micros(d)); err != nil {
		return err
	}
	return s.c.exec(ctx, s.q.advanceWaiters, micros(d))
}

func micros(d time.Duration) int64 { return d.Microseconds() }

// statement renders a query file without its comment lines.
func statement(text, schema string) string {
	var b strings.Builder
	for _, line := range strings.Split(render(text, schema, false), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "--") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// lease returns how long a grant or renewal lasts (the hold when shorter
// than the TTL) and how far its renewal time is dated back.
func lease(ttl, hold time.Duration) (length, back int64) {
	l := ttl
	if hold > 0 && hold < ttl {
		l = hold
	}
	return micros(l), micros(ttl - l)
}

// patterns returns name and the families that could cover it, most
// specific first, as an array literal.
func patterns(name string) string {
	ps := []string{name}
	store.FamilyOf(name, func(p string) bool {
		ps = append(ps, p)
		return true
	})
	return textArray(ps)
}

func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// textArray formats ss as a PostgreSQL array literal.
func textArray(ss []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for j := 0; j < len(s); j++ {
			if s[j] == '"' || s[j] == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(s[j])
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

func intArray(ns []int64) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range ns {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(n, 10))
	}
	b.WriteByte('}')
	return b.String()
}
