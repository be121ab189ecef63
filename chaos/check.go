package chaos

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Dist is a distribution of durations.
type Dist struct {
	N             int
	P50, P99, Max time.Duration
}

func distOf(ds []time.Duration) Dist {
	if len(ds) == 0 {
		return Dist{}
	}
	slices.Sort(ds)
	q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	return Dist{N: len(ds), P50: q(0.50), P99: q(0.99), Max: ds[len(ds)-1]}
}

// String prints the count, p50, p99 and max, rounded to 0.1ms.
func (d Dist) String() string {
	if d.N == 0 {
		return "n=0"
	}
	r := func(x time.Duration) time.Duration { return x.Round(100 * time.Microsecond) }
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", d.N, r(d.P50), r(d.P99), r(d.Max))
}

// Findings is what Check reads from a run's tables.
type Findings struct {
	Holdings int64            // grants recorded by the workers
	Writes   int64            // accepted writes
	Stats    map[string]int64 // the workers' counters, summed
	Faults   map[string]int   // faults by kind

	// Overlaps counts holdings that began while their lock already had as
	// many holdings as slots: a holding spans from just after its grant
	// (observed) to its last accepted write (of its ref and token).
	Overlaps int64
	// LateWrites counts writes to a one-slot resource accepted after a grant
	// of a newer token of that lock was observed: a write by a holder whose
	// lease had been taken over.
	LateWrites int64
	// Unheld counts accepted writes made while their lease was no longer
	// held, as a probe in the write's own transaction found (workers
	// without Guard only: with Guard such a write is refused).
	Unheld     int64
	MaxHolders map[string]int // the most holdings of each lock at once
	// TokensTwice counts the (lock, token) pairs granted to two refs: a
	// grant acknowledged to its caller and then lost by the store. Not a
	// violation of Guard's fence (the lost holder's writes are refused), so
	// not counted in Violations, but a resource fenced by the token alone
	// is not protected: a SQLite run counts it as a violation
	// (Report.Violations), a PostgreSQL run only reports it (see
	// docs/failover.md).
	TokensTwice int64

	KillTakeover  Dist // kill -9 of a holder → next grant of its lock
	PauseTakeover Dist // SIGSTOP of a holder → next grant of its lock
	Handoff       Dist // release → grant to a caller that was waiting
}

// Violations is the number of safety violations found: Overlaps +
// LateWrites + Unheld.
func (f *Findings) Violations() int64 { return f.Overlaps + f.LateWrites + f.Unheld }

// Check reads the run's tables in schema and checks its safety: no lock
// with more holdings than slots at any moment, no write accepted from a
// holder whose one-slot lease was taken over. It also measures the kill→
// takeover, pause→takeover and handoff latencies, all on the database's
// clock.
func Check(ctx context.Context, pool *pgxpool.Pool, schema string) (*Findings, error) {
	c := checker{pool: pool, q: pgx.Identifier{schema}.Sanitize(),
		f: &Findings{Stats: map[string]int64{}, Faults: map[string]int{}, MaxHolders: map[string]int{}}}
	for _, step := range []func(context.Context) error{c.counts, c.overlaps, c.safety, c.takeovers, c.handoffs} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return c.f, nil
}

// checker is one Check: the ledger's schema (q, quoted) and the findings
// each step adds to.
type checker struct {
	pool *pgxpool.Pool
	q    string
	f    *Findings
}

// counts reads the numbers of holdings, writes, operations and faults.
func (c *checker) counts(ctx context.Context) error {
	q, f := c.q, c.f
	err := c.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+q+".chaos_holdings), (SELECT count(*) FROM "+q+".chaos_writes)").
		Scan(&f.Holdings, &f.Writes)
	if err != nil {
		return fmt.Errorf("chaos check: %w", err)
	}
	if err := collect(ctx, c.pool, "SELECT name, sum(n)::bigint FROM "+q+".chaos_stats GROUP BY name", func(r pgx.Rows) error {
		var n string
		var v int64
		err := r.Scan(&n, &v)
		f.Stats[n] = v
		return err
	}); err != nil {
		return err
	}
	if err := collect(ctx, c.pool, "SELECT kind, count(*)::int FROM "+q+".chaos_faults GROUP BY kind", func(r pgx.Rows) error {
		var k string
		var v int
		err := r.Scan(&k, &v)
		f.Faults[k] = v
		return err
	}); err != nil {
		return err
	}
	return nil
}

