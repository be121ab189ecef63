package chaos

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"modernc.org/sqlite"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/sqlitestore"
	"github.com/sleeplock/sleeplock/store"
)

// WorkerConfig is what one worker process does: Goroutines loops that take
// Family members and the Pool lock and write to their resources while they
// hold them.
type WorkerConfig struct {
	DSN            string        // the database
	Schema         string        // the run's schema (made by Setup)
	Name           string        // the worker's name, recorded with its holdings and writes
	AppName        string        // application_name of its connections (the driver terminates them by it)
	Goroutines     int           // loops
	Members        int           // Family members in use: Family/0 … Family/Members-1
	TTL            time.Duration // lease TTL
	WaiterTTL      time.Duration // pgstore.WithWaiterTTL; 0: pgstore's default
	Poll           time.Duration // pgstore.WithPollInterval; 0: pgstore's default
	Hold           time.Duration // how long a holder holds, its writes spread over it
	Writes         int           // writes per holding
	AcquireTimeout time.Duration // deadline of a blocking acquisition
	NoGuard        bool          // write without Lease.Guard: the negative control
	NoAcquireAll   bool          // never call AcquireAll
	Seed           uint64        // seeds the choice of operations
	// Ledger is the PostgreSQL database where the worker records its grants
	// and accepted writes when it is not the store's (a failover run, whose
	// store may lose commits, or a SQLite run); empty: the store's database.
	Ledger string
	// Store is the store's kind: StorePostgres (or empty), StoreSQLite,
	// DSN being then the database file, shared by every worker, or
	// StoreRedis, DSN being then the server's URL (the keys under Schema
	// and ":").
	Store string
}

// The kinds of store a worker can use.
const (
	StorePostgres = "postgres" // pgstore; DSN is a PostgreSQL DSN
	StoreSQLite   = "sqlite"   // sqlitestore; DSN is the database file
	StoreRedis    = "redis"    // redisstore; DSN is the server's URL
)

func (c *WorkerConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.DSN, "dsn", "", "PostgreSQL DSN")
	fs.StringVar(&c.Schema, "schema", "", "the run's schema")
	fs.StringVar(&c.Name, "name", "w", "the worker's name")
	fs.StringVar(&c.AppName, "app", "", "application_name of the worker's connections")
	fs.IntVar(&c.Goroutines, "goroutines", 4, "loops")
	fs.IntVar(&c.Members, "members", 4, "family members in use")
	fs.DurationVar(&c.TTL, "ttl", 2*time.Second, "lease TTL")
	fs.DurationVar(&c.WaiterTTL, "waiter-ttl", 0, "pgstore waiter TTL (0: pgstore's default)")
	fs.DurationVar(&c.Poll, "poll", 0, "pgstore poll interval (0: pgstore's default)")
	fs.DurationVar(&c.Hold, "hold", 30*time.Millisecond, "how long a holder holds")
	fs.IntVar(&c.Writes, "writes", 3, "writes per holding")
	fs.DurationVar(&c.AcquireTimeout, "acquire-timeout", 5*time.Second, "deadline of a blocking acquisition")
	fs.BoolVar(&c.NoGuard, "no-guard", false, "write without Lease.Guard (the negative control)")
	fs.BoolVar(&c.NoAcquireAll, "no-acquire-all", false, "never call AcquireAll")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the operation mix")
	fs.StringVar(&c.Ledger, "ledger", "", "PostgreSQL DSN of the run's records when not the store's database")
	fs.StringVar(&c.Store, "store", "", "the store: postgres (default), sqlite (-dsn is then the file) or redis (-dsn is then its URL)")
}

// Args returns the command-line arguments that ParseWorkerArgs turns back
// into c.
func (c WorkerConfig) Args() []string {
	return []string{
		"-dsn", c.DSN, "-schema", c.Schema, "-name", c.Name, "-app", c.AppName,
		"-goroutines", strconv.Itoa(c.Goroutines), "-members", strconv.Itoa(c.Members),
		"-ttl", c.TTL.String(), "-waiter-ttl", c.WaiterTTL.String(), "-poll", c.Poll.String(),
		"-hold", c.Hold.String(), "-writes", strconv.Itoa(c.Writes),
		"-acquire-timeout", c.AcquireTimeout.String(),
		"-no-guard=" + strconv.FormatBool(c.NoGuard), "-no-acquire-all=" + strconv.FormatBool(c.NoAcquireAll), "-seed", strconv.FormatUint(c.Seed, 10),
		"-ledger", c.Ledger, "-store", c.Store,
	}
}

