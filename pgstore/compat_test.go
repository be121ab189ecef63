package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestRollingUpgradeFrom010: the calls of a 0.1.0 process, sent as 0.1.0
// sends them (named arguments, SELECT *), still work on this release's
// schema during a rolling upgrade: the same columns, and answers that count
// the weighted holds of this release's processes.
func TestRollingUpgradeFrom010(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "mix", 4)
	r := req("heavy", time.Minute, "mix")
	r.Weight = 3
	_, err := e.s.Acquire(ctx, r)
	must(t, err)

	// call runs a 0.1.0 statement and returns its first row, checking the
	// number of columns 0.1.0 scans.
	call := func(sql string, cols int, args ...any) []any {
		t.Helper()
		rows, err := e.pool.Query(ctx, sql, args...)
		must(t, err)
		defer rows.Close()
		if n := len(rows.FieldDescriptions()); n != cols {
			t.Fatalf("%s: %d columns, 0.1.0 scans %d", sql, n, cols)
		}
		if !rows.Next() {
			t.Fatalf("%s: no row (%v)", sql, rows.Err())
		}
		v, err := rows.Values()
		must(t, err)
		return v
	}
	acquireOne := "SELECT * FROM " + s + ".acquire_one(p_name => $1::text, p_ref => $2::text, p_kind => ''::text, " +
		"p_ttl => 60000000::bigint, p_hold => 0::bigint, p_counted => false, p_wait => $3::boolean, p_op => $4::bigint, " +
		"p_wttl => 1000000::bigint, p_pats => '{mix}'::text[], p_lease => 60000000::bigint, p_back => 0::bigint, " +
		"p_node => 0::bigint)"
	// One slot of four is free: the 0.1.0 caller gets it, and the next is
	// refused.
	v := call(acquireOne, 18, "mix", "old1", false, int64(11))
	if v[0] != "granted" {
		t.Fatalf("0.1.0 acquire_one with one slot free: %v", v[0])
	}
	token := v[8]
	if v := call(acquireOne, 18, "mix", "old2", false, int64(12)); v[0] != "refused" {
		t.Fatalf("0.1.0 acquire_one with no slot free: %v", v[0])
	}
	checkOne := "SELECT * FROM " + s + ".check_one(p_names => '{mix}'::text[], p_ref => 'old3'::text, p_kind => ''::text, " +
		"p_ttl => 60000000::bigint, p_hold => 0::bigint, p_counted => false, p_wait => false, p_op => 13::bigint, " +
		"p_ticket => 0::bigint, p_wttl => 1000000::bigint, p_stale => 0::bigint, p_node => 0::bigint, p_whole => false)"
	if v := call(checkOne, 17); v[0] != "refused" {
		t.Fatalf("0.1.0 check_one with no slot free: %v", v[0])
	}
	releaseOne := "SELECT * FROM " + s + ".release_one(p_name => 'mix'::text, p_token => $1::bigint, p_ref => 'old1'::text, " +
		"p_events => false, p_pats => '{mix}'::text[], p_node => 0::bigint)"
	if v := call(releaseOne, 12, token); v[0] != "released" {
		t.Fatalf("0.1.0 release_one: %v", v[0])
	}
	v = call(acquireOne, 18, "mix", "old4", false, int64(14))
	if v[0] != "granted" {
		t.Fatalf("0.1.0 acquire_one after a release: %v", v[0])
	}
	release := "SELECT * FROM " + s + ".release(p_names => '{mix}'::text[], p_tokens => ARRAY[$1::bigint], " +
		"p_ref => 'old4'::text, p_stale => NULL::bigint, p_events => false)"
	if v := call(release, 11, v[8]); v[0] != "released" {
		t.Fatalf("0.1.0 release: %v", v[0])
	}
	// A 0.1.0 acquisition abandoned after its grant: undo gives it back.
	_ = call(acquireOne, 18, "mix", "old5", false, int64(15))
	undo := "SELECT * FROM " + s + ".undo(p_names => '{mix}'::text[], p_ref => 'old5'::text, p_op => 15::bigint)"
	if v := call(undo, 11); v[0] != "released" {
		t.Fatalf("0.1.0 undo of a grant: %v", v[0])
	}
	wantState(t, e.s, "mix", 3, 0)
}
