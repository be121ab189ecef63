package pgstore

import (
	_ "embed"
	"strconv"
	"strings"
)

// The bare statements of the hot paths: one UPDATE or read of a lock's row
// each, no function call. Each file is named like the query that sends it.
var (
	//go:embed queries/acquire_fast.sql
	acquireFastSQL string
	//go:embed queries/acquire_slot.sql
	acquireSlotSQL string
	//go:embed queries/acquire_weighted.sql
	acquireWeightedSQL string
	//go:embed queries/release_fast.sql
	releaseFastSQL string
	//go:embed queries/release_slot.sql
	releaseSlotSQL string
	//go:embed queries/held_one.sql
	heldOneSQL string
)

// queries are the store's statements, with the schema filled in. A query
// that calls a function of sql/ calls that one function and is named like
// it, or starts with that name (acquireOne and acquireOneTry call
// acquire_one(), sweepNodes sweep_nodes());
// TestQueryNamesAreFunctionNames checks it. A bare statement is named like
// its file in queries/.
type queries struct {
	// bare statements of one lock (queries/)
	acquireFast, acquireFastEvents, acquireSlot string
	acquireWeighted, acquireWeightedEvents      string
	releaseFast, releaseFastEvents, releaseSlot string
	releaseWeighted, releaseWeightedEvents      string
	heldOne                                     string
	// function calls (sql/)
	acquireOne, checkOne, releaseOne, release, undo string
	acquireOneTry                                   string // acquireOne for a try
	keepOne, keep, held, spillHeld                  string
	states, define, resize, stats                   string
	deleteDef                                       string
	nodeBeat, nodeWaiters, dropWaiter               string
	sweepNodes, sweep                               string
	// other statements
	undefined, nodeDown, listen, guard, isolation string
	defsLock, defsNamed, defsUse                  string
}

// fn is a function of sql/ and its parameters, in the order of its
// definition; the store calls it with named arguments (p_name => $1), so
// each value is paired with its name in the statement.
type fn struct {
	name   string
	params []string // "p_name text", …
}

// The functions the store calls with more than a few arguments. Their
// arguments are the structs below, whose values() follow params.
var (
	acquireOneFn = fn{"acquire_one", []string{"p_name text", "p_ref text", "p_kind text", "p_ttl bigint",
		"p_hold bigint", "p_counted boolean", "p_wait boolean", "p_op bigint", "p_wttl bigint", "p_pats text[]",
		"p_lease bigint", "p_back bigint", "p_node bigint", "p_weight integer", "p_sample boolean"}}
	checkOneFn = fn{"check_one", []string{"p_names text[]", "p_ref text", "p_kind text", "p_ttl bigint",
		"p_hold bigint", "p_counted boolean", "p_wait boolean", "p_op bigint", "p_ticket bigint", "p_wttl bigint",
		"p_stale bigint", "p_node bigint", "p_whole boolean", "p_weights integer[]", "p_sample boolean"}}
	releaseOneFn = fn{"release_one", []string{"p_name text", "p_token bigint", "p_ref text", "p_events boolean",
		"p_pats text[]", "p_node bigint", "p_sample boolean"}}
	releaseFn = fn{"release", []string{"p_names text[]", "p_tokens bigint[]", "p_ref text", "p_stale bigint",
		"p_events boolean", "p_sample boolean"}}
	undoFn    = fn{"undo", []string{"p_names text[]", "p_ref text", "p_op bigint"}}
	keepOneFn = fn{"keep_one", []string{"p_name text", "p_token bigint", "p_ref text", "p_ttl bigint", "p_hold bigint",
		"p_lease bigint", "p_back bigint"}}
	keepFn      = fn{"keep", []string{"p_names text[]", "p_tokens bigint[]", "p_ref text", "p_ttl bigint", "p_hold bigint"}}
	heldFn      = fn{"held", []string{"p_names text[]", "p_tokens bigint[]", "p_ref text"}}
	spillHeldFn = fn{"spill_held", []string{"p_names text[]", "p_tokens bigint[]", "p_ref text"}}
	statesFn    = fn{"states", []string{"p_name text", "p_detail boolean"}}
	defineFn    = fn{"define", []string{"p_name text", "p_slots integer", "p_family boolean"}}
	resizeFn    = fn{"resize", []string{"p_name text", "p_slots integer"}}
	deleteDefFn = fn{"delete_def", []string{"p_name text", "p_force boolean"}}
	nodeBeatFn  = fn{"node_beat", []string{"p_node bigint", "p_wttl bigint", "p_several bigint[]", "p_locks text[]",
		"p_refs text[]"}}
	dropWaiterFn  = fn{"drop_waiter", []string{"p_op bigint"}}
	nodeWaitersFn = fn{"node_waiters", []string{"p_node bigint"}}
)

