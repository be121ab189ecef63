package pgstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sleeplock/sleeplock/store"
)

// The schema is two things: numbered DDL migrations (tables, sequences,
// indexes, views), applied once each and never edited once released, and
// the functions (sql/*.sql, one definition of each), applied with CREATE OR
// REPLACE at every Migrate.
var (
	//go:embed migrations/*.sql
	migrationFS embed.FS
	//go:embed sql/*.sql
	functionFS embed.FS
)

// migration is one numbered file of migrations/.
type migration struct {
	version  int
	name     string
	sql      string
	checksum string // sha256 of the file, hex (migrations/migrations.sum)
}

func checksum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
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
		out = append(out, migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(b), checksum: checksum(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			panic("pgstore: migrations are not numbered 1, 2, …")
		}
	}
	return out
}()

// functionFile is one file of sql/: function definitions of one concern.
type functionFile struct {
	name string
	sql  string
}

// functionFiles are the embedded function files, sorted by name, and
// fingerprint is a hash of them all: the schema records the fingerprint of
// the functions it has, and New refuses another.
var functionFiles, fingerprint = func() ([]functionFile, string) {
	files, err := fs.Glob(functionFS, "sql/*.sql")
	if err != nil {
		panic(err)
	}
	sort.Strings(files)
	h := sha256.New()
	var out []functionFile
	for _, f := range files {
		b, err := functionFS.ReadFile(f)
		if err != nil {
			panic(err)
		}
		out = append(out, functionFile{name: f, sql: string(b)})
		h.Write([]byte(f + "\x00"))
		h.Write(b)
		h.Write([]byte{0})
	}
	return out, hex.EncodeToString(h.Sum(nil))
}()

// SchemaVersion is the number of the last DDL migration this build has:
// the version of the tables it creates and uses.
var SchemaVersion = len(migrations)

// bodyTag delimits function bodies in the SQL files; a schema name may not
// contain it.
const bodyTag = "$sleeplock$"

// unloggedTables are the tables that WithUnlogged makes UNLOGGED (and
// WithLogged logged again). The sequences, whose tokens must never repeat,
// and the definitions are never among them.
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

// render fills in the placeholders of a migration or function file.
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
// "sleeplock") in pool's database, in one transaction: it applies the DDL
// migrations the schema lacks, then this build's functions, and drops
// the schema's functions that this build does not define. It is safe to
// run from several nodes at once (they take turns on a transaction-scoped
// advisory lock). With WithUnlogged the lease and queue tables are created
// UNLOGGED (or made so), with WithLogged they are made logged again; with
// neither they are left as they are.
//
// A schema whose applied migrations differ from this build's is refused
// with a *ChecksumError, and one made by a newer build with a *SchemaError.
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
	return migrate(ctx, pgxConn{pool}, cfg)
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
	return migrate(ctx, sqlConn{q: db, db: db}, cfg)
}

// MigrateDSN is Migrate for the database named by dsn (a postgres:// URL
// or key=value string, as Open takes): it opens one connection, migrates
// and closes it, so a program that uses Open needs no pool of its own.
func MigrateDSN(ctx context.Context, dsn string, opts ...Option) error {
	if ctx == nil {
		return store.Invalid(store.ErrInvalidConfig, "nil", "pgstore.MigrateDSN needs a context")
	}
	if dsn == "" {
		return store.Invalid(store.ErrInvalidConfig, `""`, "pgstore.MigrateDSN needs a DSN")
	}
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return store.Invalid(store.ErrInvalidConfig, "DSN", "cannot be parsed: "+redactDSN(err.Error(), dsn))
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return err
	}
	c, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("pgstore: migrate schema %q: %w", cfg.schema, unreachable(err))
	}
	defer func() { _ = c.Close(context.WithoutCancel(ctx)) }()
	return migrate(ctx, pgxConn{c}, cfg)
}

// migrate brings the schema to this build's migrations and functions.
func migrate(ctx context.Context, c conn, cfg config) error {
	ident := quoteIdent(cfg.schema)
	h := fnv.New64a()
	h.Write([]byte("sleeplock migrate\x00" + cfg.schema))
	key := int64(h.Sum64())
	err := c.inTx(ctx, func(tx conn) error {
		if err := tx.exec(ctx, "SELECT pg_advisory_xact_lock($1::bigint)", key); err != nil {
			return err
		}
		if err := tx.exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+ident); err != nil {
			return err
		}
		if err := tx.exec(ctx, "CREATE TABLE IF NOT EXISTS "+ident+".migrations ("+
			"version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL, "+
			"applied timestamptz NOT NULL DEFAULT clock_timestamp())"); err != nil {
			return err
		}
		if err := tx.exec(ctx, "CREATE TABLE IF NOT EXISTS "+ident+".functions ("+
			"one boolean PRIMARY KEY DEFAULT true CHECK (one), fingerprint text NOT NULL, "+
			"applied timestamptz NOT NULL DEFAULT clock_timestamp())"); err != nil {
			return err
		}
		have, err := appliedMigrations(ctx, tx, cfg.schema)
		if err != nil {
			return err
		}
		for _, m := range migrations[len(have):] {
			if err := tx.exec(ctx, render(m.sql, cfg.schema, cfg.tables == tablesUnlogged)); err != nil {
				return fmt.Errorf("pgstore: migration %s: %w", m.name, err)
			}
			if err := tx.exec(ctx, "INSERT INTO "+ident+".migrations (version, name, checksum) VALUES ($1::integer, $2::text, $3::text)",
				int64(m.version), m.name, m.checksum); err != nil {
				return err
			}
		}
		if cfg.tables != tablesAsTheyAre {
			if err := setPersistence(ctx, tx, ident, cfg.tables == tablesUnlogged); err != nil {
				return err
			}
		}
		return applyFunctions(ctx, tx, cfg.schema)
	})
	if err != nil {
		return fmt.Errorf("pgstore: migrate schema %q: %w", cfg.schema, err)
	}
	return nil
}