// overlaps finds the most holders seen at once on each lock and the
// grants past its slots.
func (c *checker) overlaps(ctx context.Context) error {
	q, f := c.q, c.f
	// Overlaps: a sweep over the holdings' intervals, ends before starts at
	// the same instant.
	overlaps := `
WITH iv AS (
    SELECT h.lock, h.token, h.observed AS s, max(w.t_end) AS e
      FROM ` + q + `.chaos_holdings h
      JOIN ` + q + `.chaos_writes w ON w.resource = h.lock AND w.token = h.token AND w.ref = h.ref
     GROUP BY h.lock, h.token, h.ref, h.observed
), ev AS (
    SELECT lock, s AS t, 1 AS d FROM iv
    UNION ALL
    SELECT lock, e, -1 FROM iv
), run AS (
    SELECT lock, d, sum(d) OVER (PARTITION BY lock ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS c FROM ev
)
SELECT run.lock, max(run.c)::int, count(*) FILTER (WHERE run.d = 1 AND run.c > r.slots)
  FROM run JOIN ` + q + `.chaos_resources r ON r.name = run.lock
 GROUP BY run.lock`
	if err := collect(ctx, c.pool, overlaps, func(r pgx.Rows) error {
		var lock string
		var most int
		var n int64
		err := r.Scan(&lock, &most, &n)
		f.MaxHolders[lock] = most
		f.Overlaps += n
		return err
	}); err != nil {
		return err
	}
	return nil
}

// safety counts late writes, tokens granted twice and unheld writes.
func (c *checker) safety(ctx context.Context) error {
	q, f := c.q, c.f
	// A late write: one to a one-slot resource that ended after a grant of
	// a greater token was observed. later(lock, token) is the earliest
	// observation of a greater token, a running minimum over the tokens in
	// descending order (linear: a correlated subquery is quadratic, and
	// took 8 minutes on the ledger of a million operations).
	late := `
WITH tok AS (
    SELECT lock, token, min(observed) AS observed
      FROM (SELECT h.lock, h.token, h.observed FROM ` + q + `.chaos_holdings h
            UNION ALL
            SELECT w.resource, w.token, NULL FROM ` + q + `.chaos_writes w) x
     GROUP BY lock, token
), later AS (
    SELECT lock, token, min(observed) OVER (PARTITION BY lock ORDER BY token DESC
                                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS at
      FROM tok
)
SELECT count(*) FROM ` + q + `.chaos_writes w
  JOIN ` + q + `.chaos_resources r ON r.name = w.resource AND r.slots = 1
  JOIN later l ON l.lock = w.resource AND l.token = w.token
 WHERE l.at < w.t_end`
	if err := c.pool.QueryRow(ctx, late).Scan(&f.LateWrites); err != nil {
		return fmt.Errorf("chaos check: %w", err)
	}

	twice := "SELECT count(*) FROM (SELECT lock, token FROM " + q + ".chaos_holdings GROUP BY lock, token HAVING count(DISTINCT ref) > 1) t"
	if err := c.pool.QueryRow(ctx, twice).Scan(&f.TokensTwice); err != nil {
		return fmt.Errorf("chaos check: %w", err)
	}
	if err := c.pool.QueryRow(ctx, "SELECT count(*) FROM "+q+".chaos_writes WHERE NOT held").Scan(&f.Unheld); err != nil {
		return fmt.Errorf("chaos check: %w", err)
	}
	return nil
}

// takeovers times the takeover of each one-slot lock held by a worker
// that was killed or paused.
func (c *checker) takeovers(ctx context.Context) error {
	q, f := c.q, c.f
	// Takeovers: the one-slot locks a worker held when it was killed or
	// paused, and the next grant of each.
	// (next: the earliest grant of a greater token, a running minimum as
	// for the late writes)
	takeover := `
WITH tok AS (
    SELECT lock, token, min(acquired) AS acquired FROM ` + q + `.chaos_holdings GROUP BY lock, token
), next AS (
    SELECT lock, token, min(acquired) OVER (PARTITION BY lock ORDER BY token DESC
                                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS at
      FROM tok
)
SELECT f.kind, f.at, n.at
  FROM ` + q + `.chaos_faults f
  JOIN ` + q + `.chaos_holdings h ON h.worker = f.worker AND h.observed < f.at AND (h.released IS NULL OR h.released > f.at)
  JOIN ` + q + `.chaos_resources r ON r.name = h.lock AND r.slots = 1
  JOIN next n ON n.lock = h.lock AND n.token = h.token
 WHERE f.kind IN ('kill', 'pause')`
	var kills, pauses []time.Duration
	if err := collect(ctx, c.pool, takeover, func(r pgx.Rows) error {
		var kind string
		var at time.Time
		var next *time.Time
		if err := r.Scan(&kind, &at, &next); err != nil {
			return err
		}
		if next == nil || next.Before(at) {
			return nil // nobody took it after the fault, or it was released before
		}
		if kind == "kill" {
			kills = append(kills, next.Sub(at))
		} else {
			pauses = append(pauses, next.Sub(at))
		}
		return nil
	}); err != nil {
		return err
	}
	f.KillTakeover, f.PauseTakeover = distOf(kills), distOf(pauses)
	return nil
}