// calls lists the functions above, for the test that compares them with
// their definitions in sql/.
var calls = []fn{acquireOneFn, checkOneFn, releaseOneFn, releaseFn, undoFn, keepOneFn, keepFn, heldFn,
	spillHeldFn, statesFn, defineFn, resizeFn, deleteDefFn, nodeBeatFn, dropWaiterFn, nodeWaitersFn}

// call returns the call of f in schema s (quoted) with named arguments
// $1, $2, … An array goes as its text, cast on the server, which every
// driver can send.
func (f fn) call(s string) string {
	var b strings.Builder
	b.WriteString(s + "." + f.name + "(")
	for i, p := range f.params {
		name, typ, _ := strings.Cut(p, " ")
		if i > 0 {
			b.WriteString(", ")
		}
		cast := "::" + typ
		if strings.HasSuffix(typ, "[]") {
			cast = "::text" + cast
		}
		b.WriteString(name + " => $" + strconv.Itoa(i+1) + cast)
	}
	b.WriteString(")")
	return b.String()
}

// tag names a statement in pg_stat_activity, as the first line of each
// file of queries/ does.
func (f fn) tag() string { return "/* sleeplock " + f.name + " */ " }

// acquireOneArgs are acquire_one()'s arguments.
type acquireOneArgs struct {
	name, ref, kind string
	ttl, hold       int64 // µs
	counted, wait   bool
	op, wttl        int64
	pats            string // patterns(name)
	lease, back     int64  // lease()
	node            int64
	weight          int64 // AcquireRequest.WeightOf(0)
	sample          bool  // time an expired hold taken over (samplePeek)
}

func (a *acquireOneArgs) values() []any {
	return []any{a.name, a.ref, a.kind, a.ttl, a.hold, a.counted, a.wait, a.op, a.wttl, a.pats, a.lease, a.back, a.node,
		a.weight, a.sample}
}

// checkOneArgs are check_one()'s arguments.
type checkOneArgs struct {
	names, ref, kind string // names: textArray
	ttl, hold        int64
	counted, wait    bool
	op, ticket, wttl int64
	stale, node      int64
	whole            bool   // ReenterAll
	weights          string // intArray of AcquireRequest.WeightOf
	sample           bool   // time an expired hold taken over (samplePeek)
}

func (a *checkOneArgs) values() []any {
	return []any{a.names, a.ref, a.kind, a.ttl, a.hold, a.counted, a.wait, a.op, a.ticket, a.wttl, a.stale, a.node, a.whole,
		a.weights, a.sample}
}

// releaseOneArgs are release_one()'s arguments.
type releaseOneArgs struct {
	name   string
	token  int64
	ref    string
	events bool
	pats   string
	node   int64
	sample bool // time the hold whatever its token (sampleDue)
}

func (a *releaseOneArgs) values() []any {
	return []any{a.name, a.token, a.ref, a.events, a.pats, a.node, a.sample}
}

// releaseArgs are release()'s arguments.
type releaseArgs struct {
	names, tokens, ref string // textArray, intArray
	stale              any    // nil: Release; µs: ReleaseStale
	events             bool
	sample             bool // time the holds whatever their tokens (sampleDue)
}

func (a *releaseArgs) values() []any {
	return []any{a.names, a.tokens, a.ref, a.stale, a.events, a.sample}
}

// keepOneArgs are keep_one()'s arguments.
type keepOneArgs struct {
	name        string
	token       int64
	ref         string
	ttl, hold   int64
	lease, back int64
}

func (a *keepOneArgs) values() []any {
	return []any{a.name, a.token, a.ref, a.ttl, a.hold, a.lease, a.back}
}