// ParseWorkerArgs parses a worker's command line (as Args makes it). An
// argument that cannot be used is an error matching
// sleeplock.ErrInvalidConfig that names it.
func ParseWorkerArgs(args []string, errOut io.Writer) (WorkerConfig, error) {
	var c WorkerConfig
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(errOut)
	c.flags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, fmt.Errorf("chaos: %w: worker: %w", sleeplock.ErrInvalidConfig, err)
	}
	if fs.NArg() > 0 {
		return c, invalid(fmt.Sprintf("worker: unexpected arguments %q", fs.Args()))
	}
	return c, c.validate()
}

func (c WorkerConfig) validate() error {
	switch {
	case c.DSN == "":
		return invalid("worker: -dsn is required")
	case c.Schema == "":
		return invalid("worker: -schema is required")
	case c.Goroutines < 1:
		return invalid(fmt.Sprintf("worker: -goroutines %d: at least 1", c.Goroutines))
	case c.Members < 1:
		return invalid(fmt.Sprintf("worker: -members %d: at least 1", c.Members))
	case c.TTL <= 0:
		return invalid(fmt.Sprintf("worker: -ttl %v: must be positive", c.TTL))
	case c.WaiterTTL < 0 || c.Poll < 0 || c.Hold < 0:
		return invalid("worker: -waiter-ttl, -poll and -hold must not be negative")
	case c.Writes < 1:
		return invalid(fmt.Sprintf("worker: -writes %d: at least 1", c.Writes))
	case c.AcquireTimeout <= 0:
		return invalid(fmt.Sprintf("worker: -acquire-timeout %v: must be positive", c.AcquireTimeout))
	case c.Store != "" && c.Store != StorePostgres && c.Store != StoreSQLite && c.Store != StoreRedis:
		return invalid(fmt.Sprintf("worker: -store %q: postgres, sqlite or redis", c.Store))
	case (c.Store == StoreSQLite || c.Store == StoreRedis) && c.Ledger == "":
		return invalid(fmt.Sprintf("worker: -store %s needs -ledger", c.Store))
	case c.NoGuard && c.Ledger != "":
		return invalid("worker: -no-guard is for a run without -ledger")
	}
	return nil
}

// The workers' counters, flushed to chaos_stats.
var statNames = []string{
	"acquire", "try", "all", "all-nowait", // attempts by operation
	"granted", "busy", "timeout", "acquire-error",
	"write", "write-stale", "write-error", "guard-lost", "guard-error",
	"release", "release-notheld", "release-error", "record-error",
	"untyped-error",
}

type worker struct {
	c      WorkerConfig
	locks  *sleeplock.Locks
	db     *pgxpool.Pool // the run's records (the ledger, or the store's database)
	sdb    *pgxpool.Pool // the store's database with a ledger (PostgreSQL store); nil otherwise
	lite   *sql.DB       // the SQLite file (SQLite store)
	rc     *redis.Client // the store's client (Redis store)
	q      string        // quoted schema
	offset time.Duration // database clock - local clock
	stats  map[string]*atomic.Int64
	shown  atomic.Int64 // errors printed by sample
}

func (w *worker) count(name string) { w.stats[name].Add(1) }

// ledger reports whether the worker records in a ledger of its own rather
// than in the store's database.
func (w *worker) ledger() bool { return w.c.Ledger != "" }

