package pgstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// conn is what the store needs of a database: the same SQL runs through a
// pgx pool or a database/sql handle. Arguments are strings, int64s, bools
// and nils only; results are scanned into *string, *int64, *int32, *bool,
// *sql.NullString and *usTime (a timestamptz, which pgx and database/sql's
// PostgreSQL drivers give as a time.Time), which every driver supports.
type conn interface {
	// query runs sql and calls each for every row.
	query(ctx context.Context, sql string, args []any, each func(scan func(dest ...any) error) error) error
	// exec runs sql (several statements when args is empty).
	exec(ctx context.Context, sql string, args ...any) error
	// inTx runs f in a transaction, committed when f returns nil.
	inTx(ctx context.Context, f func(c conn) error) error
}

// pgxQuerier is what *pgxpool.Pool, *pgx.Conn and pgx.Tx have in common.
type pgxQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}

type pgxConn struct{ q pgxQuerier }

var _ pgxQuerier = (*pgxpool.Pool)(nil)

func (c pgxConn) query(ctx context.Context, sql string, args []any, each func(scan func(dest ...any) error) error) error {
	rows, err := c.q.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (c pgxConn) exec(ctx context.Context, sql string, args ...any) error {
	_, err := c.q.Exec(ctx, sql, args...)
	return err
}

func (c pgxConn) inTx(ctx context.Context, f func(c conn) error) error {
	tx, err := c.q.Begin(ctx)
	if err != nil {
		return err
	}
	if err := f(pgxConn{tx}); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	return tx.Commit(ctx)
}

// sqlQuerier is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type sqlQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

type sqlConn struct {
	q  sqlQuerier
	db *sql.DB // nil inside a transaction
}

func (c sqlConn) query(ctx context.Context, q string, args []any, each func(scan func(dest ...any) error) error) error {
	rows, err := c.q.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		if err := each(rows.Scan); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}

func (c sqlConn) exec(ctx context.Context, q string, args ...any) error {
	_, err := c.q.ExecContext(ctx, q, args...)
	return err
}

func (c sqlConn) inTx(ctx context.Context, f func(c conn) error) error {
	if c.db == nil {
		return errors.New("pgstore: nested transaction")
	}
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(sqlConn{q: tx}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