// keepArgs are keep()'s arguments.
type keepArgs struct {
	names, tokens, ref string
	ttl, hold          int64
}

func (a *keepArgs) values() []any { return []any{a.names, a.tokens, a.ref, a.ttl, a.hold} }

// nodeBeatArgs are node_beat()'s arguments.
type nodeBeatArgs struct {
	node, wttl           int64
	several, locks, refs string // intArray, textArray, textArray
}

func (a *nodeBeatArgs) values() []any { return []any{a.node, a.wttl, a.several, a.locks, a.refs} }

// fastArgs are the arguments of acquire_fast.sql (with or without an
// event) and acquire_slot.sql: $1 … $8, and $9 for the events; those of
// acquire_weighted.sql are followed by $9 and $10 (the weight).
type fastArgs struct {
	name, ref, kind string
	ttl, hold, op   int64
	lease, back     int64
}

func (a *fastArgs) values() []any {
	return []any{a.name, a.ref, a.kind, a.ttl, a.hold, a.op, a.lease, a.back}
}

func newQueries(schema string) queries {
	q := fastQueries(schema)
	q.setCalls(schema)
	q.setReconcile(schema)
	return q
}

// fastQueries are the fast path's statements (see statement), with the
// variants that return an event's columns.
func fastQueries(schema string) queries {
	s := quoteIdent(schema)
	seqs := quoteLiteral(s+".seqs") + "::regclass"
	q := queries{
		acquireFast: statement(acquireFastSQL, schema),
		// With an event: the same UPDATE, which also reads the slots of the
		// lock's definition (the name's patterns in $9, $4) and draws the
		// event's Seq once the row is ours.
		acquireFastEvents: withEvents(statement(acquireFastSQL, schema), "acquire_fast", "",
			", "+s+".slots_in($9::text::text[]), nextval("+seqs+")"),
		acquireSlot:     statement(acquireSlotSQL, schema),
		acquireWeighted: statement(acquireWeightedSQL, schema),
		// With an event: the slots it read ($9) and the Seq, drawn once
		// the row is ours.
		acquireWeightedEvents: withEvents(statement(acquireWeightedSQL, schema), "acquire_weighted", "",
			", w.n, nextval("+seqs+")"),
		releaseFast: statement(releaseFastSQL, schema),
		releaseFastEvents: withEvents(statement(releaseFastSQL, schema), "release_fast", "0, 0::bigint",
			s+".slots_in($5::text::text[]), nextval("+seqs+")"),
		releaseSlot: statement(releaseSlotSQL, schema),
		// The release of a hold the store granted by acquire_weighted.sql:
		// release_fast.sql, with the hold's weight (see
		// locks.weight in migrations/001_init.sql) before the slots and Seq.
		releaseWeighted: withColumns(statement(releaseFastSQL, schema), "release_fast", "release_weighted",
			"0, 0::bigint", rowWeight+", 0, 0::bigint"),
		releaseWeightedEvents: withColumns(statement(releaseFastSQL, schema), "release_fast", "release_weighted_events",
			"0, 0::bigint", rowWeight+", "+s+".slots_in($5::text::text[]), nextval("+seqs+")"),
		heldOne: statement(heldOneSQL, schema),
	}
	return q
}

