package chaos_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sleeplock/sleeplock/chaos"
)

// TestCheck feeds the checker a history with known faults: a holding that
// began while another held a one-slot lock, a write accepted after a newer
// grant was seen, a fourth holder of the three-slot lock, a write made
// after its lease was lost, a kill and a handoff; it must count exactly
// those.
func TestCheck(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	schema := randomSchema(t, pool)
	if err := chaos.Setup(ctx, pool, schema, 2); err != nil {
		t.Fatal(err)
	}
	q := pgx.Identifier{schema}.Sanitize()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	// holding: acquired, observed and released (-1: never) in ms from t0.
	holding := func(lock string, token int64, worker string, acquired, waited, observed, released int) {
		t.Helper()
		var rel *time.Time
		if released >= 0 {
			r := ms(released)
			rel = &r
		}
		exec("INSERT INTO "+q+".chaos_holdings (lock, token, ref, worker, op, acquired, waited, observed, released) VALUES ($1, $2, 'r', $3, 'acquire', $4, $5, $6, $7)",
			lock, token, worker, ms(acquired), time.Duration(waited)*time.Millisecond, ms(observed), rel)
	}
	write := func(lock string, token int64, end int) {
		t.Helper()
		var id int64
		if err := pool.QueryRow(ctx, "INSERT INTO "+q+".chaos_writes (resource, token, ref, worker, guarded) VALUES ($1, $2, 'r', 'w', true) RETURNING id",
			lock, token).Scan(&id); err != nil {
			t.Fatal(err)
		}
		exec("UPDATE "+q+".chaos_writes SET t_start = $2, t_end = $2 WHERE id = $1", id, ms(end))
	}
	r0, r1 := chaos.Member(0), chaos.Member(1)
	// res/0: A, then B after a handoff of 5ms, and C while B holds.
	holding(r0, 10, "a", 0, 0, 0, 1100)
	write(r0, 10, 1000)
	holding(r0, 11, "b", 1105, 500, 1110, -1)
	holding(r0, 12, "c", 1490, 0, 1500, -1)
	write(r0, 11, 2000) // overlaps C, and is later than C's grant: also a late write
	write(r0, 12, 1600)
	// res/1: D's write after E's grant, their intervals apart; then a kill.
	holding(r1, 20, "d", 8000, 0, 10000, -1)
	holding(r1, 21, "e", 8990, 0, 9000, -1)
	write(r1, 20, 11000)
	write(r1, 21, 9500)
	holding(r1, 22, "k", 11990, 0, 12000, -1)
	exec("INSERT INTO "+q+".chaos_faults (kind, worker, at) VALUES ('kill', 'k', $1)", ms(13000))
	holding(r1, 23, "n", 15000, 3000, 15010, -1)
	// pool: four holders at once.
	for i := range 4 {
		holding(chaos.Pool, int64(30+i), "p", 10*i, 0, 10*i, -1)
		write(chaos.Pool, int64(30+i), 100)
	}

	// a write its probe found made after the lease was lost
	write(chaos.Pool, 30, 50)
	exec("UPDATE " + q + ".chaos_writes SET held = false WHERE id = (SELECT max(id) FROM " + q + ".chaos_writes)")

	f, err := chaos.Check(ctx, pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	if f.Overlaps != 2 || f.LateWrites != 2 || f.Unheld != 1 || f.Violations() != 5 {
		t.Errorf("overlaps %d, late writes %d, unheld %d, violations %d; want 2, 2, 1, 5", f.Overlaps, f.LateWrites, f.Unheld, f.Violations())
	}
	if f.MaxHolders[r0] != 2 || f.MaxHolders[r1] != 1 || f.MaxHolders[chaos.Pool] != 4 {
		t.Errorf("most holders %v, want %s=2 %s=1 %s=4", f.MaxHolders, r0, r1, chaos.Pool)
	}
	if f.KillTakeover.N != 1 || f.KillTakeover.Max != 2*time.Second {
		t.Errorf("kill→takeover %v, want one of 2s", f.KillTakeover)
	}
	if f.Handoff.N != 1 || f.Handoff.Max != 5*time.Millisecond {
		t.Errorf("handoff %v, want one of 5ms", f.Handoff)
	}
	if f.Holdings != 11 || f.Writes != 10 || f.Faults["kill"] != 1 {
		t.Errorf("holdings %d, writes %d, faults %v; want 11, 10, kill=1", f.Holdings, f.Writes, f.Faults)
	}
}

// TestResourceFence checks the resources' own fence: a one-slot resource
// refuses a token lower than the highest it accepted; the three-slot one,
// whose holders overlap by right, relies on Guard alone.
func TestResourceFence(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	schema := randomSchema(t, pool)
	if err := chaos.Setup(ctx, pool, schema, 1); err != nil {
		t.Fatal(err)
	}
	ins := "INSERT INTO " + pgx.Identifier{schema}.Sanitize() + ".chaos_writes (resource, token, ref, worker, guarded) VALUES ($1, $2, 'r', 'w', true)"
	for _, tok := range []int64{5, 7, 7} {
		if _, err := pool.Exec(ctx, ins, chaos.Member(0), tok); err != nil {
			t.Fatalf("token %d: %v", tok, err)
		}
	}
	_, err := pool.Exec(ctx, ins, chaos.Member(0), 6)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "CH001" {
		t.Errorf("token 6 after 7: %v, want SQLSTATE CH001", err)
	}
	for _, tok := range []int64{9, 8} {
		if _, err := pool.Exec(ctx, ins, chaos.Pool, tok); err != nil {
			t.Errorf("pool, token %d: %v", tok, err)
		}
	}
	_, err = pool.Exec(ctx, ins, "nowhere", 1)
	if !errors.As(err, &pe) || pe.Code != "CH002" {
		t.Errorf("unknown resource: %v, want SQLSTATE CH002", err)
	}
}

// A token granted to two refs is a violation of a SQLite run (the store
// acknowledged a grant that was not in the file), and only reported in a
// PostgreSQL run.
func TestTokensTwiceViolateOnlySQLite(t *testing.T) {
	f := &chaos.Findings{TokensTwice: 2}
	lite := chaos.Report{Config: chaos.Config{SQLite: "/tmp/locks.db"}, Findings: f}
	pg := chaos.Report{Findings: f}
	if v := lite.Violations(); v != 2 || lite.OK() {
		t.Errorf("SQLite run with 2 tokens granted twice: %d violations, OK %v; want 2, false", v, lite.OK())
	}
	if v := pg.Violations(); v != 0 || !pg.OK() {
		t.Errorf("PostgreSQL run with 2 tokens granted twice: %d violations, OK %v; want 0, true", v, pg.OK())
	}
}
