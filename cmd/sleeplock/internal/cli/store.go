package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/redisstore"
	"github.com/sleeplock/sleeplock/sqlitestore"
	"github.com/sleeplock/sleeplock/store"
)

// storeFlags are the flags that choose a store.
type storeFlags struct {
	dsn    *string
	schema *string
	prefix *string   // Redis: --prefix, another name of --schema
	errOut io.Writer // the command's error output: warnings about the store
	// warn prints what is wrong with the store's configuration (a Redis
	// that keeps nothing on disk): only the commands where it is
	// actionable set it (migrate, state, serve), so that a run from cron
	// does not mail it every time.
	warn  bool
	quiet *bool // -q: no warnings either
}

// warnings makes the command print what is wrong with the store's
// configuration, unless -q (which it adds, with usage) is given.
func (f *storeFlags) warnings(fs *flag.FlagSet, usage string) {
	f.warn = true
	f.quiet = fs.Bool("q", false, usage)
}

func addStoreFlags(fs *flag.FlagSet, errOut io.Writer) storeFlags {
	return storeFlags{
		dsn: fs.String("store", "", "the `STORE`: sqlite:PATH, postgres://…, host=… dbname=… or redis://… "+
			"(default $SLEEPLOCK_STORE, else this user's sqlite:$XDG_STATE_HOME/sleeplock/locks.db); "+
			"connecting gives up after 10s without an answer unless the DSN sets connect_timeout (PostgreSQL) or dial_timeout (Redis)"),
		schema: fs.String("schema", pgstore.DefaultSchema, "PostgreSQL `SCHEMA` of sleeplock's tables (Redis: its keys start with SCHEMA:, as --prefix)"),
		prefix: fs.String("prefix", "", "Redis: sleeplock's keys start with `PREFIX`: (default sleeplock; --schema sets it too)"),
		errOut: errOut,
	}
}

// storeKind says which store a target names.
type storeKind int

const (
	sqliteStore storeKind = iota + 1
	postgresStore
	redisStore
)

// keyValueDSN matches the start of a libpq key=value connection string.
var keyValueDSN = regexp.MustCompile(`^\s*[A-Za-z_]+\s*=`)

// target returns the store the flags name: its kind and its DSN (for
// SQLite, the file's path). With neither --store nor SLEEPLOCK_STORE it is
// the SQLite file in the user's state directory, whose directory is made
// if missing.
func (f storeFlags) target() (storeKind, string, error) {
	kind, dsn, err := f.where()
	if err == nil && kind == sqliteStore && f.schema != nil && *f.schema != pgstore.DefaultSchema {
		return 0, "", usagef("--schema %s: a SQLite store has no schema (its file is the store: --store sqlite:PATH)", *f.schema)
	}
	if err != nil || f.prefix == nil || *f.prefix == "" {
		return kind, dsn, err
	}
	switch {
	case kind == sqliteStore:
		return 0, "", usagef("--prefix %s: the key prefix is for Redis stores (a SQLite store is its file: --store sqlite:PATH)", *f.prefix)
	case kind != redisStore:
		return 0, "", usagef("--prefix %s: the key prefix is for Redis stores (PostgreSQL's tables are in --schema)", *f.prefix)
	case *f.schema != pgstore.DefaultSchema && *f.schema != *f.prefix:
		return 0, "", usagef("--prefix %s and --schema %s differ: for Redis they are one setting, the keys' prefix; give one", *f.prefix, *f.schema)
	}
	*f.schema = *f.prefix
	return kind, dsn, nil
}

// where is target before --prefix is checked.
func (f storeFlags) where() (storeKind, string, error) {
	dsn := *f.dsn
	if dsn == "" {
		dsn = os.Getenv("SLEEPLOCK_STORE")
	}
	switch {
	case dsn == "":
		path, err := defaultSQLitePath()
		if err != nil {
			return 0, "", err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return 0, "", fmt.Errorf("%w: cannot make the default store's directory: %w", store.ErrInvalidConfig, err)
		}
		return sqliteStore, path, nil
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite:"), "//")
		if path == "" {
			return 0, "", usagef("store %q names no file: want sqlite:PATH", dsn)
		}
		if rest, ok := strings.CutPrefix(path, "~/"); ok {
			home, err := os.UserHomeDir()
			if err != nil {
				return 0, "", fmt.Errorf("%w: cannot expand ~: %w", store.ErrInvalidConfig, err)
			}
			path = filepath.Join(home, rest)
		}
		return sqliteStore, path, nil
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"), keyValueDSN.MatchString(dsn):
		return postgresStore, dsn, nil
	case strings.HasPrefix(dsn, "redis://"), strings.HasPrefix(dsn, "rediss://"):
		return redisStore, dsn, nil
	default:
		return 0, "", unknownStore(dsn)
	}
}

