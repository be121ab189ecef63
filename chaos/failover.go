package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/pgstore"
)

// FailoverConfig is a failover run: the chaos workers against a primary
// with a streaming standby, both clusters of the run's own; mid-run the
// primary is stopped (-m immediate, for good) and the standby promoted.
type FailoverConfig struct {
	// Chaos is the run: workers, TTL, Duration, the faults (kill and
	// terminate; not restart). Its DSN is the ledger, a PostgreSQL database
	// outside the clusters where the workers record what they were told.
	Chaos Config
	// Sync makes the standby synchronous (synchronous_standby_names '*',
	// synchronous_commit on); otherwise it is asynchronous.
	Sync bool
	// Stall, when positive, stalls replication this long before the primary
	// dies: the primary's WAL sender is stopped (SIGSTOP), then killed
	// (SIGKILL) as the primary is stopped, so that what it held back never
	// reaches the standby. (SIGSTOP of the standby's WAL receiver would not
	// do: what the sender wrote waits in the socket, and is applied once the
	// receiver resumes; SIGKILL of the receiver makes the standby restart,
	// seconds before it can be promoted. pg_wal_replay_pause() stops the
	// replay, not the receiver: what was received is applied at promotion.)
	Stall time.Duration
	// At is when the primary dies, after the workers started (default
	// Chaos.Duration / 2); with a Stall, the stall begins Stall earlier.
	At          time.Duration
	PrimaryPort int // default 0: a free port
	StandbyPort int // default 0: a free port
}

// FailoverReport is what a failover run found.
type FailoverReport struct {
	*Report
	Sync  bool
	Stall time.Duration
	// StallLag is how far the standby's replay was behind the primary's
	// WAL (bytes) when the primary died.
	StallLag int64
	// PrimaryStopped, PromoteIssued and Promoted are the database's clock
	// when the primary was stopped, when the promotion was asked for and
	// when the standby accepted writes.
	PrimaryStopped, PromoteIssued, Promoted time.Time
	// FirstGrant is Promoted → the first grant on the new primary.
	FirstGrant time.Duration
	// Recovery is Promoted → the first grant of each lock on the new
	// primary, to a worker or to the driver's probe (TryAcquire of every
	// lock every 20ms from the promotion on, until it succeeds);
	// Unrecovered names the locks not granted within TTL + 1s (Hold + 1s
	// when holders hold longer than the TTL).
	Recovery    map[string]time.Duration
	Unrecovered []string
	// Probe is Promoted → the probe's first grant of each lock.
	Probe map[string]time.Duration
	// ProbeStuck is the state (holders, queue) of each lock the probe could
	// not take, when it gave up (TTL + 3s after the promotion).
	ProbeStuck []string

	probed map[string]time.Time
	// LostGrants counts grants acknowledged to a worker (and recorded in
	// the store's database) that the new primary does not have; LostWrites
	// the acknowledged writes it does not have.
	LostGrants, LostWrites int64
	// TokenDecreases counts grants of a lock with a token no greater than
	// one of a grant acknowledged before; TokensTwice counts tokens of a
	// lock granted to two refs.
	TokenDecreases, TokensTwice int64
	// BeliefOverlaps counts holdings of a one-slot lock whose holder still
	// believed it held (Done not closed, no release begun) when a later
	// grant of the lock to another holder had been observed; BeliefMax is
	// the longest such overlap.
	BeliefOverlaps int64
	BeliefMax      time.Duration
	// GuardRefusedBelieved counts the writes Guard refused as the lease
	// lost while its holder still believed it held (Done not closed).
	GuardRefusedBelieved int64
	// CancelledSyncWaits counts the primary's log lines "canceling wait for
	// synchronous replication": commits made on the primary alone, each
	// reported to its client as a success with a WARNING.
	CancelledSyncWaits int
	// CancelProbe is what a client configured by pgstore.ConfigurePool got
	// from an UPDATE whose 500ms deadline passed in its wait for
	// synchronous replication (stalled runs of the synchronous mode): its
	// error (nil: a success) and the notices the server sent.
	CancelProbe string
}

// OK reports whether the run met the synchronous mode's guarantees: no
// violation, no lost slot, every lock granted within TTL + 1s of the
// promotion, no lost grant or write, no token decreasing or granted twice,
// no holder that believed it held while another held.
func (r *FailoverReport) OK() bool {
	return r.Report != nil && r.Report.OK() && len(r.Unrecovered) == 0 && r.LostGrants == 0 && r.LostWrites == 0 &&
		r.TokenDecreases == 0 && r.TokensTwice == 0 && r.BeliefOverlaps == 0
}

