// Package sqlitestore keeps sleeplock's locks in a SQLite database file
// shared by every process of one host: the store of the sleeplock command
// line, and of programs that need a counting, FIFO lock between processes
// with no server to run. It uses modernc.org/sqlite (pure Go, no cgo).
//
//	s, err := sqlitestore.Open(ctx, "/var/lib/myapp/locks.db")
//	…
//	locks := sleeplock.New(s)
//	defer locks.Close()
//
// # How it works
//
// The database runs in WAL mode; every operation is one short write
// transaction (BEGIN IMMEDIATE, so that two writers never deadlock on a lock
// upgrade) or one read of a snapshot.
//
// # A busy database
//
// SQLite lets one connection write at a time, and says SQLITE_BUSY to the
// others. The store never passes that on: a transaction or read that
// finds the database busy (at its BEGIN, at any statement, at its COMMIT,
// or while Open connects and reads the schema) is rolled back and tried
// again, from 50µs doubling to 2ms between tries (with jitter), until the
// busy timeout (WithBusyTimeout, default 10s) has passed since the call
// began. That is the bound of the wait: a call that still finds the
// database busy then fails with an error matching ErrBusy. A transaction
// holds the database for well under a millisecond plus its COMMIT's
// fsync, so the bound is met only when a transaction of another process
// stalls (its disk, or a stopped process). A blocking Acquire, which the
// caller asked to wait, tries again instead, so only its context bounds
// its wait.
// Times are microseconds on the host's clock, which every process of the
// host shares.
//
// A blocking Acquire that cannot be granted queues a waiter row (tickets
// never reused) and checks again whenever the database changes: a process
// learns of its own changes at once and of other processes' changes by
// polling SQLite's data_version, a read of shared memory, every few
// milliseconds. Each waiter grants itself when it is first in line for every
// lock it waits for.
//
// A hold that a caller other than its holder ends (released naming its
// ref, released as stale, or its lock deleted with force) is recorded in
// the table ended by the same transaction. While a store watches leases,
// its change poller reads the rows added since it last looked whenever
// data_version changes (at most every 100ms when nobody waits), and ends
// those leases at once with ErrLeaseLost, as the other stores do. A
// holder's own release records nothing.
//
// # Dead processes
//
// Each holder and waiter row records its process: pid, start time (field 22
// of /proc/PID/stat) and host (boot id and pid namespace). The next operation
// that meets a row of a process that is gone, or whose pid now names another
// process, deletes it: a holder killed with SIGKILL gives its slots back at
// once, and waiters of a dead process leave the queue. A store opened
// WithProcessGroup records a process group with each hold, and a hold whose
// process is gone stays until no process of that group lives either: a
// supervisor's command keeps its slot until it is gone (sleeplock run).
// TTLs still apply (a
// hung process is alive). Rows of another pid namespace or boot cannot be
// checked; for them the TTL is the bound (and a waiter's own short lease,
// renewed while it waits).
//
// # Schema
//
// Open creates or upgrades the schema (numbered migrations embedded in the
// package, the version kept in PRAGMA user_version). A database of a newer
// schema version than this build knows is refused with a *SchemaError.
//
// # Counters
//
// The table stats keeps, per definition (a lock, or a family with its
// members folded in), the counters of Stats (store.StatsReader): every
// write transaction that grants, releases or refuses adds to its row in
// one upsert, at its end, so every process's changes are counted. Every
// hold is timed from its row's acquired time (HoldSampling 1); a wait is
// timed from the waiter's since.
//
// # Durability
//
// Commits are synchronous (PRAGMA synchronous=FULL), so fencing tokens only
// grow also across a power failure. A grant, renewal or release is
// reported only once its transaction committed: when the COMMIT fails (the
// file cannot be written), the caller gets the error, and a waiter that
// was being granted leaves the queue.
//
// # A file that cannot be written
//
// Open refuses, with store.ErrInvalidConfig, a database this process has
// no permission to write (or on a read-only file system): that does not
// pass by itself. A file that cannot be written for a while (made
// immutable, for example) is another matter: writes fail with an error
// matching ErrReadOnly, which says the condition passes (SQLite's I/O
// error through a connection opened before, SQLITE_READONLY through one
// opened meanwhile, which SQLite keeps read-only for good: the store then
// opens its connection anew), and succeed again as soon as the file is
// writable. Open succeeds on such a file when its schema is current.
package sqlitestore
