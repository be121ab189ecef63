// Package pgstore keeps sleeplock's locks in PostgreSQL, shared by every
// node that uses the same database and schema. Leases expire on the
// database's clock, so the clocks of the nodes do not matter.
//
// # Setting up
//
// The tables live in a schema of their own ("sleeplock" unless WithSchema
// names another; any name works, it is quoted). Create or upgrade it with
// the command line tool or from Go, once or on every start-up:
//
//	sleeplock migrate --store postgres://user@host/db
//
//	err := pgstore.Migrate(ctx, pool)           // *pgxpool.Pool
//	err := pgstore.MigrateSQL(ctx, db)          // *sql.DB
//
// Migrations are embedded, numbered (migrations/001_init.sql, …) and
// idempotent, and run in one transaction under a transaction-scoped
// advisory lock, so several nodes may run them at once. New, NewSQL and
// Open check the schema's version and fail with an error matching
// ErrSchemaMissing ("run `sleeplock migrate`") when it is missing or older.
//
// # The schema
//
//   - defs: one row per Define (a lock, or a family "chat/*"). A family
//     member ("chat/42") has no row of its own until it is used.
//   - holders: one row per (lock, holder ref) with kind, fencing token,
//     slot number, re-entrant count, acquired, renewed (dated back by
//     TTL-hold), expires. The slot number (1..slots) is unique per lock, so
//     the database itself never lets a lock have more holders than slots,
//     whichever path granted them.
//   - locks: one row per lock that a slow-path operation (queueing, taking
//     over expired leases, re-entrancy, several locks at once) is working
//     on; those operations lock it, which serialises them per lock (rows in
//     sorted order for several locks). It goes when the lock is idle.
//   - waiters and queue: callers waiting, in ticket order (a global
//     sequence, so waiters for several locks never deadlock), each with a
//     short lease of its own renewed while it polls: the waiters of a dead
//     node leave the queue.
//   - tokens and tickets: sequences, bigint, NO CYCLE: tokens only grow.
//   - cancelled: acquisitions their callers gave up, so a statement still
//     running on the server grants nothing.
//
// The common cases of a single lock are plain statements (queries/*.sql):
// a grant or a refusal of one lock, its release, its renewal and its check.
// The grant and the release hand the rare cases (re-entrancy, taking over
// expired leases, queueing, a counted hold) to the PL/pgSQL functions that
// the migration creates (acquire, release, …) in a branch of the same
// statement; several locks at once go to those functions directly.
//
// # One round trip per operation
//
// TryAcquire of a lock of any number of slots, AcquireAll of several locks,
// Release, Keep, Held, ReleaseStale and State are each one statement, in
// autocommit: no transaction stays open between calls, no connection is
// held while a lease is held, and no advisory lock is taken (they would pin
// a pooled connection and do not work behind PgBouncer). AcquireAll is all
// or nothing and locks the lock rows in sorted order, so callers naming the
// same locks in any order do not deadlock; it reports the first refused
// lock in the caller's order with the kind of what holds it.
//
// A refusal is decided on a plain read: a refused try takes no row lock,
// waits for no other transaction and writes nothing (no WAL, no fsync), so
// many callers hammering a busy lock cost the database little. Keep is a
// conditional UPDATE of the holder's rows, never an upsert; a release names
// the holder's ref and token, so a late release never frees a newer holder.
//
// A blocking Acquire joins the queue and checks again (one statement)
// after 1ms, 2ms, … up to WithPollInterval; a waiter whose context ends
// leaves the queue, and a grant racing with the cancellation is given back.
// An acquisition abandoned mid-statement (context ended, connection lost)
// is undone by a second statement, which also leaves a tombstone that
// stops a slow-path statement still running on the server; ConfigurePool
// makes pgx cancel such a statement on the server before returning.
//
// Store also implements store.Watcher for what this process sees: a hold
// taken over, released or found gone by this process ends its watchers at
// once; a hold taken over by another node is learnt at the next renewal.
//
// # UNLOGGED tables
//
// Migrate with Unlogged() creates the lease and queue tables UNLOGGED: a
// grant or release then writes no WAL and waits for no fsync, several times
// faster. The price: after a crash of the database server, or a failover to
// a replica, every lease and waiter is gone (the tables come back empty), so
// two holders may overlap across the crash. Definitions and the token
// sequence stay durable, so fencing tokens still only grow: with Guard, or a
// resource that checks tokens, a write by a holder from before the crash is
// still rejected.
//
// # Fencing with Guard
//
// Store.Guard (sleeplock's Lease.Guard) fences a write made in the
// caller's own transaction, a pgx.Tx or *sql.Tx on the same database: it
// checks that the lease is still held and locks its holder rows until the
// transaction ends, so the lease cannot be taken over before the write
// commits.
package pgstore
