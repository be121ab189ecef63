package chaos

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/redisstore"
	"github.com/sleeplock/sleeplock/sqlitestore"
	"github.com/sleeplock/sleeplock/store"
)

// The faults the driver injects, in turn.
const (
	FaultKill      = "kill"      // SIGKILL of a worker that holds a lock, which a fresh worker replaces
	FaultPause     = "pause"     // SIGSTOP for PauseFor of a worker that holds a lock, then SIGCONT
	FaultTerminate = "terminate" // pg_terminate_backend of a worker's connections
	FaultRestart   = "restart"   // immediate restart of PostgreSQL: only on a cluster of the run's own
	FaultReadOnly  = "readonly"  // the SQLite database file made read-only (chattr +i) for PauseFor: SQLite runs only
)

// In a Redis run (Config.Redis), FaultTerminate is CLIENT KILL of a
// worker's connections, FaultRestart is Config.RestartRedis, and
// FaultClientPause (redis.go) pauses every client.

// Config is one chaos run.
type Config struct {
	DSN            string        // the database (with FaultRestart, the run uses a cluster of its own instead)
	Workers        int           // worker processes running at once
	Goroutines     int           // loops per worker
	Members        int           // Family members in use
	Duration       time.Duration // how long faults are injected before every worker is killed
	TTL            time.Duration // lease TTL
	WaiterTTL      time.Duration // pgstore.WithWaiterTTL of the workers; 0: pgstore's default
	Poll           time.Duration // pgstore.WithPollInterval of the workers; 0: pgstore's default
	Hold           time.Duration // how long a holder holds
	Writes         int           // writes per holding
	AcquireTimeout time.Duration // deadline of a blocking acquisition (default 2×TTL + 1s)
	NoGuard        bool          // workers write without Guard: the negative control
	NoAcquireAll   bool          // workers never call AcquireAll (its waiters hold up the pool's queue)
	Faults         []string      // the faults, injected in turn (default kill, pause, terminate)
	FaultEvery     time.Duration // time between two faults (default TTL)
	PauseFor       time.Duration // how long a paused worker stays stopped (default TTL + 1s)
	// Spare is how many workers, the first started, are never killed: they
	// are paused and lose their connections as the others do, and live the
	// whole run, so that their memory is measured from start to end.
	Spare int
	// Ops ends the run early once the workers have made this many
	// operations (acquisition attempts, guarded writes and releases); 0:
	// Duration alone. Checked with the progress, every ProgressEvery.
	Ops int64
	// ProgressEvery is how often the run logs its operations so far and
	// each worker's memory (default 1 minute).
	ProgressEvery time.Duration
	// WaiterBound is added to TTL + 1s, the time after the last kill by
	// which every lock must be grantable: an allowance for a store whose dead
	// waiters block a free lock for longer than a lease TTL.
	WaiterBound    time.Duration
	ClusterVersion string // PostgreSQL version of the own cluster (default "15")
	ClusterName    string // its name's prefix (default "chaos"; a pid and a random part follow)
	ClusterPort    int    // its port (default 0: a free port)
	WorkerBin      string // the worker command; empty: built with go build into a temporary directory
	KeepSchema     bool   // keep the run's schema for inspection
	Seed           uint64 // seeds the operation mix and the choice of victims (0: random)
	Log            io.Writer
	// SQLite, when set, is the path of a SQLite database file (created by
	// the run, removed at its end) that holds the locks and the guarded
	// resources: the workers use sqlitestore, and DSN is then only the
	// PostgreSQL database of the run's records (its ledger).
	SQLite string
	// Redis, when set, is the URL (redis://…) of the Redis server that
	// holds the locks and the guarded resources, under a key prefix of the
	// run's own (its keys are deleted at its end): the workers use
	// redisstore, and DSN is then only the PostgreSQL database of the
	// run's ledger.
	Redis string
	// RestartRedis restarts the Redis server of a Redis run: the restart
	// fault, only when set (a test passes the Restart of a server of its
	// own, redisstore/redistest).
	RestartRedis func(context.Context) error

	// storeDSN, when set, is the PostgreSQL database of the locks and the
	// guarded resources, DSN being the ledger's (a failover run).
	storeDSN string
	// event, when set, runs once, eventAt after the workers started.
	event   func(ctx context.Context, d *driver) error
	eventAt time.Duration
}