// RunWorker runs a worker until ctx ends. ready is called once the worker
// is connected and about to start its loops.
func RunWorker(ctx context.Context, c WorkerConfig, ready func()) error {
	if err := c.validate(); err != nil {
		return err
	}
	pgDSN := withParams(c.DSN, "application_name", c.AppName, "pool_max_conns", strconv.Itoa(c.Goroutines+2))
	var (
		s   store.Store
		rc  *redis.Client
		err error
	)
	switch c.Store {
	case StoreRedis:
		s, rc, err = openRedis(ctx, c)
		if err == nil {
			defer func() { _ = rc.Close() }()
		}
	case StoreSQLite:
		var opts []sqlitestore.Option
		if c.WaiterTTL > 0 {
			opts = append(opts, sqlitestore.WithWaiterTTL(c.WaiterTTL))
		}
		if c.Poll > 0 {
			opts = append(opts, sqlitestore.WithPollInterval(c.Poll))
		}
		s, err = sqlitestore.Open(ctx, c.DSN, opts...)
	default:
		opts := []pgstore.Option{pgstore.WithSchema(c.Schema)}
		if c.WaiterTTL > 0 {
			opts = append(opts, pgstore.WithWaiterTTL(c.WaiterTTL))
		}
		if c.Poll > 0 {
			opts = append(opts, pgstore.WithPollInterval(c.Poll))
		}
		s, err = pgstore.Open(ctx, pgDSN, opts...)
	}
	if err != nil {
		if !Typed(err) {
			return fmt.Errorf("%s opening the store: %w", untypedMark, err)
		}
		return err
	}
	locks := sleeplock.New(s, sleeplock.WithTTL(c.TTL))
	defer func() { _ = locks.Close() }()
	w := &worker{c: c, locks: locks, rc: rc, q: pgx.Identifier{c.Schema}.Sanitize(), stats: map[string]*atomic.Int64{}}
	recDSN := pgDSN
	if c.Ledger != "" {
		recDSN = withParams(c.Ledger, "application_name", c.AppName+"-ledger", "pool_max_conns", strconv.Itoa(c.Goroutines+2))
	}
	if w.db, err = pgxpool.New(ctx, recDSN); err != nil {
		return err
	}
	defer w.db.Close()
	switch {
	case c.Store == StoreSQLite:
		if w.lite, err = sql.Open("sqlite", sqliteURI(c.DSN)); err != nil {
			return err
		}
		defer func() { _ = w.lite.Close() }()
	case c.Store == StoreRedis: // the resources are the store's: w.rc
	case c.Ledger != "":
		if w.sdb, err = pgxpool.New(ctx, pgDSN); err != nil {
			return err
		}
		defer w.sdb.Close()
	}
	for _, n := range statNames {
		w.stats[n] = new(atomic.Int64)
	}
	if w.offset, err = clockOffset(ctx, w.db); err != nil {
		return err
	}
	if ready != nil {
		ready()
	}
	var wg sync.WaitGroup
	for i := range c.Goroutines {
		wg.Go(func() { w.loop(ctx, rand.New(rand.NewPCG(c.Seed, uint64(i)))) })
	}
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = w.flush(ctx)
			}
		}
	}()
	wg.Wait()
	<-flushed
	fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return w.flush(fctx)
}

// clockOffset estimates the database's clock minus this process's, from the
// fastest of a few round trips.
func clockOffset(ctx context.Context, db *pgxpool.Pool) (time.Duration, error) {
	best, off := time.Duration(-1), time.Duration(0)
	for range 5 {
		var t time.Time
		t0 := time.Now()
		if err := db.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t); err != nil {
			return 0, fmt.Errorf("chaos worker: reading the database clock: %w", err)
		}
		rtt := time.Since(t0)
		if best < 0 || rtt < best {
			best, off = rtt, t.Sub(t0.Add(rtt/2))
		}
	}
	return off, nil
}

func (w *worker) flush(ctx context.Context) error {
	names := make([]string, 0, len(w.stats))
	ns := make([]int64, 0, len(w.stats))
	for _, n := range statNames {
		names = append(names, n)
		ns = append(ns, w.stats[n].Load())
	}
	_, err := w.db.Exec(ctx, "INSERT INTO "+w.q+".chaos_stats (worker, name, n) SELECT $1, * FROM unnest($2::text[], $3::bigint[]) "+
		"ON CONFLICT (worker, name) DO UPDATE SET n = excluded.n", w.c.Name, names, ns)
	return err
}

