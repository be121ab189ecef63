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
// Migrations are embedded, numbered (migrations/001_init.sql,
// 002_liveness.sql, …, 004_handoff.sql) and idempotent, and run in one transaction under a
// transaction-scoped advisory lock, so several nodes may run them at once.
// A released migration is never edited: a schema change is a new file, and
// a database made by an older release upgrades with `sleeplock migrate`
// (leases and waiters in it survive the upgrade). New, NewSQL and Open
// check the schema's version and fail with an error matching
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
//     sequence, so waiters for several locks never deadlock), with a short
//     lease (WithWaiterTTL, 1s). Since version 5 a store's waiters of one
//     lock share its row in nodes, the only row its heartbeat writes (a
//     waiter of several locks keeps a lease in its own row): the waiters of
//     a node that died or paused stop counting after a second, and are
//     deleted by the next operation that meets them (and by a bounded
//     sweep each store runs every few seconds). A paused node's waiter that
//     resumes after its lease queues again at the back.
//   - tokens, tickets and seqs: sequences, bigint, NO CYCLE: tokens only
//     grow; seqs numbers the events (Event.Seq), drawn while the statement
//     holds the lock's row, so one lock's events sorted by Seq replay its
//     states in the store's order whichever node emitted them.
//   - cancelled: acquisitions their callers gave up, so a statement still
//     running on the server grants nothing; swept after an hour.
//
// Since version 2 a single lock's release deletes the lock's row only
// after checking again, once it has the row, that no other holder and no
// waiter appeared; a holder never exists without its lock's row, which is
// what serialises every grant of the lock.
//
// The common cases of a single lock are one short statement each
// (queries/*.sql): a grant or a refusal of one lock, its release, its
// renewal and its check. Since version 3 the grant and the release call
// small PL/pgSQL functions (acquire_one, release_one) that run only the
// statements of the case at hand, so a plan's rare branches cost nothing;
// every free slot of a lock is granted there. Since version 4 release_one
// also hands a freed slot to the head waiter (see below) and acquire_one
// queues a waiter behind a held lock. They hand the rare cases
// (re-entrancy, taking over expired leases, a counted hold) to
// the general functions (acquire, release, …) in the same statement;
// several locks at once go to those functions directly. Since version 6
// the first holder of a lock lives in the lock's row: a grant of a free
// lock and its release are one UPDATE of that row each. Every other case
// is acquire_slow's or release_one's (they first move the holder to a
// holder row, then apply the rules above). Since version 9 every slot of
// a multi-slot lock lives in the lock's row too, one element of its slot
// arrays per slot: a grant of a free slot and its release are one UPDATE
// of the arrays each (queries/acquireN.sql, releaseN.sql), until a caller
// queues or something else moves the slots to holder rows. The store
// remembers which locks it last saw fast, and with how many slots, sends
// the UPDATE for those and the function for the others (and for a
// multi-slot lock whose caller wants events, as the function counts the
// lock's holders for them).
//
// # One round trip per operation
//
// TryAcquire of a lock of any number of slots, AcquireAll of several locks,
// Release, Keep, Held, ReleaseStale and State are each one statement, in
// autocommit. The one exception: a TryAcquire or Release of one lock that
// the store last saw fast (its holders in its row, and a slot free) but
// that has since become slow or full (queued, held by others in holder
// rows or in every slot) takes a second statement, once, after which the
// store knows. (A
// fallback in the same statement cost a quarter of a pair's throughput.)
// A lock the store saw contended stays slow until it has seen it fast 16
// times, so a lock taken in turns across stores does not pay that second
// statement at each handoff.
// Throughout: no transaction stays open between calls, no connection is
// held while a lease is held, and no session advisory lock is taken (they
// would pin a pooled connection and do not work behind PgBouncer; version
// 9 takes a transaction-level one, released at commit, only to order a
// change of definitions with a lock's first grant in its slot arrays). AcquireAll is all
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
// # Waiting: handoffs, LISTEN/NOTIFY, polling as the fallback
//
// A blocking Acquire joins the queue (one statement). Since version 4 the
// release of a single lock with waiters grants the freed slot itself to
// the head of the queue in ticket order, under the lock's row, and sends
// NOTIFY with the grant: the waiter's store hands it to the waiting call,
// which returns without another statement (a waiter that missed it finds
// it at its next check). Since version 8 a grant for a waiter of the
// releasing store is not notified: it comes back with the release's answer,
// after its commit, and the store hands it over itself. Since version 5 such a grant is its waiter's
// node's until the node's next heartbeat confirms it: the grant of a node
// that died meanwhile ends with the node's lease, not with the lease TTL.
// The release leaves to the waiter's own check a waiter for several locks
// (all or nothing) and one whose ref holds the lock already. Each store keeps one LISTEN connection (not one per waiter)
// on a channel of its schema; any other statement that frees a slot of a
// lock with waiters, or removes a waiter, sends NOTIFY with the lock and
// its free slots, and each store wakes that many of its own waiters of the
// lock, in ticket order, to check. Queueing and checks that leave a waiter
// waiting commit with synchronous_commit off (a place in the queue is soft
// state: after a crash of the server the waiter queues again). Only the
// heads of a store's queue keep a timer: at the next expiry of a lease
// that blocks them (a holder that died) or every 250ms; a waiter with as
// many of its store's waiters ahead as the lock has slots sleeps until they
// leave, and a head's check of a lock full of unexpired holders reads the
// holder rows only. So 1,000 waiters cost the database a few short
// statements a second and one row update per store, not a thousand.
//
// While the LISTEN connection is down (it reconnects with backoff, and
// every waiter checks once when it is back, so no wake-up is missed) the
// waiters poll after 1ms, 2ms, … up to WithPollInterval. A store made by
// New or Open listens on a connection configured like its pool's; NewSQL
// listens only with WithListenDSN. Behind PgBouncer in transaction mode,
// where LISTEN does not work, give WithListenDSN a DSN that reaches
// PostgreSQL directly, or use WithoutListen to poll.
//
// A waiter whose context ends leaves the queue, and a grant racing with
// the cancellation is given back; Close ends its store's waiters with
// store.ErrClosed after removing them from the queue. An acquisition
// abandoned mid-statement (context ended, connection lost) is undone by a
// second statement, which also leaves a tombstone that stops a slow-path
// statement still running on the server; ConfigurePool makes pgx cancel
// such a statement on the server before returning.
//
// # Connection errors
//
// A statement that never reached the server (no connection could be had,
// or pgx says nothing was sent) changed nothing: it is retried with a
// jittered backoff (about three seconds in all, enough to ride out a
// restart of PostgreSQL), never undone, and when the server stays away
// the caller gets one error matching ErrUnreachable. Checks of a waiter,
// renewals, Held and the undo are retried also after a connection lost
// mid-statement, since running them twice changes nothing more.
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
// commits. A lease held in its lock's row (schema version 6 keeps the
// first holder of a lock there) is first moved to a holder row through
// the store's own pool, so a REPEATABLE READ or SERIALIZABLE transaction
// must call Guard before its first statement; Guard returns an error
// matching store.ErrUnsupported when the transaction's snapshot is older.
package pgstore