func (c *Config) defaults() {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	defd := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.Workers, 3)
	def(&c.Goroutines, 4)
	def(&c.Members, 4)
	def(&c.Writes, 3)
	defd(&c.Duration, 20*time.Second)
	defd(&c.TTL, 2*time.Second)
	defd(&c.Hold, 30*time.Millisecond)
	defd(&c.AcquireTimeout, 2*c.TTL+time.Second)
	defd(&c.FaultEvery, c.TTL)
	defd(&c.PauseFor, c.TTL+time.Second)
	defd(&c.ProgressEvery, time.Minute)
	if c.Faults == nil {
		c.Faults = []string{FaultKill, FaultPause, FaultTerminate}
		if c.SQLite != "" {
			c.Faults = []string{FaultKill, FaultPause, FaultReadOnly}
		}

	}
	if c.ClusterVersion == "" {
		c.ClusterVersion = "15"
	}
	if c.ClusterName == "" {
		c.ClusterName = "chaos"
	}
	if c.Seed == 0 {
		c.Seed = mrand.Uint64()
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

func (c *Config) validate() error {
	if c.DSN == "" && (!slices.Contains(c.Faults, FaultRestart) || c.Redis != "") {
		return invalid("Config.DSN is required")
	}
	if c.Redis != "" && (c.SQLite != "" || c.storeDSN != "") {
		return invalid("Config.Redis is for a run of the Redis store alone, not with SQLite or a failover")
	}
	for _, f := range c.Faults {
		switch f {
		case FaultKill, FaultPause, FaultTerminate, FaultRestart, FaultReadOnly, FaultClientPause:
		default:
			return invalid(fmt.Sprintf("unknown fault %q (kill, pause, terminate, restart, readonly, client-pause)", f))
		}
		switch {
		case f == FaultClientPause && c.Redis == "":
			return invalid("the client-pause fault is for a Redis run (Config.Redis)")
		case f == FaultRestart && c.Redis != "" && c.RestartRedis == nil:
			return invalid("the restart fault of a Redis run needs Config.RestartRedis")
		case f == FaultReadOnly && c.SQLite == "":
			return invalid("the readonly fault is for a SQLite run (Config.SQLite)")
		case (f == FaultTerminate || f == FaultRestart) && c.SQLite != "":
			return invalid(fmt.Sprintf("the %s fault is for a PostgreSQL store, not a SQLite run", f))
		case f == FaultRestart && c.storeDSN != "":
			return invalid("the restart fault is not for a failover run")
		}
	}
	if c.NoGuard && (c.SQLite != "" || c.storeDSN != "" || c.Redis != "") {
		return invalid("NoGuard is for a run of the PostgreSQL store without a ledger")
	}
	if c.Workers < 1 || c.Goroutines < 1 || c.Members < 1 || c.Writes < 1 {
		return invalid("Workers, Goroutines, Members and Writes must be at least 1")
	}
	if c.Duration < 0 || c.TTL < 0 || c.WaiterTTL < 0 || c.Poll < 0 || c.Hold < 0 || c.FaultEvery < 0 ||
		c.PauseFor < 0 || c.WaiterBound < 0 || c.AcquireTimeout < 0 || c.ProgressEvery < 0 {
		return invalid("durations must not be negative")
	}
	if c.Spare < 0 || c.Spare >= c.Workers || c.Ops < 0 {
		return invalid("Spare must be 0 up to Workers - 1, and Ops not negative")
	}
	return nil
}

// livenessBound is how long after the last kill every lock must be grantable.
func (c Config) livenessBound() time.Duration { return c.TTL + time.Second + c.WaiterBound }

// proc is a running worker process.
type proc struct {
	name, app string
	cmd       *exec.Cmd
	done      chan struct{} // closed when the process has exited
	killed    bool          // by the driver
	paused    bool
	stderr    *syncBuffer
	started   time.Time
	rssStart  int64 // resident set size (bytes) once ready; 0: unknown
	spare     bool  // never killed (Config.Spare)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 64<<10 {
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type driver struct {
	cfg    Config
	run    string // this run's id
	dsn    string
	bin    string
	schema string
	pool   *pgxpool.Pool // the run's records
	spool  *pgxpool.Pool // the store's database (PostgreSQL store): pool, or the failover cluster's
	cl     *cluster
	rc     *redis.Client // the Redis server of a Redis run
	rng    *mrand.Rand
	rep    *Report

	mu     sync.Mutex
	procs  []*proc
	all    []*proc // every worker started, for their untyped errors
	ro     bool    // the SQLite file is read-only now
	next   int
	pauses sync.WaitGroup
	stop   chan struct{} // closed to end the pauses early
}

func (d *driver) logf(format string, args ...any) {
	fmt.Fprintf(d.cfg.Log, "chaos %s: %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// Run makes a chaos run: it sets up a schema of its own, starts the
// workers, injects the faults in turn for Duration, kills every worker,
// checks that every lock is grantable TTL + 1s (+ WaiterBound) later on the
// database's clock, runs Check and drops the schema. The error is for a run
// that could not be made; what the run found is in the Report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	d := &driver{cfg: cfg, run: hex.EncodeToString(id[:]), dsn: cfg.DSN, rng: mrand.New(mrand.NewPCG(cfg.Seed, 0)),
		stop: make(chan struct{})}
	d.rep = &Report{Config: cfg}
	d.schema = "chaos_" + d.run
	d.rep.Schema = d.schema

	if slices.Contains(cfg.Faults, FaultRestart) && cfg.Redis == "" {
		cl, err := createCluster(ctx, cfg.ClusterVersion, cfg.ClusterName, cfg.ClusterPort, false)
		if err != nil {
			msg := fmt.Sprintf("fault restart: no PostgreSQL cluster of our own (%v); the shared one is never restarted", err)
			d.rep.Skipped = append(d.rep.Skipped, msg)
			fmt.Fprintf(os.Stderr, "\n!!!!!! CHAOS: SKIPPING THE RESTART FAULT: %s\n\n", msg)
			d.cfg.Faults = slices.DeleteFunc(slices.Clone(cfg.Faults), func(f string) bool { return f == FaultRestart })
			if cfg.DSN == "" {
				return d.rep, errors.New("chaos: no cluster of our own and no Config.DSN")
			}
		} else {
			d.cl, d.dsn = cl, cl.dsn
			defer func() {
				if err := cl.drop(context.Background()); err != nil {
					d.logf("dropping the cluster: %v", err)
				}
			}()
			d.logf("own cluster %s/%s on port %d", cl.version, cl.name, cl.port)
		}
	}

	d.bin = cfg.WorkerBin
	if d.bin == "" {
		dir, err := os.MkdirTemp("", "sleeplock-chaos-")
		if err != nil {
			return nil, err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		if d.bin, err = BuildWorker(ctx, dir); err != nil {
			return nil, err
		}
	}

	pool, err := pgxpool.New(ctx, withParams(d.dsn, "application_name", "sleeplock-chaos-driver-"+d.run))
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		return nil, fmt.Errorf("chaos: connecting: %w", err)
	}
	defer pool.Close()
	d.pool, d.spool = pool, pool
	if cfg.storeDSN != "" {
		sp, err := pgxpool.New(ctx, withParams(cfg.storeDSN, "application_name", "sleeplock-chaos-driver-"+d.run))
		if err == nil {
			err = sp.Ping(ctx)
		}
		if err != nil {
			if sp != nil {
				sp.Close()
			}
			return nil, fmt.Errorf("chaos: connecting to the store: %w", err)
		}
		defer sp.Close()
		d.spool = sp
	}
	if cfg.Redis != "" {
		closeRedis, err := d.connectRedis(ctx)
		if err != nil {
			return nil, err
		}
		defer closeRedis()
	}
	if err := d.setup(ctx); err != nil {
		_ = DropSchema(context.Background(), pool, d.schema)
		return nil, err
	}
	if cfg.SQLite != "" {
		defer d.removeSQLite()
	}
	if !cfg.KeepSchema {
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := DropSchema(ctx, pool, d.schema); err != nil {
				d.logf("dropping schema %s: %v", d.schema, err)
			}
		}()
	}

	start := time.Now()
	err = d.chaos(ctx)
	d.killAll()
	d.rep.Untyped = d.workerLines(untypedMark, false, 0)
	d.rep.Errors = d.workerLines(sampleMark, true, 8)
	if err != nil {
		return d.rep, err
	}
	if err := d.liveness(ctx); err != nil {
		return d.rep, err
	}
	d.rep.Elapsed = time.Since(start)
	f, err := Check(ctx, pool, d.schema)
	if err != nil {
		return d.rep, err
	}
	d.rep.Findings = f
	if cfg.Redis != "" {
		if d.rep.Redis, err = d.checkRedis(ctx); err != nil {
			return d.rep, err
		}
	}
	return d.rep, nil
}

// BuildWorker builds the worker command into dir and returns its path.
func BuildWorker(ctx context.Context, dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("chaos: building the worker: %w", err)
	}
	bin := filepath.Join(dir, "chaos-worker")
	out, err := exec.CommandContext(ctx, goTool, "build", "-o", bin, "github.com/sleeplock/sleeplock/chaos/worker").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("chaos: go build of the worker: %w: %s", err, out)
	}
	return bin, nil
}

