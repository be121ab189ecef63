// Package chaos is a chaos test of sleeplock's PostgreSQL store (and of
// its SQLite and Redis stores, and of leader elections, below): worker processes take locks and
// write to guarded resources while a driver kills, pauses and disconnects
// them (and restarts PostgreSQL, on a cluster of its own), and a checker
// proves from the database that no lock ever had more holders than slots,
// that no write of a holder whose lease was lost was accepted, and that
// every lock is grantable again TTL + 1s after the last worker died.
//
// # The run
//
// Run (the driver) makes a schema of its own (sleeplock's tables and the
// chaos_* tables of this package; dropped at the end), builds the worker
// command (chaos/worker) with go build into a temporary directory unless
// Config.WorkerBin names one, and starts Config.Workers worker processes.
//
// Each worker opens the store with pgstore.Open (its connections named by
// application_name) and runs Config.Goroutines loops. A loop takes, in a
// random mix, a member of the one-slot family "res/*" or the three-slot
// lock "pool" with a blocking Acquire (with a deadline) or TryAcquire, or
// both with AcquireAll (blocking or NoWait). It records the grant (lock,
// token, ref, worker, the grant's time and how long it waited, and the
// database's clock just after: "observed"), then writes Config.Writes
// times over Config.Hold into chaos_writes, each write in a transaction
// fenced by Lease.Guard, and releases. The resources fence by themselves
// too: a trigger refuses a write to a one-slot resource with a token lower
// than the highest it accepted. With Config.NoGuard (the negative control)
// the writes are not fenced; a probe (Guard after the write, in its
// transaction) then records whether the lease was still held.
//
// The driver injects, in turn, every Config.FaultEvery:
//   - kill: SIGKILL of a worker that has just taken a member of the family
//     (a new worker replaces it);
//   - pause: SIGSTOP, for Config.PauseFor (TTL + 1s), of a worker that has
//     just taken a lock, then SIGCONT;
//   - terminate: pg_terminate_backend of a worker's connections;
//   - restart: an immediate restart of PostgreSQL, only on a cluster the
//     run creates for itself (pg_createcluster 15 chaos_PID_… on a free port; the
//     whole run then uses it). When it cannot be created the fault is
//     skipped with a loud line; the shared server is never restarted.
//
// After Config.Duration every worker is killed at once. Every lock must then
// be grantable (all its slots, to TryAcquire) once TTL + 1s +
// Config.WaiterBound has passed on the database's clock; a slot that is not
// is a lost slot.
//
// # The checks
//
// Check reads the tables. A holding spans from its observed time to the end
// of its last accepted write: both on the database's clock, and with Guard
// the holding's writes commit before any takeover of its lease commits, so
// these intervals of one lock overlap by at most its slots. Violations:
//   - overlaps: a holding that began while its lock had as many holdings
//     as slots;
//   - late writes: a write to a one-slot resource accepted after a grant
//     of a newer token of that lock was observed;
//   - writes by a lost lease: accepted writes whose probe found the lease
//     no longer held (NoGuard only).
//
// It also measures, on the database's clock, kill -9 of a holder → next
// grant of its lock, pause of a holder → next grant, and handoffs (a
// release → the grant to a caller that was waiting), as p50/p99/max.
//
// # Running it
//
// TestChaosShort (about 25 s) and TestChaosNegativeControl (about 17 s)
// run with go test unless -short; they need PostgreSQL
// (SLEEPLOCK_TEST_DATABASE_URL, default the local test database) and fail
// under CI when it is unreachable. TestChaosRestart adds PostgreSQL restarts
// on a cluster of its own when SLEEPLOCK_CHAOS_RESTART=1 (it needs
// postgresql-common and the rights to create a cluster).
//
// A long run, from the module's root, prints the same report and exits 1
// on a violation or a lost slot:
//
//	go run ./chaos/cmd/chaos -duration 10m -v
//	go run ./chaos/cmd/chaos -duration 10m -faults kill,pause,terminate,restart
//	go run ./chaos/cmd/chaos -duration 1m -no-guard -no-acquire-all -faults pause -hold 300ms -writes 6 -workers 4 -goroutines 6 -fault-every 2s -pause-for 4s
//
// The last is the negative control: it must report violations. By default
// the workers use a waiter TTL of 1s (pgstore.WithWaiterTTL); with
// -waiter-ttl 0 they use pgstore's default, and -waiter-bound adds an
// allowance to the liveness check.
//
// # The ledger: SQLite, Redis and failover runs
//
// When the store is not a PostgreSQL database that keeps every commit, the
// workers keep the run's record in a ledger (SetupLedger): the chaos
// tables in the PostgreSQL database of Config.DSN, apart from the store.
// The guarded resources stay in the store's database (or Redis server),
// fenced by Guard in the same transaction (or script), and each write the store accepted is copied into
// the ledger with its times. Check then reads the ledger.
//
// With Config.SQLite (command: -store sqlite:PATH) the locks and resources
// are in one SQLite file shared by the worker processes (sqlitestore), and
// the faults are kill (-9, in the middle of the workers' commits), pause
// (SIGSTOP past the TTL) and readonly: the file and its WAL made immutable
// (chattr +i: writes fail even through open descriptors, even for root) for
// PauseFor, a fresh worker started meanwhile. Every error sleeplock's API
// returns to a worker must be Typed; the others are in Report.Untyped.
// TestChaosSQLite runs 15 s (2 minutes with SLEEPLOCK_CHAOS_SQLITE_LONG=1).
//
// # Redis
//
// With Config.Redis (command: -store redis://HOST:PORT/DB) the locks are in
// that Redis server (redisstore, on one client per worker named by its
// connections' CLIENT SETNAME), under a key prefix of the run's own (the
// ledger's schema and ":"; every key under it is deleted at the end), and
// the ledger is in PostgreSQL as for SQLite: never in the Redis under
// test, which a run may restart. A guarded resource is a Redis list beside
// the locks, in the lock's hash slot. A write is one Lease.Guard with a
// *redisstore.Tx of two commands, TIME and RPUSH of the holding's token:
// both run in the script that checks the lease, or neither does. The
// write's time is that TIME, and a holding's observed time is the
// server's TIME read just after its grant, so every interval the checker
// compares is on the server's clock, the clock of the grants. The faults
// are kill (-9), pause (SIGSTOP past the TTL), terminate (CLIENT KILL of
// every connection of a worker, its subscription included), client-pause
// (CLIENT PAUSE ALL for PauseFor: every lease expires and no node beats
// meanwhile; it pauses every client of the server, so it is not a default)
// and restart (Config.RestartRedis, which TestChaosRedis sets to kill -9
// and start its own server again).
//
// What Check proves for Redis: (1) no lock had more holders than slots at
// any instant of the server's clock, a holding spanning from just after
// its grant to its last write Guard accepted (Guard accepts a write only
// while the holding's ref and token still hold the lock, expired or not,
// so the real holding covers that span); (2) no write to a one-slot
// resource was accepted after a newer token's grant was observed (late
// writes); and, from the lists at the end (RedisFindings): (3) in the
// order Redis accepted them, the writes to each one-slot resource never
// went back to an older token; (4) every write Guard acknowledged to a
// worker (and the worker copied into the ledger) is in its list: none was
// lost, through restarts too; (5) no token was granted to two refs. Each
// counts as a violation. With the AOF off, a restart loses every lock and
// every list (docs/guarantees.md): TestChaosRedis restarts its server only
// with the AOF on (appendfsync always). TestChaosRedis runs 15 s with the
// AOF off and 15 s with it on (five minutes each with
// SLEEPLOCK_CHAOS_REDIS_LONG=1), on a redis-server of its own on a free
// port (redistest.Start with port 0).
//
// RunFailover (command: -failover sync|async [-stall 2s]) runs the workers
// against a primary and a streaming standby, clusters of its own on free
// ports, through a multi-host DSN with target_session_attrs=read-write;
// mid-run it stops the primary (-m immediate) for good and promotes the
// standby, after stalling replication if asked. It compares the ledger with
// what the new primary kept (FailoverReport): lost grants and writes,
// tokens that decreased or were granted twice, holders that still believed
// they held when another was granted their lock, and when each lock was
// granted again after the promotion. TestFailoverSync,
// TestFailoverSyncStalled and TestFailoverAsync run it when
// SLEEPLOCK_FAILOVER=1; docs/failover.md has the figures.
//
// # Through the command line
//
// RunCLI (Linux) tests `sleeplock run` as a user's shell runs it:
// CLIConfig.Loops (8) shell loops run `sleeplock run --ttl 2s --slots 2`
// of one lock again and again, on any store (--store, --schema), while a
// killer sends SIGKILL to a random `sleeplock run` of the loops every
// 0.1–0.9 s. Each command is chaos/runcmd (CLICommand), which starts a
// child and holds a random time up to 300 ms. A command's tree holds a
// marker, an exclusive flock(2) on a file that the child inherits, which
// the kernel gives back only when the tree's last holder of it has ended,
// kill -9 or not; under a mutex, each command counts the markers held as
// it enters: the commands inside at that moment, children included
// (CLIReport.MaxInside, and Over, the entries that counted more than the
// slots). After the run the loops are told to stop, and no process of
// cmd/sleeplock or chaos/runcmd (commands, children, guards) may live
// TTL + 5s later (CLIReport.Left), and `run --weight 2` must get the whole
// lock (SlotsBack). BuildCLI builds both binaries once for many runs.
//
// TestCLIChaos runs it for 20 s on each store: SQLite (a file of the
// test's), PostgreSQL (a schema of its own) and Redis (a server of its own
// on a free port); SLEEPLOCK_CHAOS_CLI=DURATION makes a long run.
// TestCLIChaosNegativeControl runs it with CLIConfig.Escape: each child
// leaves its process group (setsid, as a daemon does), out of run's
// reach, and must be found inside beside more than 2 others, and left.
//
// # Elections
//
// RunElection tests package election through the command line, on a
// PostgreSQL cluster of its own (pg_createcluster 15 elchaos_PID_… on a
// free port, dropped at the end): ElectionConfig.Candidates (5) processes of
// `sleeplock elect --again --ttl 2s`, each running chaos/electcmd while it
// leads (ElectCommand: Writes writes of its term's SLEEPLOCK_TOKEN, Every
// apart, 25 × 40ms by default, each in a transaction fenced by pgstore's
// Guard, every step recorded with the host's wall clock in a ledger file).
// Every FaultEvery the driver, in turn, kills the leader's elect (-9; a
// new candidate replaces it), pauses the leader's elect and command
// (SIGSTOP past the TTL, until the ledger shows that the next term's
// command has started; at most TTL + 30s, and a pause that sees no next
// term is an error of the fault), terminates the backends of the leader's
// elect and command (pg_terminate_backend by application_name) and
// restarts PostgreSQL (-m immediate). A candidate that exits by itself is
// replaced and counted (ElectionReport.Exited). The checks: no committed
// write of a term older than one that had written, in the order of
// elchaos_writes' ids, the commit order (StaleWrites); no command's ledger
// line after the next term's command had started while both their elects
// lived (Overlaps); and, measured, each kill → the next term's command
// (Takeovers). With ElectionConfig.PauseElectOnly (the negative control)
// only the elect is paused and its command writes on, and the pause also
// lasts until the ledger shows a line of the paused term after the next
// term's start: Guard must refuse its writes, and the checker must find
// the overlap.
//
// TestElectionChaos (8 s of faults, one every 1.5 s, each kind at least
// once) and TestElectionChaosNegativeControl run with go test unless
// -short; they need root and pg_createcluster (postgresql-common), and
// skip loudly without them, except under CI, where they fail.
// SLEEPLOCK_ELECTION_CHAOS=DURATION makes TestElectionChaos a long run,
// with a fault every 3 s:
//
//	SLEEPLOCK_ELECTION_CHAOS=10m go test -count=1 -timeout 30m -run '^TestElectionChaos$' -v ./chaos
//
// bench/README.md has the figures.
package chaos