// loop takes locks until ctx ends: blocking acquisitions of a member or of
// the pool, tries, and all-or-nothing acquisitions of both.
func (w *worker) loop(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		member := Member(rng.IntN(w.c.Members))
		one := member
		if rng.IntN(3) == 0 {
			one = Pool
		}
		both := []string{member, Pool}
		if rng.IntN(2) == 0 {
			both[0], both[1] = both[1], both[0]
		}
		var (
			op    string
			lease sleeplock.Lease
			err   error
		)
		t0 := time.Now()
		actx, cancel := context.WithTimeout(ctx, w.c.AcquireTimeout)
		p := rng.IntN(100)
		if w.c.NoAcquireAll {
			p = rng.IntN(80)
		}
		switch {
		case p < 70:
			op = "acquire"
			lease, err = w.locks.Acquire(actx, one)
		case p < 80:
			op = "try"
			lease, err = w.locks.TryAcquire(actx, one)
		case p < 92:
			op = "all"
			lease, err = w.locks.AcquireAll(actx, both)
		default:
			op = "all-nowait"
			lease, err = w.locks.AcquireAll(actx, both, sleeplock.NoWait())
		}
		cancel()
		waited := time.Since(t0)
		w.count(op)
		switch {
		case err == nil:
			w.count("granted")
			w.hold(ctx, lease, op, waited, rng)
		case ctx.Err() != nil:
			return
		case errors.Is(err, sleeplock.ErrUnavailable):
			w.count("busy")
			pause(ctx, time.Duration(1+rng.IntN(10))*time.Millisecond)
		case errors.Is(err, context.DeadlineExceeded):
			w.count("timeout")
		default:
			// connection terminated, database restarting, …: back off a little
			w.count("acquire-error")
			w.untyped("acquire", err)
			w.sample("acquire", err)
			pause(ctx, time.Duration(10+rng.IntN(40))*time.Millisecond)
		}
	}
}

// hold records the grant, writes to the lease's resources Writes times over
// Hold, and releases.
func (w *worker) hold(ctx context.Context, lease sleeplock.Lease, op string, waited time.Duration, rng *rand.Rand) {
	names, tokens, ref := lease.Names(), lease.Tokens(), lease.Ref()
	// observed is the database's clock after the grant committed (the
	// Redis server's, read after the grant, in a Redis run): the start of
	// the holding's interval for the checker.
	var (
		observed *time.Time
		err      error
	)
	if w.rc != nil {
		observed, err = w.observedRedis(ctx)
	}
	if err == nil {
		_, err = w.db.Exec(ctx, "INSERT INTO "+w.q+".chaos_holdings (lock, token, ref, worker, op, acquired, waited, observed) "+
			"SELECT l, t, $3, $4, $5, $6, $7, coalesce($8, clock_timestamp()) FROM unnest($1::text[], $2::bigint[]) u(l, t)",
			names, tokens, ref, w.c.Name, op, lease.Acquired(), waited, observed)
	}
	releasing := make(chan time.Time, 1)
	if err == nil && w.ledger() {
		believed := make(chan struct{})
		defer func() { <-believed }()
		go func() {
			defer close(believed)
			w.recordBelief(ctx, lease, releasing, names, tokens, ref)
		}()
	}
	defer close(releasing)
	if err == nil && w.sdb != nil {
		w.recordInStore(ctx, names, tokens, ref, op, lease.Acquired(), waited)
	}
	if err != nil {
		w.count("record-error")
	} else {
		for i := range w.c.Writes {
			if i > 0 && w.c.Hold > 0 {
				d := w.c.Hold / time.Duration(w.c.Writes-1)
				pause(ctx, d/2+time.Duration(rng.Int64N(int64(d)+1)))
			}
			if ctx.Err() != nil || !w.write(ctx, lease, names, tokens, ref) {
				break
			}
		}
	}
	if ctx.Err() != nil {
		return // the worker is stopping: the lease expires with its TTL
	}
	released := time.Now().Add(w.offset)
	releasing <- released
	err = lease.Release(ctx)
	switch {
	case err == nil:
		w.count("release")
	case errors.Is(err, sleeplock.ErrNotHeld):
		w.count("release-notheld")
	default:
		w.count("release-error")
		w.untyped("release", err)
	}
	if err == nil && w.ledger() {
		_, err = w.db.Exec(ctx, "UPDATE "+w.q+".chaos_holdings SET released = $4 WHERE lock = ANY ($1::text[]) AND token = ANY ($2::bigint[]) AND ref = $3",
			names, tokens, ref, released)
		if err != nil {
			w.count("record-error")
		}
	} else if err == nil {
		_, err = w.db.Exec(ctx, "UPDATE "+w.q+".chaos_holdings SET released = $3 WHERE lock = ANY ($1::text[]) AND token = ANY ($2::bigint[])",
			names, tokens, released)
		if err != nil {
			w.count("record-error")
		}
	}
}