// chaos starts the workers and injects faults until Duration has passed.
func (d *driver) chaos(ctx context.Context) error {
	for range d.cfg.Workers {
		if _, err := d.startWorker(ctx); err != nil {
			return err
		}
	}
	d.logf("%d workers ready, schema %s", d.cfg.Workers, d.schema)
	end := time.NewTimer(d.cfg.Duration)
	defer end.Stop()
	tick := time.NewTicker(max(d.cfg.FaultEvery, 10*time.Millisecond))
	defer tick.Stop()
	progress := time.NewTicker(d.cfg.ProgressEvery)
	defer progress.Stop()
	var event <-chan time.Time
	if d.cfg.event != nil {
		et := time.NewTimer(d.cfg.eventAt)
		defer et.Stop()
		event = et.C
	}
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-event:
			event = nil
			if err := d.cfg.event(ctx, d); err != nil {
				return err
			}
			continue
		case <-end.C:
			return d.wind(ctx)
		case <-progress.C:
			if d.progress(ctx) {
				return d.wind(ctx)
			}
			continue
		case <-tick.C:
		}
		if err := d.replaceExited(ctx); err != nil {
			return err
		}
		if len(d.cfg.Faults) == 0 || d.cfg.FaultEvery == 0 {
			continue
		}
		if err := d.inject(ctx, d.cfg.Faults[i%len(d.cfg.Faults)]); err != nil {
			return err
		}
	}
}

