package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/pgstore"
)

// A turn of a chat agent: the chat's and the user's locks all or nothing,
// and the turn's answer written only while the turn still holds them.
func Example_guard() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := pgstore.Migrate(ctx, pool); err != nil { // or: sleeplock migrate
		log.Fatal(err)
	}
	st, err := pgstore.New(ctx, pool)
	if err != nil {
		log.Fatal(err)
	}
	locks := sleeplock.New(st, sleeplock.WithTTL(10*time.Minute))
	defer locks.Close()
	_ = locks.Define(ctx, "chat/*", 1)
	_ = locks.Define(ctx, "user/*", 1)

	lease, err := locks.AcquireAll(ctx, []string{"chat/42", "user/7"},
		sleeplock.Ref("turn-1"), sleeplock.Kind("turn"), sleeplock.NoWait())
	var busy *sleeplock.BusyError
	if errors.As(err, &busy) {
		fmt.Printf("%s is busy with a %s\n", busy.Lock, busy.Kind)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)

	// … the turn runs …

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := lease.Guard(ctx, tx); err != nil {
			return err // taken over: write nothing
		}
		_, err := tx.Exec(ctx, "INSERT INTO messages (chat, body, token) VALUES ($1, $2, $3)",
			42, "the answer", lease.Token())
		return err
	})
	if errors.Is(err, sleeplock.ErrLeaseLost) {
		fmt.Println("the turn lost its locks; its answer was not written")
	}
}

// A program that opens its store from a DSN migrates from the same DSN,
// with no pool of its own (or run `sleeplock migrate` once).
func ExampleMigrateDSN() {
	ctx := context.Background()
	dsn := "postgres://localhost/app"
	if err := pgstore.MigrateDSN(ctx, dsn); err != nil {
		log.Fatal(err)
	}
	st, err := pgstore.Open(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	locks := sleeplock.New(st)
	defer locks.Close()
}

// UNLOGGED tables for speed, and back to durable ones: Migrate with
// WithUnlogged, then with WithLogged; Unlogged says which they are.
func ExampleWithLogged() {
	ctx := context.Background()
	dsn := "postgres://localhost/app"
	// Fast, but every lease vanishes if PostgreSQL crashes (tokens never
	// repeat): sleeplock migrate --unlogged.
	if err := pgstore.MigrateDSN(ctx, dsn, pgstore.WithUnlogged()); err != nil {
		log.Fatal(err)
	}
	// Durable again: sleeplock migrate --logged.
	if err := pgstore.MigrateDSN(ctx, dsn, pgstore.WithLogged()); err != nil {
		log.Fatal(err)
	}
	st, err := pgstore.Open(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if unlogged, err := st.Unlogged(ctx); err == nil && !unlogged {
		fmt.Println("leases survive a crash of PostgreSQL")
	}
}