// setCalls sets the statements that call the schema's functions.
func (q *queries) setCalls(schema string) {
	s := quoteIdent(schema)
	seqs := quoteLiteral(s+".seqs") + "::regclass"
	q.acquireOne = acquireOneFn.tag() + "SELECT * FROM " + acquireOneFn.call(s)
	// A try of a lock whose fast row's scalar holder (unexpired, another
	// ref) leaves fewer slots than it asks is refused on that row and the
	// definition alone (r): one probe of each by its primary key, no
	// function call, no row lock, no write. A fast row has no holder rows
	// and no queue, so its holder is the lock's only one; it is never a
	// node's grant, so the nodes' staleness does not matter. Anything else
	// (a wait, a row slow, in slot mode, free or expired, a name not
	// defined, too heavy, re-entry) is acquire_one()'s, in the same
	// statement: its gate is a one-time filter, so it is not called at
	// all when r refused. A caller that will wait sends acquireOne: a
	// statement of one function call costs next to nothing to plan.
	q.acquireOneTry = acquireOneFn.tag() + "WITH r AS (" +
		"SELECT l.ref, l.kind, l.expires, d.slots, " + rowWeight + " AS held, clock_timestamp() AS at " +
		"FROM " + s + ".locks l CROSS JOIN LATERAL (SELECT d.slots FROM " + s + ".defs d " +
		"WHERE d.name = ANY ($10::text::text[]) ORDER BY array_position($10::text::text[], d.name) LIMIT 1) d " +
		"WHERE l.name = $1::text AND NOT $7::boolean AND l.fast AND l.xref IS NULL AND l.ref IS NOT NULL " +
		"AND l.ref <> $2::text AND (l.expires IS NULL OR l.expires > clock_timestamp()) " +
		"AND $14::integer <> 0 AND (CASE WHEN $14::integer = -1 THEN d.slots ELSE $14::integer END) <= d.slots " +
		"AND " + rowWeight + " + (CASE WHEN $14::integer = -1 THEN d.slots ELSE $14::integer END) > d.slots) " +
		"SELECT 'refused'::text, 1, $1::text, r.slots, r.held, 0, r.ref, r.kind, 0::bigint, " + s + ".micros(r.at), " +
		s + ".micros(r.expires), (r.slots - r.held)::bigint, false, 0::bigint, 0::bigint, 0::bigint, $14::integer, " +
		"0::bigint, false FROM r UNION ALL " +
		"SELECT * FROM " + acquireOneFn.call(s) + " WHERE NOT EXISTS (SELECT 1 FROM r)"
	q.checkOne = checkOneFn.tag() + "SELECT * FROM " + checkOneFn.call(s)
	q.releaseOne = releaseOneFn.tag() + "SELECT * FROM " + releaseOneFn.call(s)
	q.release = "SELECT * FROM " + releaseFn.call(s)
	q.undo = "SELECT * FROM " + undoFn.call(s)
	q.keepOne = "SELECT * FROM " + keepOneFn.call(s)
	q.keep = "SELECT * FROM " + keepFn.call(s)
	q.held = "SELECT * FROM " + heldFn.call(s)
	q.spillHeld = "SELECT " + spillHeldFn.call(s)
	q.states = "SELECT r_name, r_slots, r_family, r_running, r_expired, r_waiting, r_now, coalesce(r_holders, ''), " +
		"coalesce(r_queue, ''), r_leases FROM " + statesFn.call(s)
	q.stats = "/* sleeplock stats */ SELECT * FROM " + s + ".stats(clock_timestamp())"
	q.define = "SELECT r_created, r_slots, r_running, r_waiting, r_at, coalesce(r_old, 0), " +
		"CASE WHEN r_created THEN nextval(" + seqs + ") ELSE 0 END, " +
		"CASE WHEN r_created AND r_old IS NOT NULL THEN nextval(" + seqs + ") ELSE 0 END FROM " + defineFn.call(s)
	q.resize = "SELECT r.*, nextval(" + seqs + ") FROM " + resizeFn.call(s) + " r"
	q.deleteDef = "SELECT d.*, CASE WHEN d.r_ev IN ('released', 'deleted') THEN nextval(" + seqs + ") ELSE 0 END FROM " +
		deleteDefFn.call(s) + " d"
	// node_beat(), whether some node is stale (nodes_stale()): the
	// heads of this store's queue check then (beat), and whether no
	// live node has a lower id: that node sweeps (heartbeat).
	q.nodeBeat = "SELECT " + nodeBeatFn.call(s) + ", " + s + ".nodes_stale(clock_timestamp()), " +
		"NOT EXISTS (SELECT 1 FROM " + s + ".nodes x WHERE x.id < $1::bigint AND x.expires > clock_timestamp())"
	q.nodeWaiters = "SELECT " + nodeWaitersFn.call(s)
	q.dropWaiter = "SELECT " + dropWaiterFn.call(s) + "::bigint"
	q.sweepNodes = "SELECT " + s + ".sweep_nodes(" + strconv.Itoa(sweepLimit) + ")::bigint"
	q.sweep = "SELECT " + s + ".sweep(" + strconv.Itoa(sweepLimit) + ")::bigint"
}