// wind lets the paused workers resume and their holders write on, so that
// the last pauses count as much as the others.
func (d *driver) wind(ctx context.Context) error {
	d.pauses.Wait()
	pause(ctx, d.cfg.Hold+250*time.Millisecond)
	return ctx.Err()
}

// operations is the number of operations the workers have flushed to the
// records so far (as the report counts them).
func (d *driver) operations(ctx context.Context) (int64, error) {
	var n int64
	err := d.pool.QueryRow(ctx, "SELECT coalesce(sum(n), 0)::bigint FROM "+quote(d.schema)+".chaos_stats WHERE name = ANY ($1)",
		opStats).Scan(&n)
	return n, err
}

// opStats are the counters of operations: attempts to acquire, guarded
// writes, releases.
var opStats = []string{"acquire", "try", "all", "all-nowait", "write", "release"}

// progress logs the operations so far and each running worker's memory; it
// reports whether Ops is reached.
func (d *driver) progress(ctx context.Context) bool {
	n, err := d.operations(ctx)
	if err != nil {
		d.logf("progress: %v", err)
		return false
	}
	d.mu.Lock()
	var mem []string
	for _, p := range d.procs {
		mem = append(mem, fmt.Sprintf("%s %.1f MiB (%v)", p.name, float64(rss(p.cmd.Process.Pid))/(1<<20),
			time.Since(p.started).Round(time.Second)))
	}
	d.mu.Unlock()
	d.logf("progress: %d operations; workers' RSS: %s", n, strings.Join(mem, ", "))
	return d.cfg.Ops > 0 && n >= d.cfg.Ops
}

// startWorker starts a new worker and waits until it is ready, trying
// again a few times if it exits first (the database may be restarting).
func (d *driver) startWorker(ctx context.Context) (*proc, error) {
	var err error
	for range 5 {
		var p *proc
		if p, err = d.startOnce(ctx); err == nil || ctx.Err() != nil {
			return p, err
		}
		d.logf("%v; trying again", err)
		pause(ctx, time.Second)
	}
	return nil, err
}

