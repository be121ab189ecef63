package pgstore

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/internal/options"
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
	// A head checks sooner when it is notified, when a lease that blocks
	// it may expire, and when the store's heartbeat finds a node that
	// stopped renewing (whose waiters ahead it must pass): the pause is
	// a safety net, not how a head learns of a change.
	DefaultListenPoll = 5 * time.Second
)

// Option configures New, NewSQL, Open, Migrate and MigrateSQL.
type Option func(*config)

type config struct {
	schema    string
	poll      time.Duration
	waiterTTL time.Duration
	tables    tableMode
	listen    listenMode
	listenDSN string
	options.Errs
}

// tableMode is what Migrate makes of the lease and queue tables.
type tableMode uint8

const (
	tablesAsTheyAre tableMode = iota // logged when created; otherwise left as they are
	tablesUnlogged                   // WithUnlogged
	tablesLogged                     // WithLogged
)

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
		if _, err := pgx.ParseConfig(dsn); err != nil {
			c.Fail(store.Invalid(store.ErrInvalidConfig, "listen DSN", "cannot be parsed: "+redactDSN(err.Error(), dsn)))
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
		c.Fail(checkSchema(name))
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
		c.Fail(options.Positive("a poll interval", d))
		c.poll = d
	}
}

// WithWaiterTTL sets the lease of a waiter's place in the queue (default
// 1s, at least 100ms): each store renews the leases of its waiters at 60 %
// of it (a beat every fifth of it sends the renewal), so the waiters of a
// node that died or paused stop blocking others after this long (and a paused node's waiters queue
// again at the back when it resumes).
func WithWaiterTTL(d time.Duration) Option {
	return func(c *config) {
		c.Fail(options.AtLeast("a waiter TTL", d, 100*time.Millisecond))
		c.waiterTTL = d
	}
}

// WithUnlogged makes Migrate create the lease and queue tables UNLOGGED (or
// turn existing ones UNLOGGED). Grants and releases then skip the WAL and
// its fsync, several times faster, but every lease and waiter vanishes when
// the database crashes or fails over to a replica. Definitions and the
// fencing-token sequence stay durable (logged), so tokens never repeat,
// also across a crash. WithLogged undoes it; a Migrate with neither leaves
// the tables as they are, and Store.Unlogged tells which they are. New
// ignores it: the tables are what Migrate made them.
func WithUnlogged() Option { return func(c *config) { c.setTables(tablesUnlogged, "WithUnlogged") } }

// WithLogged makes Migrate turn the lease and queue tables back to logged
// (durable) tables if WithUnlogged made them UNLOGGED: leases then survive
// a crash of the database. Each table is rewritten under an exclusive lock,
// so the store's calls wait for it. New ignores it.
func WithLogged() Option { return func(c *config) { c.setTables(tablesLogged, "WithLogged") } }

// setTables records what Migrate makes of the tables; asking both is an
// error that names the two options.
func (c *config) setTables(m tableMode, name string) {
	if c.tables != tablesAsTheyAre && c.tables != m {
		c.Fail(store.Invalid(store.ErrInvalidConfig, name, "WithLogged and WithUnlogged contradict each other"))
	}
	c.tables = m
}

func newConfig(opts []Option) (config, error) {
	c := config{schema: DefaultSchema, poll: DefaultPollInterval, waiterTTL: DefaultWaiterTTL}
	err := options.Apply(&c, &c.Errs, opts)
	return c, err
}
