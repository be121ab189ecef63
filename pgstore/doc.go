// Package pgstore keeps sleeplock's locks in PostgreSQL, shared by every
// node that uses the same database and schema. Leases expire on the
// database's clock, so the clocks of the nodes do not matter.
//
// # Setting up
//
// The tables live in a schema of their own ("sleeplock" unless WithSchema
// names another; any name works, it is quoted). Create or update it with
// the command line tool or from Go, once or on every start-up:
//
//	sleeplock migrate --store postgres://user@host/db
//
//	err := pgstore.MigrateDSN(ctx, dsn)     // a DSN, as Open takes
//	err := pgstore.Migrate(ctx, pool)       // *pgxpool.Pool
//	err := pgstore.MigrateSQL(ctx, db)      // *sql.DB
//
// The schema is numbered DDL migrations (migrations/001_init.sql, the
// only one before the first release: tables, sequences, indexes, the view
// holding), applied once each and never edited once released, and
// the functions of sql/*.sql (one definition of each, grouped by concern),
// applied with CREATE OR REPLACE at every Migrate. Migrate runs in one
// transaction under a transaction-scoped advisory lock, so several nodes
// may run it at once; it records each migration with its checksum and the
// fingerprint of the functions, and drops the schema's functions this
// build does not define. New, NewSQL and Open refuse a schema without this
// build's migrations or functions with an error matching ErrSchemaMissing
// ("run `sleeplock migrate`"). docs/schema.md describes the tables and
// functions, and the rule that keeps a rolling upgrade safe from the first
// release on. No function for tests is in a production schema: advance(),
// which expires every lease, is installed only by the tests themselves.
//
// # The schema
//
//   - defs: one row per Define (a lock, or a family "chat/*"). A family
//     member ("chat/42") has no row of its own until it is used.
//   - locks: one row per lock in use. Every grant of a lock takes its row,
//     which serialises them, so tokens and event numbers grow per lock. A
//     fast row holds the lock's whole state: its one holder (scalar mode,
//     of any weight) or one element of its slot arrays per slot (slot
//     mode, a lock of 2 to 1,024 slots, weight 1 each; a wider lock keeps
//     its holders beside the first in holder rows, so that no statement
//     costs in proportion to its slots). A grant of a free
//     lock or slot and its release are then one UPDATE of the row each.
//   - holders and queue: the holders and waiters of a lock whose row is
//     not fast (spill() moves a fast row's holders there when a caller
//     queues, a lease is taken over, a hold is re-entered or several locks
//     are taken at once). The slot number is unique per lock, so the
//     database never lets a lock have more holders than slots. A holder
//     row has the weight of its hold and a queue row the weight its waiter
//     asks.
//   - waiters: waiting callers, in ticket order (a global sequence, so
//     waiters for several locks never deadlock), each with its whole
//     request so that a release can grant it on its behalf.
//   - nodes: one row per store with waiters, the lease of its waiters of
//     one lock (WithWaiterTTL, 1s), renewed by the store's heartbeat: the
//     waiters of a node that died or paused stop counting after a second.
//   - tokens, tickets and seqs: bigint sequences, NO CYCLE.
//   - cancelled: acquisitions their callers gave up, so a statement still
//     running on the server grants nothing; swept after an hour.
//
// # One round trip per operation
//
// TryAcquire of a lock of any number of slots, AcquireAll of several locks,
// Release, Keep, Held, ReleaseStale and State are each one statement, in
// autocommit. The store remembers which locks it last saw fast: for those
// it sends the bare UPDATE of the lock's row (queries/acquire_fast.sql,
// acquire_slot.sql, acquire_weighted.sql, release_fast.sql,
// release_slot.sql, and their untimed variants for the 255 holds in 256
// whose length Stats does not sample, and their sampled variants for a
// hold timed by time, see Stats), for the others
// the function that settles every case (acquire_one(), release_one()). A
// lock seen fast that has since become slow or full takes a second
// statement, once. A lock the store saw contended stays slow until it has
// seen it fast 16 times, so a lock taken in turns across stores does not
// pay that second statement at each handoff.
//
// No transaction stays open between calls, no connection is held while a
// lease is held, and no session advisory lock is taken (they would pin a
// pooled connection and do not work behind PgBouncer). AcquireAll is all
// or nothing and locks the lock rows in sorted order, so callers naming
// the same locks in any order do not deadlock; it reports the first
// refused lock in the caller's order with the kind of what holds it.
//
// # Weights
//
// A hold of weight k (Weight, Exclusive, WeightFor) is one hold taking k
// slots: the holder of the lock's row in scalar mode when it found the
// row fast and holding nothing, granted and released by one bare UPDATE
// each as a weight-1 hold is (queries/acquire_weighted.sql, then
// release_fast.sql), else one holder row. Any other case is one statement
// of the function (acquire_one(), check_one() for several locks),
// which spills a fast row to holder rows, weights kept, when it grants
// beside its holders or queues behind them. Free
// slots are the slots less the holders' weights, and a waiter is granted
// only when the slots the waiters ahead of it ask, plus its own, fit:
// strict FIFO, a heavy waiter blocks lighter ones behind it. A weight
// above the lock's slots is a *store.WeightError at once, and ends a waiter
// that a Resize left too heavy.
//
// A refusal is decided on a plain read: a refused try takes no row lock,
// waits for no other transaction and writes nothing (no WAL, no fsync), so
// many callers hammering a busy lock cost the database little. Keep is a
// conditional UPDATE of the holder, never an upsert; a release names the
// holder's ref and token, so a late release never frees a newer holder.
//
// # Waiting: handoffs, LISTEN/NOTIFY, polling as the fallback
//
// A blocking Acquire joins the queue (one statement). The release of a
// single lock with waiters grants the freed slot itself to the head of the
// queue in ticket order, under the lock's row. A grant for a waiter of the
// releasing store comes back with the release's answer, after its commit,
// and the store hands it over; a grant for another store's waiter is sent
// with NOTIFY, which that store hands to its waiting call (a waiter that
// missed it finds it at its next check). Such a grant is its waiter's
// node's until the node's next heartbeat confirms it: the grant of a node
// that died meanwhile ends with the node's lease, not with the lease TTL.
// The release leaves to the waiter's own check a waiter for several locks
// (all or nothing) and one whose ref holds the lock already.
//
// Each store keeps one LISTEN connection (not one per waiter) on a channel
// of its schema; any other statement that frees a slot of a lock with
// waiters, or removes a waiter, sends NOTIFY with the lock and its free
// slots, and each store wakes that many of its own waiters of the lock, in
// ticket order, to check. Queueing and checks that leave a waiter waiting
// commit with synchronous_commit off (a place in the queue is soft state:
// after a crash of the server the waiter queues again). Only the heads of
// a store's queue keep a timer: at the next expiry of a lease that blocks
// them, or after DefaultListenPoll (5s) as a safety net; the store's
// heartbeat, which reads whether some node stopped renewing, wakes them
// when one did (its waiters ahead of them are passed by their check). So
// 1,000 idle waiters cost the database about two short statements a
// second per store (the heartbeat), not a thousand; one store of the
// schema sweeps every 5 s.
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
// second statement, which also leaves a tombstone that stops a statement
// still running on the server; ConfigurePool makes pgx cancel such a
// statement on the server before returning.
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
// Store also implements store.Watcher: a hold taken over, released or
// found gone by this process ends its watchers at once, and so does a
// hold that another node released naming its ref, released as stale or
// deleted with force: that node's statement sends NOTIFY (lost()) when it
// commits, never on a holder's own release, and the first lease a store
// watches starts its LISTEN connection. A hold taken over by another node
// after its TTL, or whose notification was missed while the LISTEN
// connection was down, is learnt at the next renewal.
//
// # Failover to a standby
//
// With a multi-host DSN (host=a,b target_session_attrs=read-write) the
// pool and the LISTEN connection follow a promoted standby; statements in
// flight are classified as above, and waiters check again. What holds
// across the promotion depends on the replication:
//
//   - Synchronous (synchronous_commit on, the default, with
//     synchronous_standby_names): nothing a caller was told is lost. A
//     statement whose context ended while PostgreSQL waited for the
//     standby may have committed on the primary alone, so it is not
//     counted as done: Keep returns an error matching ErrUnreachable and
//     Acquire gives back what it may have been granted.
//   - Asynchronous: grants, renewals and releases the standby had not
//     received are lost; a holder may hold a lease the new primary does
//     not know, and Guard refuses its writes there. Fencing tokens still
//     only grow: every token is the tokens sequence raised by (timeline − 1)
//     · 2^44, and a promotion starts a higher timeline, so the new
//     primary's tokens are above any the old one drew (as long as the
//     sequence stays below 2^44). A resource that checks tokens refuses
//     the lost holder once it has seen a newer one.
//
// A waiter's place in the queue, or its leaving, may also be lost with
// the commits the standby had not received (they are made with
// synchronous_commit off). A store therefore compares its node's places in
// the database with the calls it has waiting, after a heartbeat that
// failed, whenever its LISTEN connection connects, and every 20
// heartbeats, and gives up the places nobody waits for. docs/failover.md
// has the runs and figures.
//
// # UNLOGGED tables
//
// Migrate with WithUnlogged() creates the lease and queue tables UNLOGGED
// (or turns them so): a grant or release then writes no WAL and waits for
// no fsync, several times faster. The price: after a crash of the database
// server, or a failover to a replica, every lease and waiter is gone (the
// tables come back empty), so a lock is free at once and two holders may
// overlap across the crash. Definitions, counters folded into them, and
// the token sequence stay logged (and a promotion raises tokens, see
// above), so fencing tokens never repeat and only grow: with Guard, or a
// resource that checks tokens, a write by a holder from before the crash
// is still rejected. Migrate with WithLogged() turns the tables back to
// logged ones (each rewritten under an exclusive lock); Migrate with
// neither leaves them as they are, and Store.Unlogged reports which they
// are (sleeplock migrate and state print it).
//
// # Fencing with Guard
//
// Store.Guard (sleeplock's Lease.Guard) fences a write made in the
// caller's own transaction, a pgx.Tx or *sql.Tx on the same database: it
// checks that the lease is still held and locks its holder rows until the
// transaction ends, so the lease cannot be taken over before the write
// commits. A lease held in its lock's row is first moved to a holder row
// through the store's own pool, so a REPEATABLE READ or SERIALIZABLE
// transaction must call Guard before its first statement; Guard returns an
// error matching store.ErrUnsupported when the transaction's snapshot is
// older.
package pgstore