func (d *driver) startOnce(ctx context.Context) (*proc, error) {
	d.mu.Lock()
	d.next++
	name := fmt.Sprintf("w%d", d.next)
	d.mu.Unlock()
	p := &proc{name: name, app: "sleeplock-chaos-" + d.run + "-" + name, done: make(chan struct{}), stderr: &syncBuffer{},
		spare: d.next <= d.cfg.Spare}
	dsn, ledger, kind := d.dsn, "", ""
	switch {
	case d.cfg.SQLite != "":
		dsn, ledger, kind = d.cfg.SQLite, d.dsn, StoreSQLite
	case d.cfg.storeDSN != "":
		dsn, ledger = d.cfg.storeDSN, d.dsn
	case d.cfg.Redis != "":
		dsn, ledger, kind = d.cfg.Redis, d.dsn, StoreRedis
	}
	wc := WorkerConfig{
		DSN: dsn, Ledger: ledger, Store: kind, Schema: d.schema, Name: name, AppName: p.app, Goroutines: d.cfg.Goroutines, Members: d.cfg.Members,
		TTL: d.cfg.TTL, WaiterTTL: d.cfg.WaiterTTL, Poll: d.cfg.Poll, Hold: d.cfg.Hold, Writes: d.cfg.Writes,
		AcquireTimeout: d.cfg.AcquireTimeout, NoGuard: d.cfg.NoGuard, NoAcquireAll: d.cfg.NoAcquireAll, Seed: d.rng.Uint64(),
	}
	p.cmd = exec.Command(d.bin, wc.Args()...)
	p.cmd.Stderr = p.stderr
	dieWithDriver(p.cmd)
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("chaos: starting a worker: %w", err)
	}
	d.mu.Lock()
	d.all = append(d.all, p)
	d.mu.Unlock()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := sc.Scan() && sc.Text() == "ready"
		ready <- ok
		_, _ = io.Copy(io.Discard, out)
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case ok := <-ready:
		if ok {
			p.started, p.rssStart = time.Now(), rss(p.cmd.Process.Pid)
			d.mu.Lock()
			d.procs = append(d.procs, p)
			d.mu.Unlock()
			return p, nil
		}
	case <-t.C:
	case <-ctx.Done():
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return nil, fmt.Errorf("chaos: worker %s did not start: %s", name, strings.TrimSpace(p.stderr.String()))
}

// replaceExited starts a new worker for each one that exited by itself
// (for instance when it could not connect during a restart).
func (d *driver) replaceExited(ctx context.Context) error {
	d.mu.Lock()
	var gone []*proc
	d.procs = slices.DeleteFunc(d.procs, func(p *proc) bool {
		select {
		case <-p.done:
			gone = append(gone, p)
			return true
		default:
			return false
		}
	})
	d.mu.Unlock()
	for _, p := range gone {
		d.logf("worker %s exited by itself: %s", p.name, strings.TrimSpace(p.stderr.String()))
		d.rep.Skipped = append(d.rep.Skipped, "worker "+p.name+" exited by itself: "+lastLines([]byte(p.stderr.String())))
		if _, err := d.startWorker(ctx); err != nil {
			return err
		}
	}
	return nil
}