// handoffs times each hand-over of a one-slot lock to a waiter.
func (c *checker) handoffs(ctx context.Context) error {
	q, f := c.q, c.f
	// Handoffs: a release of a one-slot lock and the next grant, to a caller
	// that asked before the release.
	handoff := `
SELECT h.released, n.acquired
  FROM ` + q + `.chaos_holdings h
  JOIN ` + q + `.chaos_resources r ON r.name = h.lock AND r.slots = 1
  JOIN LATERAL (SELECT n.acquired, n.waited FROM ` + q + `.chaos_holdings n
                 WHERE n.lock = h.lock AND n.token > h.token ORDER BY n.token LIMIT 1) n ON true
 WHERE h.released IS NOT NULL AND n.acquired - n.waited < h.released`
	var hs []time.Duration
	if err := collect(ctx, c.pool, handoff, func(r pgx.Rows) error {
		var rel, acq time.Time
		err := r.Scan(&rel, &acq)
		hs = append(hs, max(0, acq.Sub(rel)))
		return err
	}); err != nil {
		return err
	}
	f.Handoff = distOf(hs)
	return nil
}

func collect(ctx context.Context, pool *pgxpool.Pool, sql string, row func(pgx.Rows) error, args ...any) error {
	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("chaos check: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			return fmt.Errorf("chaos check: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("chaos check: %w", err)
	}
	return nil
}

// Report is the outcome of a run: what Check found and what the driver saw.
type Report struct {
	Config   Config
	Schema   string
	Elapsed  time.Duration
	Findings *Findings
	// LostSlots is the number of slots not grantable once TTL + 1s +
	// Config.WaiterBound had passed on the database's clock after every
	// worker was killed.
	LostSlots int
	// FreeAfter is how long after the last kill each lock was first found
	// grantable (all its slots), on the database's clock.
	FreeAfter Dist
	// Stuck says, for each lock not grantable at the bound, its state then
	// and when it became grantable (if it did within the wait).
	Stuck []string
	// LeftHolders and LeftWaiters are the holders and waiters that State
	// still reports for the run's locks once they were all grantable (or the
	// liveness check gave up): what the dead workers left behind.
	LeftHolders, LeftWaiters int
	// Skipped names the faults that could not be injected, and why.
	Skipped []string
	// Untyped are the errors of sleeplock's API that the workers saw and
	// that Typed does not know, one line each.
	Untyped []string
	// Errors are samples of the errors of sleeplock's API the workers saw,
	// one line per distinct message (at most 8).
	Errors []string
	// RSS is the resident memory of each worker alive at the end, once
	// ready and just before the final kill, the oldest first (Linux).
	RSS []WorkerRSS
	// Redis is what the resources of a Redis run hold at its end; nil for
	// the other stores.
	Redis *RedisFindings
}

// WorkerRSS is a worker's resident memory when it was ready (Start) and
// Age later, at the end of the run (End), in bytes.
type WorkerRSS struct {
	Worker     string
	Age        time.Duration
	Start, End int64
}

// Violations is the number of safety violations the run found:
// Findings.Violations, and in a SQLite or Redis run the tokens granted to
// two refs too (Findings.TokensTwice): such a store acknowledges a grant
// only once it is in the file, or in the server's memory (and its AOF,
// when it has one), which the run's faults do not take away. In a Redis run
// the writes of a one-slot resource that went back to an older token and
// the acknowledged writes the server lost count too (RedisFindings).
func (r *Report) Violations() int64 {
	if r.Findings == nil {
		return 0
	}
	v := r.Findings.Violations()
	if r.Config.SQLite != "" || r.Config.Redis != "" {
		v += r.Findings.TokensTwice
	}
	if r.Redis != nil {
		v += r.Redis.Backwards + r.Redis.Missing
	}
	return v
}