// Write prints the report.
func (r *FailoverReport) Write(w io.Writer) {
	mode := "asynchronous"
	if r.Sync {
		mode = "synchronous"
	}
	if r.Stall > 0 {
		mode += fmt.Sprintf(", replication stalled %v before the primary died (replay %d bytes behind)", r.Stall, r.StallLag)
	}
	fmt.Fprintf(w, "failover: %s\n", mode)
	if r.Report != nil {
		r.Report.Write(w)
	}
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	if !r.Promoted.IsZero() {
		fmt.Fprintf(w, "promotion: primary stopped → promote asked %v, promote asked → accepting writes %v\n",
			ms(r.PromoteIssued.Sub(r.PrimaryStopped)), ms(r.Promoted.Sub(r.PromoteIssued)))
		fmt.Fprintf(w, "promoted → first grant %v (from the promote command: %v)\n", ms(r.FirstGrant), ms(r.FirstGrant+r.Promoted.Sub(r.PromoteIssued)))
	}
	var rec []string
	for _, k := range sortedKeys(r.Recovery) {
		rec = append(rec, fmt.Sprintf("%s=%v", k, ms(r.Recovery[k])))
	}
	var pr []string
	for _, k := range sortedKeys(r.Probe) {
		pr = append(pr, fmt.Sprintf("%s=%v", k, ms(r.Probe[k])))
	}
	fmt.Fprintf(w, "promoted → first grant of each lock: %s (the probe's: %s); not within TTL + 1s: %v\n",
		strings.Join(rec, " "), strings.Join(pr, " "), r.Unrecovered)
	for _, st := range r.ProbeStuck {
		fmt.Fprintf(w, "  not taken by the probe: %s\n", st)
	}
	fmt.Fprintf(w, "lost: grants %d, writes %d; tokens: decreases %d, granted twice %d\n", r.LostGrants, r.LostWrites, r.TokenDecreases, r.TokensTwice)
	fmt.Fprintf(w, "holders that believed they held while another held: %d (longest %v); writes Guard refused to a holder that believed it held: %d\n",
		r.BeliefOverlaps, ms(r.BeliefMax), r.GuardRefusedBelieved)
	fmt.Fprintf(w, "the primary's cancelled waits for synchronous replication (committed locally): %d\n", r.CancelledSyncWaits)
	if r.CancelProbe != "" {
		fmt.Fprintf(w, "an UPDATE cancelled (pgstore.ConfigurePool, 500ms deadline) in its wait for synchronous replication: %s\n", r.CancelProbe)
	}
}

// pair is a primary and its streaming standby, clusters of the run's own.
type pair struct {
	primary, standby *cluster
	dsn              string // multi-host, read-write
	sender           int    // pid of the primary's stopped WAL sender
}

const slotName = "sleeplock_failover"

// pgBin is the path of a PostgreSQL program of version.
func pgBin(version, name string) string {
	return filepath.Join("/usr/lib/postgresql", version, "bin", name)
}