// freedAtDeath reports whether the store gives a dead holder's slot back
// at once, not after its lease's TTL: SQLite, which finds the holder's
// process gone.
func (f storeFlags) freedAtDeath() bool {
	kind, _, err := f.target()
	return err == nil && kind == sqliteStore
}

// knownStores are the stores this build opens, as --store spells them.
var knownStores = []string{"sqlite:PATH", "postgres://… (or postgresql://…, or host=… dbname=…)", "redis://… (or rediss://…)"}

// urlScheme matches the scheme of a URL-like DSN ("mysql://…").
var urlScheme = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*):`)

// unknownStore is the error of a --store this build cannot open: a
// scheme it does not know is named as such, never as a URL it could not
// parse.
func unknownStore(dsn string) error {
	known := strings.Join(knownStores, ", ")
	if m := urlScheme.FindStringSubmatch(dsn); m != nil {
		return usagef("store %q: scheme %q is not a store this build knows; it knows %s", redactDSN(dsn), m[1], known)
	}
	return usagef("unknown store %q: want %s", redactDSN(dsn), known)
}

// defaultSQLitePath is $XDG_STATE_HOME/sleeplock/locks.db, else
// ~/.local/state/sleeplock/locks.db.
func defaultSQLitePath() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "sleeplock", "locks.db"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("%w: no home directory for the default store (give --store or set SLEEPLOCK_STORE): %w",
			store.ErrInvalidConfig, err)
	}
	return filepath.Join(home, ".local", "state", "sleeplock", "locks.db"), nil
}

// open opens the store named by the flags.
func (f storeFlags) open(ctx context.Context) (store.Store, error) {
	return f.openGuarded(ctx, nil)
}

// openGuarded opens the store named by the flags; on SQLite, which gives a
// dead holder's slot back at once, the holds it grants are kept while the
// process group of the guard that gs holds at the grant lives
// (sqlitestore.WithProcessGroup): a command of run or elect keeps its slot
// until it is gone, even when sleeplock is killed first.
func (f storeFlags) openGuarded(ctx context.Context, gs *guardSlot) (store.Store, error) {
	kind, dsn, err := f.target()
	if err != nil {
		return nil, err
	}
	switch kind {
	case sqliteStore:
		var opts []sqlitestore.Option
		if gs != nil {
			opts = append(opts, sqlitestore.WithProcessGroup(gs.pgid))
		}
		s, err := sqlitestore.Open(ctx, dsn, opts...)
		if err != nil {
			return nil, err
		}
		return s, nil
	case redisStore:
		return f.openRedis(ctx, dsn)
	}
	bounded, addr, d := pgConnectTimeout(dsn)
	s, err := pgstore.Open(ctx, bounded, pgstore.WithSchema(*f.schema))
	if err != nil {
		return nil, f.migrateHint(pgNoAnswer(ctx, err, dsn, addr, d))
	}
	return s, nil
}

// defaultConnectTimeout bounds how long a command waits for the server
// of a PostgreSQL or Redis store to answer while it connects, unless the
// store's DSN sets a bound of its own (PostgreSQL: connect_timeout, or
// PGCONNECT_TIMEOUT; Redis: dial_timeout). Without it a server that
// accepts connections but never answers (or a rediss:// URL of a server
// without TLS) holds a command for a minute or more, or for ever. Only
// connecting is bounded: run still waits for its lock as long as it is
// told.
const defaultConnectTimeout = 10 * time.Second

// pgConnectTimeout returns dsn with connect_timeout=10 (in seconds:
// defaultConnectTimeout) when neither it nor PGCONNECT_TIMEOUT sets a
// connect timeout, the address of its (first) server, and the timeout
// that bounds each attempt to connect (0: none). A DSN that does not
// parse is returned as it is, for pgstore to report.
func pgConnectTimeout(dsn string) (string, string, time.Duration) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return dsn, "", 0
	}
	addr := net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	if strings.HasPrefix(cfg.Host, "/") {
		addr = cfg.Host // a Unix socket's directory
	}
	if cfg.ConnectTimeout != 0 {
		return dsn, addr, cfg.ConnectTimeout
	}
	param := fmt.Sprintf("connect_timeout=%d", int(defaultConnectTimeout/time.Second))
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " " + param, addr, defaultConnectTimeout // key=value
	}
	// Appended to the raw URL, not through net/url, which refuses the
	// host list of a multi-host URL ("postgres://a:5432,b:5432/db").
	rest, frag, hasFrag := strings.Cut(dsn, "#")
	sep := "?"
	if strings.Contains(rest, "?") {
		sep = "&"
	}
	bounded := rest + sep + param
	if hasFrag {
		bounded += "#" + frag
	}
	return bounded, addr, defaultConnectTimeout
}

// pgNoAnswer tells err, pgx's error of a connection that timed out while
// the command's own context had not ended, as the server's not answering
// within d, and how to change d; other errors are returned as they are.
func pgNoAnswer(ctx context.Context, err error, dsn, addr string, d time.Duration) error {
	if d <= 0 || ctx.Err() != nil || !pgconn.Timeout(err) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &cliError{fmt.Sprintf("store %s: no answer from %s within %s "+
		"(the connect timeout, per attempt: set connect_timeout=SECONDS in the DSN to change it)", redactDSN(dsn), addr, d), err}
}

// redisConnectTimeout returns what bounds opening the Redis store of url:
// its dial_timeout when it sets one (none if it disables it),
// else defaultConnectTimeout. go-redis's own timeouts do not bound it: it
// dials five times per call, each within dial_timeout (5 s by default),
// and opening makes several calls.
func redisConnectTimeout(url string) (time.Duration, string, bool) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return 0, "", false // redisstore.Open reports it
	}
	d := defaultConnectTimeout
	switch {
	case o.DialTimeout > 0:
		d = o.DialTimeout
	case o.DialTimeout < 0:
		d = 0
	}
	return d, o.Addr, o.TLSConfig != nil
}

// migrateHint gives pgstore's error of a schema to migrate the --schema
// that was given in the command it names ("sleeplock migrate --schema
// X"), unless it is the default one.
func (f storeFlags) migrateHint(err error) error {
	var se *pgstore.SchemaError
	if *f.schema == pgstore.DefaultSchema || !errors.As(err, &se) {
		return err
	}
	return &cliError{strings.ReplaceAll(err.Error(), "`sleeplock migrate`", "`sleeplock migrate --schema "+shellQuote(*f.schema)+"`"), err}
}

var _ = register("migrate", "create or upgrade the store's tables", runMigrate)

func runMigrate(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("migrate", errOut, "[flags]")
	sf := addStoreFlags(fs, errOut)
	sf.warnings(fs, "quiet: print nothing but errors")
	unlogged := fs.Bool("unlogged", false, "PostgreSQL: make the lease and queue tables UNLOGGED: faster, but leases vanish if the database crashes or fails over")
	logged := fs.Bool("logged", false, "PostgreSQL: make UNLOGGED lease and queue tables logged (durable) again; with neither flag they stay as they are")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	if *unlogged && *logged {
		return usagef("--logged and --unlogged contradict each other: give one")
	}
	kind, dsn, err := sf.target()
	if err != nil {
		return err
	}
	if kind == redisStore {
		if *unlogged || *logged {
			return usagef("--unlogged and --logged are for PostgreSQL stores")
		}
		s, err := sf.openRedis(ctx, dsn)
		if err != nil {
			return err
		}
		defer func() { _ = s.Close() }()
		if !*sf.quiet {
			fmt.Fprintf(out, "Redis keys %s*: nothing to migrate\n", s.Prefix())
		}
		return nil
	}
	if kind == sqliteStore {
		if *unlogged || *logged {
			return usagef("--unlogged and --logged are for PostgreSQL stores")
		}
		v, err := sqlitestore.Migrate(ctx, dsn)
		if err != nil {
			return err
		}
		if !*sf.quiet {
			fmt.Fprintf(out, "SQLite database %s is at schema version %d\n", dsn, v)
		}
		return nil
	}
	bounded, addr, d := pgConnectTimeout(dsn)
	cfg, err := pgxpool.ParseConfig(bounded)
	if err != nil {
		return fmt.Errorf("%w: the store's DSN does not parse", store.ErrInvalidConfig)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return pgNoAnswer(ctx, err, dsn, addr, d)
	}
	opts := []pgstore.Option{pgstore.WithSchema(*sf.schema)}
	switch {
	case *unlogged:
		opts = append(opts, pgstore.WithUnlogged())
	case *logged:
		opts = append(opts, pgstore.WithLogged())
	}
	if err := pgstore.Migrate(ctx, pool, opts...); err != nil {
		return err
	}
	s, err := pgstore.New(ctx, pool, pgstore.WithSchema(*sf.schema), pgstore.WithoutListen())
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	mode, err := tablesMode(ctx, s)
	if err != nil {
		return err
	}
	if !*sf.quiet {
		fmt.Fprintf(out, "schema %q is at version %d, %s\n", *sf.schema, pgstore.SchemaVersion, mode)
	}
	return nil
}

// tablesMode says whether a PostgreSQL schema's lease and queue tables
// are logged or UNLOGGED, and what that means.
func tablesMode(ctx context.Context, s *pgstore.Store) (string, error) {
	unlogged, err := s.Unlogged(ctx)
	switch {
	case err != nil:
		return "", err
	case unlogged:
		return "tables UNLOGGED: leases and waiters vanish if PostgreSQL crashes or fails over " +
			"(fencing tokens never repeat); \"sleeplock migrate --logged\" makes them durable", nil
	}
	return "tables logged: leases survive a crash of PostgreSQL", nil
}

// noteTablesMode prints on errOut the mode of a PostgreSQL schema's tables
// (tablesMode), a note about the store's configuration: stdout keeps the
// table alone, for a script to read.
func noteTablesMode(ctx context.Context, s store.Store, errOut io.Writer) error {
	ps, ok := s.(*pgstore.Store)
	if !ok {
		return nil
	}
	mode, err := tablesMode(ctx, ps)
	if err != nil {
		return err
	}
	fmt.Fprintf(errOut, "sleeplock: schema %q: %s\n", ps.Schema(), mode)
	return nil
}

// openRedis opens a Redis store (its keys start with "SCHEMA:" when
// --schema is given) and, when f.warn, prints what Open found wrong with
// the server's settings.
func (f storeFlags) openRedis(ctx context.Context, dsn string) (*redisstore.Store, error) {
	var opts []redisstore.Option
	if *f.schema != pgstore.DefaultSchema {
		opts = append(opts, redisstore.WithPrefix(*f.schema+":"))
	}
	d, addr, tls := redisConnectTimeout(dsn)
	octx := ctx
	if d > 0 {
		var cancel context.CancelFunc
		octx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	s, err := redisstore.Open(octx, dsn, opts...)
	if err != nil {
		return nil, redisNoAnswer(ctx, octx, err, dsn, addr, d, tls)
	}
	if f.warn && !*f.quiet {
		for _, w := range s.Warnings() {
			fmt.Fprintln(f.errOut, "sleeplock: warning:", w)
		}
	}
	return s, nil
}

// redisNoAnswer tells err, redisstore.Open's error, as the server's not
// answering when opening took the whole of d (octx ended, the command's
// ctx did not) or a read or dial timed out; other errors are returned as
// they are.
func redisNoAnswer(ctx, octx context.Context, err error, dsn, addr string, d time.Duration, tls bool) error {
	var ne net.Error
	timedOut := errors.As(err, &ne) && ne.Timeout()
	if ctx.Err() != nil || octx.Err() == nil && !timedOut {
		return err
	}
	msg := fmt.Sprintf("store %s: no answer from %s", redactDSN(dsn), addr)
	if octx.Err() != nil {
		msg += fmt.Sprintf(" within %s (the connect timeout: set dial_timeout=DURATION in the URL to change it)", d)
	} else {
		msg += ": " + err.Error()
	}
	if tls {
		msg += "; rediss:// speaks TLS: is the server's port a TLS port? (redis:// for one without)"
	}
	return &cliError{msg, err}
}

// redactDSN hides a password in a DSN (URL or key=value).
func redactDSN(dsn string) string {
	if i := strings.Index(dsn, "://"); i >= 0 {
		if at := strings.Index(dsn[i+3:], "@"); at >= 0 {
			cred := dsn[i+3 : i+3+at]
			if c := strings.Index(cred, ":"); c >= 0 {
				return dsn[:i+3] + cred[:c] + ":xxxxx" + dsn[i+3+at:]
			}
		}
	}
	return passwordKV.ReplaceAllString(dsn, "${1}xxxxx")
}

var passwordKV = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)