// appliedMigrations returns the checksums of the schema's applied
// migrations, checked against this build's.
func appliedMigrations(ctx context.Context, c conn, schema string) ([]string, error) {
	var have []string
	err := c.query(ctx, "SELECT version::bigint, name, checksum FROM "+quoteIdent(schema)+".migrations ORDER BY version", nil,
		func(scan func(...any) error) error {
			var v int64
			var name, sum string
			if err := scan(&v, &name, &sum); err != nil {
				return err
			}
			if int(v) != len(have)+1 || int(v) > len(migrations) {
				return &SchemaError{Schema: schema, Have: int(v), Want: SchemaVersion}
			}
			if m := migrations[v-1]; sum != m.checksum {
				return &ChecksumError{Schema: schema, Version: int(v), Name: name, Have: sum, Want: m.checksum}
			}
			have = append(have, sum)
			return nil
		})
	return have, err
}

// setPersistence makes the lease and queue tables UNLOGGED, or logged
// when unlogged is false; a table already so is left alone.
func setPersistence(ctx context.Context, c conn, ident string, unlogged bool) error {
	want, set := "p", "LOGGED"
	if unlogged {
		want, set = "u", "UNLOGGED"
	}
	for _, t := range unloggedTables {
		var p string
		if err := queryOne(ctx, c, "SELECT relpersistence::text FROM pg_class WHERE oid = to_regclass($1::text)",
			[]any{ident + "." + quoteIdent(t)}, &p); err != nil {
			return err
		}
		if p != want {
			if err := c.exec(ctx, "ALTER TABLE "+ident+"."+quoteIdent(t)+" SET "+set); err != nil {
				return err
			}
		}
	}
	return nil
}

// Unlogged reports whether the lease and queue tables of the store's
// schema are UNLOGGED (WithUnlogged): then every lease and waiter vanishes
// if the database crashes or fails over, while definitions and fencing
// tokens are kept (tokens never repeat). It is true when any of them is,
// as Migrate leaves them all one way.
func (s *Store) Unlogged(ctx context.Context) (bool, error) {
	if err := s.check(ctx); err != nil {
		return false, err
	}
	tables := make([]string, len(unloggedTables))
	for i, t := range unloggedTables {
		tables[i] = quoteIdent(s.cfg.schema) + "." + quoteIdent(t)
	}
	var unlogged bool
	err := queryOne(ctx, s.c, "SELECT coalesce(bool_or(c.relpersistence = 'u'), false) FROM pg_class c "+
		"WHERE c.oid IN (SELECT to_regclass(t) FROM unnest($1::text::text[]) t)", []any{textArray(tables)}, &unlogged)
	if err != nil {
		return false, fmt.Errorf("pgstore: reading the tables of schema %q: %w", s.cfg.schema, err)
	}
	return unlogged, nil
}

// applyFunctions creates or replaces every function of sql/, drops the
// schema's functions that none of the files defines (each CREATE OR
// REPLACE writes its function's catalog row, so the others are those this
// transaction did not write), and records the fingerprint.
func applyFunctions(ctx context.Context, c conn, schema string) error {
	ident := quoteIdent(schema)
	// Bodies are checked when they run: a SQL function may name one
	// defined further on.
	if err := c.exec(ctx, "SET LOCAL check_function_bodies = off"); err != nil {
		return err
	}
	for _, f := range functionFiles {
		if err := c.exec(ctx, render(f.sql, schema, false)); err != nil {
			return fmt.Errorf("pgstore: %s: %w", f.name, err)
		}
	}
	var stale []string
	err := c.query(ctx, "SELECT p.oid::regprocedure::text FROM pg_proc p "+
		"WHERE p.pronamespace = to_regnamespace($1::text) AND p.xmin <> pg_current_xact_id()::xid", []any{ident},
		func(scan func(...any) error) error {
			var sig string
			if err := scan(&sig); err != nil {
				return err
			}
			stale = append(stale, sig)
			return nil
		})
	if err != nil {
		return err
	}
	for _, sig := range stale {
		if err := c.exec(ctx, "DROP FUNCTION "+sig); err != nil {
			return fmt.Errorf("pgstore: dropping %s: %w", sig, err)
		}
	}
	return c.exec(ctx, "INSERT INTO "+ident+".functions (fingerprint) VALUES ($1::text) "+
		"ON CONFLICT (one) DO UPDATE SET fingerprint = excluded.fingerprint, applied = excluded.applied", fingerprint)
}

// checkVersion returns nil when the schema has this build's migrations and
// functions, else an error that says what to do.
func checkVersion(ctx context.Context, c conn, schema string) error {
	ident := quoteIdent(schema)
	var have int64
	var fp string
	err := queryOne(ctx, c, "SELECT coalesce((SELECT max(version) FROM "+ident+".migrations), 0)::bigint, "+
		"coalesce((SELECT fingerprint FROM "+ident+".functions), '')", nil, &have, &fp)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000"):
		return &SchemaError{Schema: schema, Want: SchemaVersion}
	case err != nil:
		return fmt.Errorf("pgstore: checking schema %q: %w", schema, err)
	case int(have) != SchemaVersion:
		return &SchemaError{Schema: schema, Have: int(have), Want: SchemaVersion}
	case fp != fingerprint:
		return &SchemaError{Schema: schema, Have: int(have), Want: SchemaVersion, Functions: true}
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