// setReconcile sets Reconcile's reads and the statements that remain: the
// undefined names, a node's end, LISTEN, Guard's and the isolation check.
func (q *queries) setReconcile(schema string) {
	s := quoteIdent(schema)
	// The first name of $1 that no definition covers.
	q.undefined = "SELECT u FROM unnest($1::text::text[]) WITH ORDINALITY x(u, i) WHERE " + s + ".slots_in(" + s + ".patterns(u)) IS NULL ORDER BY i LIMIT 1"
	q.nodeDown = "DELETE FROM " + s + ".nodes WHERE id = $1::bigint"
	// Reconcile's reads (see current): the definitions' advisory
	// lock, which define(), resize() and delete_def() take too; the
	// definitions of the names $1; and every other definition with the
	// use of its locks (of a family's members in use), counted as
	// delete_def() counts it.
	q.defsLock = "SELECT pg_advisory_xact_lock(" + s + ".defs_key())"
	q.defsNamed = "SELECT d.name, d.slots FROM " + s + ".defs d WHERE d.name = ANY ($1::text::text[])"
	q.defsUse = "WITH u AS (SELECT x.lock, " + s + ".def_of(x.lock) AS def, " +
		"(SELECT count(*) FROM " + s + ".holding h WHERE h.lock = x.lock)::int AS holders, " +
		"(" + s + ".waiter_counts(x.lock, clock_timestamp())).r_live AS waiters " +
		"FROM (SELECT h.lock FROM " + s + ".holding h UNION SELECT q.lock FROM " + s + ".queue q) x) " +
		"SELECT d.name, d.slots, coalesce(min(u.lock) FILTER (WHERE u.holders + u.waiters > 0), ''), " +
		"coalesce(sum(u.holders), 0)::int, coalesce(sum(u.waiters), 0)::int " +
		"FROM " + s + ".defs d LEFT JOIN u ON u.def = d.name " +
		"WHERE NOT d.name = ANY ($1::text::text[]) GROUP BY d.name, d.slots ORDER BY d.name"
	q.listen = "LISTEN " + quoteIdent(channelOf(schema))
	// The holds found, locked against release and takeover until the
	// caller's transaction ends (spillHeld first makes a hold in a
	// lock's row a holder row).
	q.guard = "SELECT count(*)::bigint FROM (SELECT 1 FROM " + s + ".holders h " +
		"JOIN unnest($1::text::text[], $2::text::bigint[]) u(l, t) ON h.lock = u.l AND (u.t = 0 OR h.token = u.t) " +
		"WHERE h.ref = $3::text FOR KEY SHARE OF h) s"
	q.isolation = "SELECT current_setting('transaction_isolation')"
}

// withEvents is the variant of a fast statement (named name) that returns
// an event's columns: its tag becomes name_events, and the end of its
// RETURNING list, zeros (when not "") or nothing, becomes cols.
func withEvents(stmt, name, zeros, cols string) string {
	return withColumns(stmt, name, name+"_events", zeros, cols)
}

// withColumns is the variant of a fast statement (named name) tagged as
// variant, the end of whose RETURNING list, zeros (when not "") or
// nothing, becomes cols.
func withColumns(stmt, name, variant, zeros, cols string) string {
	tag := "/* sleeplock " + name + " */"
	body := strings.TrimRight(stmt, "\n")
	if !strings.HasPrefix(body, tag) || !strings.HasSuffix(body, zeros) {
		panic("pgstore: queries/" + name + ".sql does not start with " + tag + " or end with " + zeros)
	}
	body = strings.TrimSuffix(body, zeros)
	return "/* sleeplock " + variant + " */" + strings.TrimPrefix(body, tag) + cols + "\n"
}

// rowWeight is the weight of the scalar holder of lock row l (see
// locks.weight in migrations/001_init.sql).
const rowWeight = "CASE WHEN l.wacqs = l.acqs THEN l.weight ELSE 1 END"

// statement renders a query file without its comment lines.
func statement(text, schema string) string {
	var b strings.Builder
	for _, line := range strings.Split(render(text, schema, false), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "--") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
