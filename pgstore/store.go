package pgstore

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sleeplock/sleeplock/internal/endwatch"
	"github.com/sleeplock/sleeplock/store"
)

// Store keeps sleeplock's locks in PostgreSQL tables shared by every node
// that uses the same database and schema. It implements store.Store,
// store.Guarder and store.StatsReader. Its methods are safe for concurrent use.
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
	// refusals: this process's refused tries (Stats).
	refusals refusals
}

var (
	_ store.Store   = (*Store)(nil)
	_ store.Guarder = (*Store)(nil)
	_ store.Watcher = (*Store)(nil)
)

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

func (s *Store) check(ctx context.Context) error {
	if ctx == nil {
		return store.Invalid(store.ErrInvalidConfig, "nil", "a context is needed")
	}
	if s == nil || s.c == nil {
		return store.Invalid(store.ErrInvalidConfig, "nil", "a pgstore.Store must be made by New, NewSQL or Open")
	}
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

func emit(ev store.Emitter, e store.Event) {
	if ev != nil {
		switch e.Type {
		case store.EventAcquired, store.EventReleased, store.EventWaiting, store.EventRefused, store.EventExpired:
			if e.Weight == 0 {
				e.Weight = 1 // a row of a statement that knows no weight (a hold in the lock's row)
			}
		}
		ev.Emit(e)
	}
}