// victim picks a running worker that is not paused (nor a spare, for a
// kill).
func (d *driver) victim(kill bool) *proc {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ps []*proc
	for _, p := range d.procs {
		if p.victim(kill) {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	return ps[d.rng.IntN(len(ps))]
}

// holder picks a running worker that is not paused and holds a lock now,
// the one that took the pool (or, with pool false, a family member) last if
// any holds it, so that the fault catches a holder early in its writes; any
// running worker if none holds.
func (d *driver) holder(ctx context.Context, pool, kill bool) *proc {
	rows, err := d.pool.Query(ctx, "SELECT worker FROM "+quote(d.schema)+".chaos_holdings "+
		"WHERE released IS NULL AND observed > clock_timestamp() - $1::bigint * interval '1 microsecond' "+
		"ORDER BY (lock = $2) = $3 DESC, observed DESC",
		(d.cfg.Hold + 100*time.Millisecond).Microseconds(), Pool, pool)
	if err != nil {
		return d.victim(kill)
	}
	var holders []string
	for rows.Next() {
		var w string
		if rows.Scan(&w) == nil {
			holders = append(holders, w)
		}
	}
	rows.Close()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range holders {
		for _, p := range d.procs {
			if p.name == w && p.victim(kill) {
				return p
			}
		}
	}
	for _, p := range d.procs {
		if p.victim(kill) {
			return p
		}
	}
	return nil
}

// victim reports whether p may take a fault now (a kill with kill): it
// runs, and is not a spare when the fault is a kill.
func (p *proc) victim(kill bool) bool { return !p.paused && !p.killed && (!kill || !p.spare) }

// now reads the database's clock, riding out a restart.
func (d *driver) now(ctx context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		var t time.Time
		err := d.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t)
		if err == nil {
			return t, nil
		}
		select {
		case <-ctx.Done():
			return t, fmt.Errorf("chaos: reading the database clock: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (d *driver) record(ctx context.Context, kind, worker string, at time.Time, until *time.Time, note string) error {
	_, err := d.pool.Exec(ctx, "INSERT INTO "+quote(d.schema)+".chaos_faults (kind, worker, at, until, note) VALUES ($1, $2, $3, $4, $5)",
		kind, worker, at, until, note)
	if err != nil {
		return fmt.Errorf("chaos: recording a fault: %w", err)
	}
	return nil
}

func (d *driver) inject(ctx context.Context, kind string) error {
	switch kind {
	case FaultKill:
		p := d.holder(ctx, false, true)
		if p == nil {
			return nil
		}
		at, err := d.now(ctx)
		if err != nil {
			return err
		}
		d.mu.Lock()
		p.killed = true
		d.mu.Unlock()
		_ = p.cmd.Process.Kill()
		<-p.done
		d.logf("killed %s", p.name)
		if err := d.record(ctx, FaultKill, p.name, at, nil, ""); err != nil {
			return err
		}
		d.mu.Lock()
		d.procs = slices.DeleteFunc(d.procs, func(q *proc) bool { return q == p })
		d.mu.Unlock()
		_, err = d.startWorker(ctx)
		return err
	case FaultPause:
		p := d.holder(ctx, true, false)
		if p == nil {
			return nil
		}
		at, err := d.now(ctx)
		if err != nil {
			return err
		}
		d.mu.Lock()
		p.paused = true
		d.mu.Unlock()
		if err := stopProcess(p.cmd.Process); err != nil {
			return err
		}
		d.logf("paused %s for %v", p.name, d.cfg.PauseFor)
		d.spell(FaultPause, p.name, at, func() {
			_ = contProcess(p.cmd.Process)
			d.mu.Lock()
			p.paused = false
			d.mu.Unlock()
		})
		return nil
	case FaultTerminate:
		p := d.victim(false)
		if p == nil {
			return nil
		}
		if d.rc != nil {
			return d.cutRedis(ctx, p)
		}
		at, err := d.now(ctx)
		if err != nil {
			return err
		}
		var n int
		err = d.spool.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid))::int FROM pg_stat_activity WHERE application_name = $1", p.app).Scan(&n)
		if err != nil {
			return fmt.Errorf("chaos: pg_terminate_backend: %w", err)
		}
		d.logf("terminated %d backends of %s", n, p.name)
		return d.record(ctx, FaultTerminate, p.name, at, nil, fmt.Sprintf("%d backends", n))
	case FaultReadOnly:
		return d.readOnly(ctx)
	case FaultClientPause:
		return d.clientPause(ctx)
	case FaultRestart:
		if d.rc != nil {
			return d.restart(ctx, "Redis", d.cfg.RestartRedis)
		}
		return d.restart(ctx, "PostgreSQL", d.cl.restart)
	}
	return nil
}

// restart restarts the store's server (what) with f and records it.
func (d *driver) restart(ctx context.Context, what string, f func(context.Context) error) error {
	at, err := d.now(ctx)
	if err != nil {
		return err
	}
	if err := f(ctx); err != nil {
		return fmt.Errorf("chaos: restarting %s: %w", what, err)
	}
	until, err := d.now(ctx)
	if err != nil {
		return err
	}
	d.logf("restarted %s in %v", what, until.Sub(at).Round(time.Millisecond))
	return d.record(ctx, FaultRestart, "", at, &until, "")
}

// spell waits PauseFor (less if the run ends first) in the background,
// then calls end and records the fault kind (of worker) from at to then.
// The run winds down only once every spell ended.
func (d *driver) spell(kind, worker string, at time.Time, end func()) {
	d.pauses.Go(func() {
		t := time.NewTimer(d.cfg.PauseFor)
		defer t.Stop()
		select {
		case <-t.C:
		case <-d.stop:
		}
		end()
		rctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		until, err := d.now(rctx)
		if err == nil {
			err = d.record(rctx, kind, worker, at, &until, "")
		}
		if err != nil {
			d.logf("recording a %s fault: %v", kind, err)
		}
	})
}

// killAll ends the pauses (resuming their workers) and kills every worker.
func (d *driver) killAll() {
	close(d.stop)
	d.pauses.Wait()
	d.mu.Lock()
	ps := slices.Clone(d.procs)
	d.procs = nil
	d.mu.Unlock()
	for _, p := range ps {
		if end := rss(p.cmd.Process.Pid); end > 0 && p.rssStart > 0 {
			d.rep.RSS = append(d.rep.RSS, WorkerRSS{Worker: p.name, Age: time.Since(p.started), Start: p.rssStart, End: end})
		}
		_ = p.cmd.Process.Kill()
	}
	slices.SortFunc(d.rep.RSS, func(a, b WorkerRSS) int { return int(b.Age - a.Age) })
	for _, p := range ps {
		<-p.done
	}
}

// liveness checks, after every worker was killed, that every lock is
// grantable (all its slots, to TryAcquire) once TTL + 1s + WaiterBound
// has passed on the database's clock, and measures when each became so.
func (d *driver) liveness(ctx context.Context) error {
	at, err := d.now(ctx)
	if err != nil {
		return err
	}
	if err := d.record(ctx, "kill-all", "", at, nil, ""); err != nil {
		return err
	}
	var s store.Store
	switch {
	case d.cfg.SQLite != "":
		s, err = sqlitestore.Open(ctx, d.cfg.SQLite)
	case d.cfg.Redis != "":
		s, err = redisstore.Open(ctx, d.cfg.Redis, redisstore.WithPrefix(redisPrefix(d.schema)))
	default:
		s, err = pgstore.New(ctx, d.spool, pgstore.WithSchema(d.schema))
	}
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	locks := sleeplock.New(s, sleeplock.WithTTL(d.cfg.TTL))
	defer func() { _ = locks.Close() }()
	slots := map[string]int{Pool: PoolSlots}
	for i := range d.cfg.Members {
		slots[Member(i)] = 1
	}
	bound := at.Add(d.cfg.livenessBound())
	freeAt := map[string]time.Time{}
	var frees []time.Duration
	stuck := map[string]bool{}
	for {
		now, err := d.now(ctx)
		if err != nil {
			return err
		}
		final := !now.Before(bound)
		for _, name := range sortedKeys(slots) {
			if _, ok := freeAt[name]; ok {
				continue
			}
			got, when, err := grantable(ctx, locks, name, slots[name])
			if err != nil {
				return err
			}
			if got == slots[name] {
				freeAt[name] = when
				frees = append(frees, when.Sub(at))
				if stuck[name] {
					d.rep.Stuck = append(d.rep.Stuck, fmt.Sprintf("%s grantable %v after the last kill", name, when.Sub(at).Round(time.Millisecond)))
				}
				continue
			}
			if final && !stuck[name] {
				stuck[name] = true
				d.rep.LostSlots += slots[name] - got
				st, _ := locks.StateDetail(ctx, name)
				d.rep.Stuck = append(d.rep.Stuck, fmt.Sprintf("%s: %d of %d slots grantable %v after the last kill; state: running %d, waiting %d, holders %d, queue %d",
					name, got, slots[name], now.Sub(at).Round(time.Millisecond), st.Running, st.Waiting, len(st.Holders), len(st.Queue)))
			}
		}
		if len(freeAt) == len(slots) || now.After(bound.Add(20*time.Second)) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	d.rep.FreeAfter = distOf(frees)
	for _, name := range sortedKeys(slots) {
		st, err := locks.State(ctx, name)
		if err != nil {
			return fmt.Errorf("chaos: state of %s: %w", name, err)
		}
		d.rep.LeftHolders += st.Running
		d.rep.LeftWaiters += st.Waiting
	}
	return nil
}

// grantable takes every slot of name with TryAcquire and gives them back:
// how many it got, and when the last was granted (the store's clock).
func grantable(ctx context.Context, locks *sleeplock.Locks, name string, slots int) (int, time.Time, error) {
	var leases []sleeplock.Lease
	defer func() {
		for _, l := range leases {
			_ = l.Release(ctx)
		}
	}()
	var when time.Time
	for range slots {
		l, err := locks.TryAcquire(ctx, name, sleeplock.NoKeepAlive())
		if errors.Is(err, sleeplock.ErrUnavailable) {
			break
		}
		if err != nil {
			return 0, when, fmt.Errorf("chaos: liveness check of %s: %w", name, err)
		}
		leases = append(leases, l)
		when = l.Acquired()
	}
	return len(leases), when, nil
}

// setup makes the run's schema: in the store's database (PostgreSQL), the
// SQLite file or the Redis server (its locks), and the ledger when the
// records are kept apart.
func (d *driver) setup(ctx context.Context) error {
	switch {
	case d.cfg.SQLite != "":
		if _, err := os.Stat(d.cfg.SQLite); err == nil {
			return invalid(fmt.Sprintf("the SQLite file %s exists: a run makes its own", d.cfg.SQLite))
		}
		if err := SetupSQLite(ctx, d.cfg.SQLite, d.cfg.Members); err != nil {
			d.removeSQLite()
			return err
		}
		return SetupLedger(ctx, d.pool, d.schema, d.cfg.Members)
	case d.cfg.Redis != "":
		if err := SetupRedis(ctx, d.cfg.Redis, redisPrefix(d.schema)); err != nil {
			return err
		}
		return SetupLedger(ctx, d.pool, d.schema, d.cfg.Members)
	case d.cfg.storeDSN != "":
		if err := Setup(ctx, d.spool, d.schema, d.cfg.Members); err != nil {
			return err
		}
		return SetupLedger(ctx, d.pool, d.schema, d.cfg.Members)
	}
	return Setup(ctx, d.pool, d.schema, d.cfg.Members)
}

// sqliteFiles are the SQLite database file and its WAL.
func (d *driver) sqliteFiles() []string { return []string{d.cfg.SQLite, d.cfg.SQLite + "-wal"} }

// removeSQLite removes the run's SQLite files, writable again first.
func (d *driver) removeSQLite() {
	for _, f := range d.sqliteFiles() {
		_ = exec.Command("chattr", "-i", f).Run()
	}
	for _, f := range append(d.sqliteFiles(), d.cfg.SQLite+"-shm", d.cfg.SQLite+"-journal") {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.logf("removing %s: %v", f, err)
		}
	}
}

// readOnly makes the SQLite database file and its WAL immutable (chattr
// +i: writes fail even through descriptors already open, and even for
// root) for PauseFor, and starts a fresh worker meanwhile, whose Open must
// fail with a typed error or succeed.
func (d *driver) readOnly(ctx context.Context) error {
	d.mu.Lock()
	busy := d.ro
	d.ro = true
	d.mu.Unlock()
	if busy {
		return nil
	}
	at, err := d.now(ctx)
	if err != nil {
		return err
	}
	for _, f := range d.sqliteFiles() {
		if out, err := exec.CommandContext(ctx, "chattr", "+i", f).CombinedOutput(); err != nil {
			d.logf("chattr +i %s: %v: %s", f, err, out)
			msg := fmt.Sprintf("fault readonly: chattr +i %s: %v %s", f, err, strings.TrimSpace(string(out)))
			d.mu.Lock()
			d.rep.Skipped = append(d.rep.Skipped, msg)
			d.mu.Unlock()
		}
	}
	d.logf("made %s read-only for %v", d.cfg.SQLite, d.cfg.PauseFor)
	d.pauses.Go(func() {
		fresh, err := d.startOnce(ctx)
		if err != nil {
			d.logf("a worker started while read-only: %v", err)
		} else {
			d.logf("worker %s started while read-only", fresh.name)
			// it stays for the spell only: the run keeps Workers workers
			defer d.retire(fresh)
		}
		t := time.NewTimer(d.cfg.PauseFor)
		defer t.Stop()
		select {
		case <-t.C:
		case <-d.stop:
		}
		for _, f := range d.sqliteFiles() {
			_ = exec.Command("chattr", "-i", f).Run()
		}
		d.mu.Lock()
		d.ro = false
		d.mu.Unlock()
		rctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		until, err := d.now(rctx)
		if err == nil {
			err = d.record(rctx, FaultReadOnly, "", at, &until, "")
		}
		if err != nil {
			d.logf("recording a read-only spell: %v", err)
		}
	})
	return nil
}

// workerLines are the lines the workers printed that begin with mark,
// without their worker's name when distinct only (the first max of them;
// all with distinct false).
func (d *driver) workerLines(mark string, distinct bool, most int) []string {
	d.mu.Lock()
	ps := slices.Clone(d.all)
	d.mu.Unlock()
	var out []string
	seen := map[string]bool{}
	for _, p := range ps {
		for line := range strings.SplitSeq(p.stderr.String(), "\n") {
			i := strings.Index(line, mark)
			if i < 0 {
				continue
			}
			line = line[i:]
			if distinct {
				// SAMPLE wN op: message → op: message
				f := strings.SplitN(line, " ", 3)
				if len(f) < 3 || seen[f[2]] {
					continue
				}
				seen[f[2]] = true
			}
			if most > 0 && len(out) == most {
				return out
			}
			out = append(out, line)
		}
	}
	return out
}

// retire kills p (SIGKILL) and removes it from the running workers.
func (d *driver) retire(p *proc) {
	d.mu.Lock()
	p.killed = true
	d.procs = slices.DeleteFunc(d.procs, func(q *proc) bool { return q == p })
	d.mu.Unlock()
	_ = p.cmd.Process.Kill()
	<-p.done
}
