package pgstore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sleeplock/sleeplock/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// The statements of the single-lock fast paths (acquire, release, renewal,
// check), with the same placeholders as the migrations.
var (
	//go:embed queries/acquire1.sql
	acquireOneSQL string
	//go:embed queries/release1.sql
	releaseOneSQL string
	//go:embed queries/release1ev.sql
	releaseOneEvSQL string
	//go:embed queries/acquire1ev.sql
	acquireOneEvSQL string
	//go:embed queries/acquire1slow.sql
	acquireSlowSQL string
	//go:embed queries/release1slow.sql
	releaseSlowSQL string
	//go:embed queries/acquireN.sql
	acquireManySQL string
	//go:embed queries/releaseN.sql
	releaseManySQL string
	//go:embed queries/keep.sql
	keepOneSQL string
	//go:embed queries/held.sql
	heldOneSQL string
)

// migration is one numbered file of migrations/.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations are the embedded migrations in version order.
var migrations = func() []migration {
	files, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	var out []migration
	for _, f := range files {
		base := strings.TrimPrefix(f, "migrations/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic("pgstore: migration file without a number: " + f)
		}
		b, err := migrationFS.ReadFile(f)
		if err != nil {
			panic(err)
		}
		out = append(out, migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			panic("pgstore: migrations are not numbered 1, 2, …")
		}
	}
	return out
}()

// SchemaVersion is the schema version this build creates and uses.
var SchemaVersion = len(migrations)

// bodyTag delimits function bodies in the migrations; a schema name may not
// contain it.
const bodyTag = "$sleeplock$"

// tables are the tables that Unlogged makes UNLOGGED.
var unloggedTables = []string{"locks", "holders", "waiters", "queue", "cancelled", "nodes"}

// checkSchema validates a schema name: any text PostgreSQL accepts as an
// identifier (quoted, so quotes and spaces are fine).
func checkSchema(name string) error {
	switch {
	case name == "":
		return store.Invalid(store.ErrInvalidConfig, `""`, "a schema name must not be empty")
	case len(name) > 63:
		return store.Invalid(store.ErrInvalidConfig, strconv.Quote(name), "a schema name must be at most 63 bytes (PostgreSQL would cut it)")
	case strings.ContainsRune(name, 0):
		return store.Invalid(store.ErrInvalidConfig, strconv.Quote(name), "a schema name must not contain NUL")
	case strings.Contains(name, bodyTag):
		return store.Invalid(store.ErrInvalidConfig, strconv.Quote(name), "a schema name must not contain "+bodyTag)
	}
	return nil
}

func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// render fills in a migration's placeholders.
func render(text, schema string, unlogged bool) string {
	ident := quoteIdent(schema)
	u := ""
	if unlogged {
		u = "UNLOGGED"
	}
	return strings.NewReplacer(
		"{{schema}}", ident,
		"{{tokens}}", quoteLiteral(ident+".tokens")+"::regclass",
		"{{tickets}}", quoteLiteral(ident+".tickets")+"::regclass",
		"{{seqs}}", quoteLiteral(ident+".seqs")+"::regclass",
		"{{channel}}", quoteLiteral(channelOf(schema)),
		"{{unlogged}}", u,
	).Replace(text)
}

// Migrate creates or upgrades the sleeplock schema (WithSchema, default
// "sleeplock") in pool's database, in one transaction. It is safe to run
// from several nodes at once (they take turns on a transaction-scoped
// advisory lock) and does nothing when the schema is up to date. With
// Unlogged the lease and queue tables are created UNLOGGED (or made so).
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts ...Option) error {
	if pool == nil {
		return store.Invalid(store.ErrInvalidConfig, "nil", "pgstore.Migrate needs a *pgxpool.Pool")
	}
	if ctx == nil {
		return store.Invalid(store.ErrInvalidConfig, "nil", "pgstore.Migrate needs a context")
	}
	if _, err := poolConfig(pool); err != nil {
		return err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return err
	}
	return migrate(ctx, pgxConn{pool}, cfg, SchemaVersion)
}

// MigrateSQL is Migrate for a database/sql handle of any PostgreSQL driver.
func MigrateSQL(ctx context.Context, db *sql.DB, opts ...Option) error {
	if db == nil {
		return store.Invalid(store.ErrInvalidConfig, "nil", "pgstore.MigrateSQL needs a *sql.DB")
	}
	if ctx == nil {
		return store.Invalid(store.ErrInvalidConfig, "nil", "pgstore.MigrateSQL needs a context")
	}
	if err := checkDB(db); err != nil {
		return err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return err
	}
	return migrate(ctx, sqlConn{q: db, db: db}, cfg, SchemaVersion)
}

// migrate brings the schema up to version upTo (SchemaVersion but in the
// tests of upgrades).
func migrate(ctx context.Context, c conn, cfg config, upTo int) error {
	ident := quoteIdent(cfg.schema)
	h := fnv.New64a()
	h.Write([]byte("sleeplock migrate\x00" + cfg.schema))
	key := int64(h.Sum64())
	err := c.inTx(ctx, func(tx conn) error {
		if err := tx.exec(ctx, "SELECT pg_advisory_xact_lock($1::bigint)", key); err != nil {
			return err
		}
		var exists bool
		if err := queryOne(ctx, tx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1::text)", []any{cfg.schema}, &exists); err != nil {
			return err
		}
		if !exists {
			if err := tx.exec(ctx, "CREATE SCHEMA "+ident); err != nil {
				return err
			}
		}
		if err := tx.exec(ctx, "CREATE TABLE IF NOT EXISTS "+ident+".schema_version ("+
			"version integer PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT clock_timestamp())"); err != nil {
			return err
		}
		var have int64
		if err := queryOne(ctx, tx, "SELECT coalesce(max(version), 0)::bigint FROM "+ident+".schema_version", nil, &have); err != nil {
			return err
		}
		if int(have) > SchemaVersion || upTo > SchemaVersion {
			return &SchemaError{Schema: cfg.schema, Have: int(have), Want: SchemaVersion}
		}
		for _, m := range migrations[min(int(have), upTo):upTo] {
			if err := tx.exec(ctx, render(m.sql, cfg.schema, cfg.unlogged)); err != nil {
				return fmt.Errorf("pgstore: migration %s: %w", m.name, err)
			}
			if err := tx.exec(ctx, "INSERT INTO "+ident+".schema_version (version, name) VALUES ($1::integer, $2::text)",
				int64(m.version), m.name); err != nil {
				return err
			}
		}
		if cfg.unlogged {
			for _, t := range unloggedTables {
				// ('' for a table of a later version than upTo)
				var p string
				if err := queryOne(ctx, tx, "SELECT coalesce((SELECT relpersistence::text FROM pg_class "+
					"WHERE oid = to_regclass($1::text)), '')", []any{ident + "." + quoteIdent(t)}, &p); err != nil {
					return err
				}
				if p != "u" && p != "" {
					if err := tx.exec(ctx, "ALTER TABLE "+ident+"."+quoteIdent(t)+" SET UNLOGGED"); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgstore: migrate schema %q: %w", cfg.schema, err)
	}
	return nil
}

// queryOne scans the single row of a query.
func queryOne(ctx context.Context, c conn, q string, args []any, dest ...any) error {
	found := false
	err := c.query(ctx, q, args, func(scan func(...any) error) error {
		found = true
		return scan(dest...)
	})
	if err == nil && !found {
		err = sql.ErrNoRows
	}
	return err
}
