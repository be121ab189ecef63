package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/store"
)

// storeFlags are the flags that choose a store.
type storeFlags struct {
	dsn    *string
	schema *string
}

func addStoreFlags(fs *flag.FlagSet) storeFlags {
	return storeFlags{
		dsn:    fs.String("store", "", "the store: postgres://… (default $SLEEPLOCK_STORE)"),
		schema: fs.String("schema", pgstore.DefaultSchema, "PostgreSQL schema of sleeplock's tables"),
	}
}

// target returns the DSN of the store the flags name.
func (f storeFlags) target() (string, error) {
	dsn := *f.dsn
	if dsn == "" {
		dsn = os.Getenv("SLEEPLOCK_STORE")
	}
	switch {
	case dsn == "":
		return "", usagef("no store: give --store postgres://… or set SLEEPLOCK_STORE")
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return dsn, nil
	case strings.HasPrefix(dsn, "sqlite:"):
		return "", fmt.Errorf("%w: the SQLite store is not available yet; use postgres://…", store.ErrUnsupported)
	default:
		return "", usagef("unknown store %q: want postgres://…", redactDSN(dsn))
	}
}

// open opens the store named by the flags.
func (f storeFlags) open(ctx context.Context) (store.Store, error) {
	dsn, err := f.target()
	if err != nil {
		return nil, err
	}
	s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(*f.schema))
	if err != nil {
		return nil, err
	}
	return s, nil
}

var _ = register("migrate", "create or upgrade the store's tables", runMigrate)

func runMigrate(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("migrate", errOut, "[flags]")
	sf := addStoreFlags(fs)
	unlogged := fs.Bool("unlogged", false, "make the lease and queue tables UNLOGGED: faster, but leases vanish if the database crashes or fails over")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	dsn, err := sf.target()
	if err != nil {
		return err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("%w: the store's DSN does not parse", store.ErrInvalidConfig)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	opts := []pgstore.Option{pgstore.WithSchema(*sf.schema)}
	if *unlogged {
		opts = append(opts, pgstore.Unlogged())
	}
	if err := pgstore.Migrate(ctx, pool, opts...); err != nil {
		return err
	}
	fmt.Fprintf(out, "schema %q is at version %d\n", *sf.schema, pgstore.SchemaVersion)
	return nil
}

// redactDSN hides a password in a DSN.
func redactDSN(dsn string) string {
	if i := strings.Index(dsn, "://"); i >= 0 {
		if at := strings.Index(dsn[i+3:], "@"); at >= 0 {
			cred := dsn[i+3 : i+3+at]
			if c := strings.Index(cred, ":"); c >= 0 {
				return dsn[:i+3] + cred[:c] + ":xxxxx" + dsn[i+3+at:]
			}
		}
	}
	return dsn
}