// createPair creates the primary (started) and the standby (pg_basebackup -R
// with a replication slot, started and streaming).
func createPair(ctx context.Context, version string, pport, sport int, sync bool) (p *pair, err error) {
	p = &pair{}
	if p.primary, err = createCluster(ctx, version, "sleeplock_primary", pport, false); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = p.drop()
		}
	}()
	conn, err := pgx.Connect(ctx, p.primary.dsn)
	if err != nil {
		return p, err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err = conn.Exec(ctx, "SELECT pg_create_physical_replication_slot($1)", slotName); err != nil {
		return p, fmt.Errorf("replication slot: %w", err)
	}
	sb, err := createCluster(ctx, version, "sleeplock_standby", sport, true)
	if err != nil {
		return p, err
	}
	p.standby = sb
	data := filepath.Join("/var/lib/postgresql", version, sb.name)
	// the base backup goes into the new cluster's emptied data directory
	entries, err := os.ReadDir(data)
	if err != nil {
		return p, err
	}
	for _, e := range entries {
		if err = os.RemoveAll(filepath.Join(data, e.Name())); err != nil {
			return p, err
		}
	}
	out, err := exec.CommandContext(ctx, "runuser", "-u", "postgres", "--", pgBin(version, "pg_basebackup"),
		"-h", "127.0.0.1", "-p", strconv.Itoa(p.primary.port), "-U", "postgres", "-D", data, "-R", "-S", slotName, "-X", "stream", "-c", "fast").CombinedOutput()
	if err != nil {
		return p, fmt.Errorf("pg_basebackup: %w: %s", err, lastLines(out))
	}
	if out, err = exec.CommandContext(ctx, "pg_ctlcluster", version, sb.name, "start").CombinedOutput(); err != nil {
		return p, fmt.Errorf("starting the standby: %w: %s", err, lastLines(out))
	}
	if err = sb.waitUp(ctx, 30*time.Second); err != nil {
		return p, err
	}
	if sync {
		// after the base backup, so that the standby's copy of the settings
		// does not wait for a standby of its own once promoted
		if _, err = conn.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '*'"); err == nil {
			_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
		}
		if err != nil {
			return p, fmt.Errorf("synchronous_standby_names: %w", err)
		}
	}
	want := "async"
	if sync {
		want = "sync"
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		var n int
		err = conn.QueryRow(wctx, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = $1", want).Scan(&n)
		if err == nil && n == 1 {
			break
		}
		select {
		case <-wctx.Done():
			if err == nil {
				err = fmt.Errorf("%d standbys streaming", n)
			}
			return p, fmt.Errorf("the standby is not streaming (%s): %w", want, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	p.dsn = fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=postgres dbname=postgres sslmode=disable connect_timeout=2 target_session_attrs=read-write", p.primary.port, sb.port)
	return p, nil
}

// drop stops and removes both clusters, resuming a stopped WAL sender
// first.
func (p *pair) drop() error {
	if p.sender > 0 {
		_ = syscall.Kill(p.sender, syscall.SIGCONT)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	for _, c := range []*cluster{p.standby, p.primary} {
		if c != nil {
			errs = append(errs, c.drop(ctx))
		}
	}
	return errors.Join(errs...)
}

// fail stalls the standby if asked, stops the primary for good and
// promotes the standby, recording each step.
func (p *pair) fail(ctx context.Context, d *driver, fc FailoverConfig, r *FailoverReport) error {
	if fc.Stall > 0 {
		pc, err := pgx.Connect(ctx, p.primary.dsn)
		if err != nil {
			return fmt.Errorf("chaos failover: %w", err)
		}
		err = pc.QueryRow(ctx, "SELECT pid FROM pg_stat_replication").Scan(&p.sender)
		if err != nil {
			_ = pc.Close(ctx)
			return fmt.Errorf("chaos failover: the WAL sender: %w", err)
		}
		at, err := d.now(ctx)
		if err != nil {
			_ = pc.Close(ctx)
			return err
		}
		if err := syscall.Kill(p.sender, syscall.SIGSTOP); err != nil {
			_ = pc.Close(ctx)
			return fmt.Errorf("chaos failover: stopping the WAL sender: %w", err)
		}
		d.logf("stopped the primary's WAL sender (pid %d): replication stalls", p.sender)
		t0 := time.Now()
		if fc.Sync {
			r.CancelProbe = cancelProbe(ctx, p.primary.dsn, d.schema)
			d.logf("a statement cancelled in its wait for synchronous replication: %s", r.CancelProbe)
		}
		pause(ctx, fc.Stall-time.Since(t0))
		_ = pc.QueryRow(ctx, "SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), 0)::bigint FROM pg_stat_replication").Scan(&r.StallLag)
		_ = pc.Close(ctx)
		until, err := d.now(ctx)
		if err != nil {
			return err
		}
		if err := d.record(ctx, "stall", "", at, &until, strconv.Itoa(p.sender)); err != nil {
			return err
		}
	}
	at, err := d.now(ctx)
	if err != nil {
		return err
	}
	if p.sender > 0 {
		// what the stopped sender holds never reaches the standby
		_ = syscall.Kill(p.sender, syscall.SIGKILL)
		p.sender = 0
	}
	if out, err := exec.CommandContext(ctx, "pg_ctlcluster", p.primary.version, p.primary.name, "stop", "-m", "immediate").CombinedOutput(); err != nil {
		return fmt.Errorf("chaos failover: stopping the primary: %w: %s", err, lastLines(out))
	}
	if r.PrimaryStopped, err = d.now(ctx); err != nil {
		return err
	}
	if err := d.record(ctx, "primary-stop", "", at, &r.PrimaryStopped, ""); err != nil {
		return err
	}
	d.logf("stopped the primary")
	if r.PromoteIssued, err = d.now(ctx); err != nil {
		return err
	}
	var ok bool
	for {
		// the standby may not take connections at once
		c, err := pgx.Connect(ctx, p.standby.dsn)
		if err == nil {
			err = c.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&ok)
			_ = c.Close(ctx)
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil || d.sinceDB(ctx, r.PromoteIssued) > time.Minute {
			return fmt.Errorf("chaos failover: promoting the standby: %w", err)
		}
		pause(ctx, 50*time.Millisecond)
	}
	if !ok {
		return errors.New("chaos failover: the standby was not promoted within 60s")
	}
	if r.Promoted, err = d.now(ctx); err != nil {
		return err
	}
	d.logf("promoted the standby in %v", r.Promoted.Sub(r.PromoteIssued).Round(time.Millisecond))
	d.pauses.Go(func() { probe(d, r, d.cfg.TTL+3*time.Second) })
	return d.record(ctx, "promote", "", r.PromoteIssued, &r.Promoted, "")
}

// probe tries every lock (TryAcquire, released at once; one goroutine per
// lock) every 20ms from the promotion on until each was granted once, or
// for at most limit: when each became grantable, whoever asks.
func probe(d *driver, r *FailoverReport, limit time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	s, err := pgstore.New(ctx, d.spool, pgstore.WithSchema(d.schema), pgstore.WithoutListen())
	if err != nil {
		d.logf("probe: %v", err)
		return
	}
	locks := sleeplock.New(s, sleeplock.WithTTL(d.cfg.TTL))
	defer func() { _ = locks.Close() }()
	names, _ := resources(d.cfg.Members)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	r.probed = map[string]time.Time{}
	for _, name := range names {
		wg.Go(func() {
			for ctx.Err() == nil {
				if l, err := locks.TryAcquire(ctx, name, sleeplock.NoKeepAlive()); err == nil {
					mu.Lock()
					r.probed[name] = l.Acquired()
					mu.Unlock()
					_ = l.Release(ctx)
					return
				}
				pause(ctx, 20*time.Millisecond)
			}
		})
	}
	wg.Wait()
	// what stands in the way of the locks the probe never got
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range names {
		if _, ok := r.probed[name]; ok {
			continue
		}
		st, err := locks.StateDetail(sctx, name)
		if err != nil {
			r.ProbeStuck = append(r.ProbeStuck, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		var hs, ws []string
		for _, h := range st.Holders {
			hs = append(hs, fmt.Sprintf("%s token %d expires %+v", h.Ref, h.Token, h.Expires.Sub(st.Now).Round(time.Millisecond)))
		}
		for _, w := range st.Queue {
			ws = append(ws, fmt.Sprintf("%s since %v %v", w.Ref, st.Now.Sub(w.Since).Round(time.Millisecond), w.Locks))
		}
		r.ProbeStuck = append(r.ProbeStuck, fmt.Sprintf("%s %v after the promotion: running %d, waiting %d; holders [%s]; queue [%s]",
			name, st.Now.Sub(r.Promoted).Round(time.Millisecond), st.Running, st.Waiting, strings.Join(hs, ", "), strings.Join(ws, ", ")))
	}
}

// sinceDB is the time on the database's clock since t (0 when it cannot
// be read).
func (d *driver) sinceDB(ctx context.Context, t time.Time) time.Duration {
	now, err := d.now(ctx)
	if err != nil {
		return 0
	}
	return now.Sub(t)
}

// RunFailover makes a failover run: it creates a primary (PrimaryPort) and
// a streaming standby (StandbyPort), synchronous or not, runs the chaos
// workers against both through a multi-host DSN (target_session_attrs
// read-write) with their records in the ledger (Chaos.DSN), stops the
// primary At into the run (after stalling replication for Stall if
// asked), promotes the standby, and checks the ledger against the
// new primary. The clusters are always dropped. The error is for a run that
// could not be made; what it found is in the report.
func RunFailover(ctx context.Context, fc FailoverConfig) (*FailoverReport, error) {
	cfg := fc.Chaos
	if cfg.DSN == "" {
		return nil, invalid("FailoverConfig.Chaos.DSN (the ledger) is required")
	}
	if cfg.SQLite != "" {
		return nil, invalid("a failover run is of the PostgreSQL store, not SQLite")
	}
	if cfg.Faults == nil {
		cfg.Faults = []string{FaultKill, FaultTerminate}
	}
	cfg.defaults()
	if fc.At == 0 {
		fc.At = cfg.Duration / 2
	}
	if fc.Stall < 0 || fc.At < fc.Stall {
		return nil, invalid("FailoverConfig.Stall must be in [0, At]")
	}
	cfg.storeDSN = "the failover pair" // checked as a failover run before the clusters are made
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p, err := createPair(ctx, cfg.ClusterVersion, fc.PrimaryPort, fc.StandbyPort, fc.Sync)
	if err != nil {
		return nil, fmt.Errorf("chaos failover: clusters: %w", err)
	}
	r := &FailoverReport{Sync: fc.Sync, Stall: fc.Stall}
	defer func() {
		r.CancelledSyncWaits = p.primary.countLog("canceling wait for synchronous replication")
		if err := p.drop(); err != nil {
			fmt.Fprintf(cfg.Log, "chaos failover: dropping the clusters: %v\n", err)
		}
	}()
	cfg.storeDSN = p.dsn
	cfg.eventAt = fc.At - fc.Stall
	cfg.event = func(ctx context.Context, d *driver) error { return p.fail(ctx, d, fc, r) }
	cfg.KeepSchema = true
	rep, err := Run(ctx, cfg)
	r.Report = rep
	if rep == nil {
		return r, err
	}
	ledger, perr := pgxpool.New(context.Background(), cfg.DSN)
	if perr != nil {
		return r, errors.Join(err, perr)
	}
	defer ledger.Close()
	defer func() { _ = DropSchema(context.Background(), ledger, rep.Schema) }()
	if err != nil {
		return r, err
	}
	if r.Promoted.IsZero() {
		return r, errors.New("chaos failover: the run ended before the promotion")
	}
	if err := r.analyse(ctx, ledger, p.dsn, rep.Schema, recoveryBound(rep.Config.TTL, rep.Config.Hold)); err != nil {
		return r, err
	}
	return r, nil
}

// recoveryBound is how soon after the promotion every lock must have been
// granted: TTL + 1s, or, when holders hold longer than the TTL (renewing
// their leases), Hold + 1s, since a holder granted just before the
// promotion legitimately keeps its lock that long on the new primary.
func recoveryBound(ttl, hold time.Duration) time.Duration { return max(ttl, hold) + time.Second }

// analyse compares the ledger with what the new primary kept, and measures
// the recovery against bound.
func (r *FailoverReport) analyse(ctx context.Context, ledger *pgxpool.Pool, storeDSN, schema string, bound time.Duration) error {
	q := quote(schema)
	st, err := pgx.Connect(ctx, storeDSN)
	if err != nil {
		return fmt.Errorf("chaos failover: the new primary: %w", err)
	}
	defer func() { _ = st.Close(context.Background()) }()
	// the new primary's grants and writes, copied into the ledger
	if _, err := ledger.Exec(ctx, "CREATE TABLE "+q+".kept_holdings (lock text, token bigint, ref text); "+
		"CREATE TABLE "+q+".kept_writes (resource text, ref text, t_end timestamptz)"); err != nil {
		return fmt.Errorf("chaos failover: %w", err)
	}
	copyTable := func(sel, table string, cols []string) error {
		rows, err := st.Query(ctx, sel)
		if err != nil {
			return err
		}
		var vals [][]any
		for rows.Next() {
			v, err := rows.Values()
			if err != nil {
				rows.Close()
				return err
			}
			vals = append(vals, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		_, err = ledger.CopyFrom(ctx, pgx.Identifier{schema, table}, cols, pgx.CopyFromRows(vals))
		return err
	}
	if err := copyTable("SELECT lock, token, ref FROM "+q+".chaos_holdings", "kept_holdings", []string{"lock", "token", "ref"}); err != nil {
		return fmt.Errorf("chaos failover: copying the new primary's grants: %w", err)
	}
	if err := copyTable("SELECT resource, ref, t_end FROM "+q+".chaos_writes", "kept_writes", []string{"resource", "ref", "t_end"}); err != nil {
		return fmt.Errorf("chaos failover: copying the new primary's writes: %w", err)
	}
	err = ledger.QueryRow(ctx, `
SELECT (SELECT count(*) FROM `+q+`.chaos_holdings h WHERE h.stored
           AND NOT EXISTS (SELECT 1 FROM `+q+`.kept_holdings k WHERE k.lock = h.lock AND k.token = h.token AND k.ref = h.ref)),
       (SELECT count(*) FROM `+q+`.chaos_writes w
         WHERE NOT EXISTS (SELECT 1 FROM `+q+`.kept_writes k WHERE k.resource = w.resource AND k.ref = w.ref AND k.t_end = w.t_end)),
       (SELECT count(*) FROM `+q+`.chaos_holdings g WHERE EXISTS (
            SELECT 1 FROM `+q+`.chaos_holdings e
             WHERE e.lock = g.lock AND e.ref <> g.ref AND e.token >= g.token AND e.observed < g.acquired)),
       (SELECT count(*) FROM (SELECT lock, token FROM `+q+`.chaos_holdings GROUP BY lock, token HAVING count(DISTINCT ref) > 1) t)`).
		Scan(&r.LostGrants, &r.LostWrites, &r.TokenDecreases, &r.TokensTwice)
	if err != nil {
		return fmt.Errorf("chaos failover: %w", err)
	}
	// a holder that still believed it held (Done open, no release begun)
	// when a later grant of its one-slot lock to another ref was observed
	var most *time.Duration
	err = ledger.QueryRow(ctx, `
SELECT count(DISTINCT (a.lock, a.ref)), max(a.believed_until - b.observed)
  FROM `+q+`.chaos_holdings a
  JOIN `+q+`.chaos_resources r ON r.name = a.lock AND r.slots = 1
  JOIN `+q+`.chaos_holdings b ON b.lock = a.lock AND b.ref <> a.ref AND b.observed > a.observed
 WHERE b.observed < a.believed_until`).Scan(&r.BeliefOverlaps, &most)
	if err != nil {
		return fmt.Errorf("chaos failover: %w", err)
	}
	err = ledger.QueryRow(ctx, "SELECT count(*) FROM "+q+".chaos_attempts WHERE believed AND outcome = 'guard-lost'").Scan(&r.GuardRefusedBelieved)
	if err != nil {
		return fmt.Errorf("chaos failover: %w", err)
	}
	if most != nil {
		r.BeliefMax = *most
	}
	r.Recovery, r.Probe = map[string]time.Duration{}, map[string]time.Duration{}
	first := time.Duration(-1)
	if err := collect(ctx, ledger, "SELECT r.name, (SELECT min(h.acquired) FROM "+q+".chaos_holdings h WHERE h.lock = r.name AND h.acquired >= $1) "+
		"FROM "+q+".chaos_resources r ORDER BY r.name", func(rows pgx.Rows) error {
		var name string
		var at *time.Time
		if err := rows.Scan(&name, &at); err != nil {
			return err
		}
		if pt, ok := r.probed[name]; ok {
			r.Probe[name] = pt.Sub(r.Promoted)
			if at == nil || pt.Before(*at) {
				at = &pt
			}
		}
		if at == nil {
			r.Unrecovered = append(r.Unrecovered, name+" (never)")
			return nil
		}
		d := at.Sub(r.Promoted)
		r.Recovery[name] = d
		if d > bound {
			r.Unrecovered = append(r.Unrecovered, fmt.Sprintf("%s (%v)", name, d.Round(time.Millisecond)))
		}
		if first < 0 || d < first {
			first = d
		}
		return nil
	}, r.Promoted); err != nil {
		return err
	}
	r.FirstGrant = max(first, 0)
	return nil
}

// countLog counts the lines of the cluster's log that contain s.
func (c *cluster) countLog(s string) int {
	b, err := os.ReadFile(filepath.Join("/var/log/postgresql", "postgresql-"+c.version+"-"+c.name+".log"))
	if err != nil {
		return 0
	}
	return strings.Count(string(b), s)
}

// cancelProbe runs, on the primary while replication stalls, an UPDATE
// with a 500ms deadline through a pool configured as pgstore configures
// its own (a cancel request when the context ends), and says what the
// client got: the error (nil is a success) and the server's notices.
func cancelProbe(ctx context.Context, dsn, schema string) string {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return err.Error()
	}
	pgstore.ConfigurePool(cfg)
	var (
		mu      sync.Mutex
		notices []string
	)
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		notices = append(notices, n.Severity+": "+n.Message)
		mu.Unlock()
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err.Error()
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return err.Error()
	}
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	t0 := time.Now()
	_, err = pool.Exec(cctx, "UPDATE "+quote(schema)+".chaos_resources SET accepted = accepted WHERE name = $1", Pool)
	cancel()
	el := time.Since(t0).Round(time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	return fmt.Sprintf("error %v after %v; notices %q", err, el, notices)
}