// OK reports whether the run found no safety violation and no lost slot.
func (r *Report) OK() bool {
	return r.Findings != nil && r.Violations() == 0 && r.LostSlots == 0
}

// Write prints the report.
func (r *Report) Write(w io.Writer) {
	c := r.Config
	guard := "Guard on"
	if c.NoGuard {
		guard = "NO GUARD (negative control)"
	}
	wttl := c.WaiterTTL.String()
	if c.WaiterTTL == 0 {
		wttl = "pgstore's default"
	}
	fmt.Fprintf(w, "chaos: %d workers × %d goroutines, %v (elapsed %v), TTL %v, waiter TTL %s, %d members + %s(%d), hold %v/%d writes, %s\n",
		c.Workers, c.Goroutines, c.Duration, r.Elapsed.Round(time.Millisecond), c.TTL, wttl, c.Members, Pool, PoolSlots, c.Hold, c.Writes, guard)
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "chaos: SKIPPED %s\n", s)
	}
	f := r.Findings
	if f == nil {
		return
	}
	var ops, faults []string
	for _, k := range statNames {
		ops = append(ops, fmt.Sprintf("%s=%d", k, f.Stats[k]))
	}
	for _, k := range sortedKeys(f.Faults) {
		faults = append(faults, fmt.Sprintf("%s=%d", k, f.Faults[k]))
	}
	var most []string
	for _, k := range sortedKeys(f.MaxHolders) {
		most = append(most, fmt.Sprintf("%s=%d", k, f.MaxHolders[k]))
	}
	fmt.Fprintf(w, "operations: holdings=%d accepted-writes=%d %s\n", f.Holdings, f.Writes, strings.Join(ops, " "))
	fmt.Fprintf(w, "faults: %s\n", strings.Join(faults, " "))
	twice := ""
	if c.SQLite != "" || c.Redis != "" {
		twice = fmt.Sprintf(", tokens granted to two refs %d", f.TokensTwice)
	}
	if rf := r.Redis; rf != nil {
		twice += fmt.Sprintf(", writes back to an older token %d, acknowledged writes lost %d", rf.Backwards, rf.Missing)
	}
	fmt.Fprintf(w, "violations: %d (overlaps %d, late writes %d, writes by a lost lease %d%s); most holders at once: %s\n",
		r.Violations(), f.Overlaps, f.LateWrites, f.Unheld, twice, strings.Join(most, " "))
	if rf := r.Redis; rf != nil {
		fmt.Fprintf(w, "redis: %d writes in the resources' lists (the ledger has those acknowledged to their workers)\n", rf.Accepted)
	}
	if c.SQLite == "" && c.Redis == "" {
		fmt.Fprintf(w, "tokens granted to two refs: %d (not a violation of this run)\n", f.TokensTwice)
	}
	fmt.Fprintf(w, "lost slots: %d (all grantable %v after the last kill); free after the last kill: %v\n",
		r.LostSlots, r.Config.livenessBound(), r.FreeAfter)
	fmt.Fprintf(w, "left behind (State, after the check): holders %d, waiters %d\n", r.LeftHolders, r.LeftWaiters)
	for _, s := range r.Stuck {
		fmt.Fprintf(w, "  stuck: %s\n", s)
	}
	fmt.Fprintf(w, "untyped errors: %d\n", len(r.Untyped))
	for i, s := range r.Untyped {
		if i == 10 {
			fmt.Fprintf(w, "  …\n")
			break
		}
		fmt.Fprintf(w, "  %s\n", s)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "  error seen: %s\n", e)
	}
	for i, m := range r.RSS {
		if i == 3 {
			fmt.Fprintf(w, "  … and %d more workers\n", len(r.RSS)-i)
			break
		}
		fmt.Fprintf(w, "worker %s RSS: %.1f MiB when ready → %.1f MiB %v later\n", m.Worker, float64(m.Start)/(1<<20), float64(m.End)/(1<<20), m.Age.Round(time.Second))
	}
	fmt.Fprintf(w, "kill→takeover:  %v\n", f.KillTakeover)
	fmt.Fprintf(w, "pause→takeover: %v\n", f.PauseTakeover)
	fmt.Fprintf(w, "handoff:        %v\n", f.Handoff)
}