// write makes one write to each of the lease's resources, each in a
// transaction of its own fenced by Guard unless NoGuard. It reports whether
// the holder should go on.
func (w *worker) write(ctx context.Context, lease sleeplock.Lease, names []string, tokens []int64, ref string) bool {
	for i := range names {
		if w.ledger() {
			if !w.writeLedger(ctx, lease, names[i], tokens[i], ref) {
				return false
			}
			continue
		}
		if !w.writeOne(ctx, lease, names[i], tokens[i], ref) {
			return false
		}
	}
	return true
}

func (w *worker) writeOne(ctx context.Context, lease sleeplock.Lease, name string, token int64, ref string) bool {
	tx, err := w.db.Begin(ctx)
	if err != nil {
		w.count("write-error")
		return true
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if !w.c.NoGuard {
		if err := lease.Guard(ctx, tx); err != nil {
			if errors.Is(err, sleeplock.ErrLeaseLost) {
				w.count("guard-lost")
				return false
			}
			w.count("guard-error")
			w.untyped("guard", err)
			return true
		}
	}
	var id int64
	err = tx.QueryRow(ctx, "INSERT INTO "+w.q+".chaos_writes (resource, token, ref, worker, guarded, held) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
		name, token, ref, w.c.Name, !w.c.NoGuard, heldIf(!w.c.NoGuard)).Scan(&id)
	if err == nil && w.c.NoGuard {
		// Not a fence: a probe, after the write and in its transaction, of
		// whether the lease is still held as the write commits.
		switch perr := lease.Guard(ctx, tx); {
		case perr == nil:
			_, err = tx.Exec(ctx, "UPDATE "+w.q+".chaos_writes SET held = true WHERE id = $1", id)
		case errors.Is(perr, sleeplock.ErrLeaseLost):
			_, err = tx.Exec(ctx, "UPDATE "+w.q+".chaos_writes SET held = false WHERE id = $1", id)
		default:
			err = perr
		}
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	var pe *pgconn.PgError
	switch {
	case err == nil:
		w.count("write")
	case errors.As(err, &pe) && pe.Code == errStale:
		w.count("write-stale")
	default:
		w.count("write-error")
	}
	return true
}

// heldIf is the held column of a write: true when Guard fenced it, unknown
// until the probe otherwise.
func heldIf(guarded bool) *bool {
	if guarded {
		return &guarded
	}
	return nil
}

// pause waits d or until ctx ends: the simulated work of a holder and the
// back-off of a refused caller.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// recordInStore copies a grant, already in the ledger, into the store's
// database and marks it stored in the ledger once that committed: a stored
// grant missing from the store's database after a failover is a lost grant.
func (w *worker) recordInStore(ctx context.Context, names []string, tokens []int64, ref, op string, acquired time.Time, waited time.Duration) {
	_, err := w.sdb.Exec(ctx, "INSERT INTO "+w.q+".chaos_holdings (lock, token, ref, worker, op, acquired, waited) "+
		"SELECT l, t, $3, $4, $5, $6, $7 FROM unnest($1::text[], $2::bigint[]) u(l, t) ON CONFLICT DO NOTHING",
		names, tokens, ref, w.c.Name, op, acquired, waited)
	if err == nil {
		_, err = w.db.Exec(ctx, "UPDATE "+w.q+".chaos_holdings SET stored = true WHERE lock = ANY ($1::text[]) AND token = ANY ($2::bigint[]) AND ref = $3",
			names, tokens, ref)
	}
	if err != nil {
		w.count("record-error")
	}
}

// errStaleToken is a write the resource refused for its token.
var errStaleToken = errors.New("chaos: stale token")

// writeLedger makes one fenced write to the store's database (PostgreSQL
// or the SQLite file), then records it in the ledger once it committed,
// and records the attempt: when, whether the holder still believed it held
// the lease (Done not closed) and what came of it. It reports whether the
// holder should go on.
func (w *worker) writeLedger(ctx context.Context, lease sleeplock.Lease, name string, token int64, ref string) bool {
	believed := true
	select {
	case <-lease.Done():
		believed = false
	default:
	}
	at := time.Now().Add(w.offset)
	var (
		t0, t1    time.Time
		fromGuard bool
		err       error
	)
	switch {
	case w.lite != nil:
		t0, t1, fromGuard, err = w.fencedSQLite(ctx, lease, name, token, ref)
	case w.rc != nil:
		t0, t1, fromGuard, err = w.fencedRedis(ctx, lease, name, token)
	default:
		t0, t1, fromGuard, err = w.fencedPG(ctx, lease, name, token, ref)
	}
	outcome := "write"
	switch {
	case err == nil:
		w.count("write")
		if _, err := w.db.Exec(ctx, "INSERT INTO "+w.q+".chaos_writes (resource, token, ref, worker, guarded, held, t_start, t_end) "+
			"VALUES ($1, $2, $3, $4, true, true, $5, $6)", name, token, ref, w.c.Name, t0, t1); err != nil {
			w.count("record-error")
		}
	case errors.Is(err, errStaleToken):
		outcome = "write-stale"
	case fromGuard && errors.Is(err, sleeplock.ErrLeaseLost):
		outcome = "guard-lost"
	case fromGuard:
		outcome = "guard-error"
		w.untyped("guard", err)
	default:
		outcome = "write-error"
	}
	if outcome != "write" {
		w.count(outcome)
	}
	if _, err := w.db.Exec(ctx, "INSERT INTO "+w.q+".chaos_attempts (resource, token, ref, worker, at, believed, outcome) "+
		"VALUES ($1, $2, $3, $4, $5, $6, $7)", name, token, ref, w.c.Name, at, believed, outcome); err != nil {
		w.count("record-error")
	}
	return outcome != "guard-lost"
}

// fencedPG writes to name's resource in the store's PostgreSQL database, in
// a transaction fenced by Guard: when the write began and when the
// resource accepted it (database clock), and whether an error came from
// Guard.
func (w *worker) fencedPG(ctx context.Context, lease sleeplock.Lease, name string, token int64, ref string) (t0, t1 time.Time, fromGuard bool, err error) {
	tx, err := w.sdb.Begin(ctx)
	if err != nil {
		return t0, t1, false, err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if err := lease.Guard(ctx, tx); err != nil {
		return t0, t1, true, err
	}
	err = tx.QueryRow(ctx, "INSERT INTO "+w.q+".chaos_writes (resource, token, ref, worker, guarded, held) VALUES ($1, $2, $3, $4, true, true) "+
		"RETURNING t_start, t_end", name, token, ref, w.c.Name).Scan(&t0, &t1)
	if err == nil {
		err = tx.Commit(ctx)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == errStale {
		err = errStaleToken
	}
	return t0, t1, false, err
}

// fencedSQLite writes to name's resource in the SQLite file, in a
// transaction fenced by Guard; the times are this process's clock corrected
// to the ledger's, taken before the commit.
func (w *worker) fencedSQLite(ctx context.Context, lease sleeplock.Lease, name string, token int64, ref string) (t0, t1 time.Time, fromGuard bool, err error) {
	tx, err := w.lite.BeginTx(ctx, nil)
	if err != nil {
		return t0, t1, false, err
	}
	defer func() { _ = tx.Rollback() }()
	if err := lease.Guard(ctx, tx); err != nil {
		return t0, t1, true, err
	}
	t0 = time.Now().Add(w.offset)
	_, err = tx.ExecContext(ctx, "INSERT INTO chaos_writes (resource, token, ref, worker) VALUES (?, ?, ?, ?)", name, token, ref, w.c.Name)
	// the write's time is taken before the commit, as the trigger does in
	// PostgreSQL: Guard's write lock is held until the commit, so no
	// takeover can commit in between, and a pause of this process after
	// the commit does not stretch the holding
	t1 = time.Now().Add(w.offset)
	if err == nil {
		err = tx.Commit()
	}
	if err != nil && strings.Contains(err.Error(), sqliteStaleMsg) {
		err = errStaleToken
	}
	return t0, t1, false, err
}

// sampleMark starts the line a worker prints on its standard error for
// each of its first few errors of sleeplock's API, typed or not.
const sampleMark = "SAMPLE"

// sample prints err if the worker printed fewer than 3 so far.
func (w *worker) sample(op string, err error) {
	if w.shown.Add(1) <= 3 {
		fmt.Fprintf(os.Stderr, "%s %s %s: %v\n", sampleMark, w.c.Name, op, err)
	}
}

// untypedMark starts the line a worker prints on its standard error for an
// error of sleeplock's API that matches none of the errors Typed knows.
const untypedMark = "UNTYPED"

// untyped counts and prints an error of sleeplock's API (op) that Typed
// does not know.
func (w *worker) untyped(op string, err error) {
	if Typed(err) {
		return
	}
	w.count("untyped-error")
	fmt.Fprintf(os.Stderr, "%s %s %s: %v\n", untypedMark, w.c.Name, op, err)
}

// Typed reports whether err is one a caller of sleeplock can tell apart
// without reading its text: it matches one of sleeplock's errors,
// pgstore.ErrUnreachable, sqlitestore.ErrReadOnly or a context's error, or
// it is an I/O error of the database: a *sqlite.Error (SQLite's result
// code: SQLITE_IOERR, SQLITE_READONLY, SQLITE_BUSY, …), a
// *pgconn.PgError, a reply of Redis (redis.Error: LOADING, …), a closed
// Redis client or its exhausted pool, a net.Error, an *fs.PathError, a
// syscall.Errno, io.ErrUnexpectedEOF or io.EOF (a connection that ended).
func Typed(err error) bool {
	for _, e := range []error{
		sleeplock.ErrUnavailable, sleeplock.ErrLeaseLost, sleeplock.ErrNotHeld, sleeplock.ErrReleased,
		sleeplock.ErrClosed, sleeplock.ErrInvalid, sleeplock.ErrInvalidConfig, sleeplock.ErrNotFound,
		sleeplock.ErrUnsupported, pgstore.ErrUnreachable, sqlitestore.ErrReadOnly, context.DeadlineExceeded, context.Canceled,
		io.ErrUnexpectedEOF, io.EOF, net.ErrClosed,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	var (
		se *sqlite.Error
		pe *pgconn.PgError
		fe *fs.PathError
		no syscall.Errno
		ne net.Error
	)
	return errors.As(err, &se) || errors.As(err, &pe) || errors.As(err, &fe) || errors.As(err, &no) || errors.As(err, &ne) || redisTyped(err)
}

// recordBelief records in the ledger until when the holder believed it
// held the lease: when its Done channel closed, or when it began to
// release it, whichever came first.
func (w *worker) recordBelief(ctx context.Context, lease sleeplock.Lease, releasing <-chan time.Time, names []string, tokens []int64, ref string) {
	var until time.Time
	select {
	case <-lease.Done():
		until = time.Now().Add(w.offset)
	case t, ok := <-releasing:
		if !ok {
			return // the worker is stopping
		}
		until = t
	}
	_, err := w.db.Exec(ctx, "UPDATE "+w.q+".chaos_holdings SET believed_until = $4 WHERE lock = ANY ($1::text[]) AND token = ANY ($2::bigint[]) AND ref = $3",
		names, tokens, ref, until)
	if err != nil && ctx.Err() == nil {
		w.count("record-error")
	}
}
