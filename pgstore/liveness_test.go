package pgstore_test

import (
	"cmp"
	"context"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/store"
)

// recorderTracer keeps the text of every statement sent.
type recorderTracer struct {
	mu  sync.Mutex
	sql []string
}

func (r *recorderTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	r.sql = append(r.sql, d.SQL)
	r.mu.Unlock()
	return ctx
}

func (r *recorderTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *recorderTracer) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sql)
}

func (r *recorderTracer) any(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.sql {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestNotifyWakesWaiter: a waiter on another node whose timers are an
// hour long is granted as soon as the holder releases: only the
// notification can have woken it. After its LISTEN connection is killed,
// the listener reconnects and the next handoff is woken the same way.
func TestNotifyWakesWaiter(t *testing.T) {
	defer pgstore.SetListenPoll(time.Hour)()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	define(t, e.s, "n", 1)
	tr := &recorderTracer{}
	pool := newPool(t, tr)
	// The listener's connection by its name: what it ran last (LISTEN, or a
	// heartbeat it sends between notifications) cannot tell it.
	app := "sleeplock_listener_" + e.schema
	u, err := url.Parse(dbURL())
	must(t, err)
	qv := u.Query()
	qv.Set("application_name", app)
	u.RawQuery = qv.Encode()
	node, err := pgstore.New(ctx, pool, pgstore.WithSchema(e.schema), pgstore.WithPollInterval(time.Hour),
		pgstore.WithListenDSN(u.String()))
	must(t, err)
	defer node.Close()
	for round := range 2 {
		h, err := e.s.Acquire(ctx, req("holder", time.Minute, "n"))
		must(t, err)
		done := make(chan error, 1)
		before := tr.count()
		go func() {
			r := req("waiter", time.Minute, "n")
			r.Wait = true
			g, err := node.Acquire(ctx, r)
			if err == nil {
				err = node.Release(ctx, g.Handle(), nil)
			}
			done <- err
		}()
		// Queued, listening, and checked once more after listening began:
		// from now on only a wake-up makes it check.
		waitFor(t, "the waiter to queue and listen", func() bool {
			return node.Listening() && tr.count() >= before+3
		})
		must(t, e.s.Release(ctx, h.Handle(), nil))
		must(t, <-done)
		if round == 0 {
			// Kill the listener's connection: it comes back.
			var n int
			must(t, e.pool.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "+
				"WHERE application_name = $1", app).Scan(&n))
			if n != 1 {
				t.Fatalf("%d listener connections", n)
			}
			waitFor(t, "the listener to notice", func() bool { return !node.Listening() })
		}
	}
}

// TestDeadWaitersSkippedAndSwept: waiter rows of dead nodes do not refuse
// a try, and the operations that meet them (and sweep) delete them, a
// bounded number per statement.
func TestDeadWaitersSkippedAndSwept(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "dead", 1)
	define(t, e.s, "untouched", 1)
	for _, lock := range []string{"dead", "untouched"} {
		_, err := e.pool.Exec(ctx, `WITH w AS (
			INSERT INTO `+q+`.waiters (ticket, op, ref, kind, locks, ttl, hold, counted, since, expires)
			SELECT nextval('`+q+`.tickets'), g, 'ghost' || g, '', ARRAY[$1::text], 0, 0, false, now(), now() - interval '1 second'
			  FROM generate_series(1, 100) g RETURNING ticket)
			INSERT INTO `+q+`.queue (lock, ticket) SELECT $1::text, ticket FROM w`, lock)
		must(t, err)
		_, err = e.pool.Exec(ctx, "INSERT INTO "+q+".locks (name) VALUES ($1) ON CONFLICT DO NOTHING", lock)
		must(t, err)
	}
	_, err := e.pool.Exec(ctx, "INSERT INTO "+q+".cancelled (op, at) VALUES (1, now() - interval '2 hours')")
	must(t, err)
	wantState(t, e.s, "dead", 0, 0)
	g, err := e.s.Acquire(ctx, req("live", time.Minute, "dead"))
	must(t, err)
	must(t, e.s.Release(ctx, g.Handle(), nil))
	count := func(sql string) int {
		var n int
		must(t, e.pool.QueryRow(ctx, sql).Scan(&n))
		return n
	}
	// 64 per statement: the grant and the release took 100 of "dead".
	if n := count("SELECT count(*) FROM " + q + ".queue WHERE lock = 'dead'"); n != 0 {
		t.Fatalf("%d dead waiters of a used lock left", n)
	}
	// The used lock's row stays, free, for its next grant.
	if n := count("SELECT count(*) FROM " + q + ".locks WHERE name = 'dead' AND fast AND ref IS NULL"); n != 1 {
		t.Fatalf("%d free rows of the used lock", n)
	}
	for i := 0; count("SELECT count(*) FROM "+q+".waiters")+count("SELECT count(*) FROM "+q+".locks WHERE NOT fast")+
		count("SELECT count(*) FROM "+q+".cancelled") > 0; i++ {
		var n int64
		must(t, e.pool.QueryRow(ctx, "SELECT "+q+".sweep(64)").Scan(&n))
		if n == 0 || n > 3*64+64 || i > 5 {
			t.Fatalf("sweep %d deleted %d rows", i, n)
		}
	}
}

// TestPausedWaiterLosesItsPlace: a waiter whose lease ran out (its node
// paused: a row at the head of the queue that nobody renews) stops
// blocking a try at once, and its node, resuming, is told its place is
// gone (its store then queues it again at the back).
func TestPausedWaiterLosesItsPlace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "p", 1)
	h, err := e.s.Acquire(ctx, req("holder", time.Minute, "p"))
	must(t, err)
	var ticket int64
	must(t, e.pool.QueryRow(ctx, `WITH w AS (
		INSERT INTO `+q+`.waiters (ticket, op, ref, kind, locks, ttl, hold, counted, since, expires)
		VALUES (nextval('`+q+`.tickets'), 42, 'paused', '', '{p}', 60000000, 0, false, now(), now() - interval '1 millisecond')
		RETURNING ticket)
		INSERT INTO `+q+`.queue (lock, ticket) SELECT 'p', ticket FROM w RETURNING ticket`).Scan(&ticket))
	wantState(t, e.s, "p", 1, 0)
	must(t, e.s.Release(ctx, h.Handle(), nil))
	g, err := e.s.Acquire(ctx, req("try", time.Minute, "p"))
	must(t, err)
	must(t, e.s.Release(ctx, g.Handle(), nil))
	// The paused node resumes and checks its ticket: gone.
	var ev string
	must(t, e.pool.QueryRow(ctx, "SELECT r_ev FROM "+q+".acquire('{p}', 'paused', '', 60000000, 0, false, true, 42, $1, 1000000, 0, 0, false, '{1}', false)",
		ticket).Scan(&ev))
	if ev != "gone" {
		t.Fatalf("the paused waiter's check: %s, want gone", ev)
	}
}

// TestHeartbeatKeepsWaiterQueued: a waiter's lease (WithWaiterTTL) is
// kept by its store while it waits, however long, by renewing the store's
// node row: the waiter's own row is never written meanwhile.
//
// The one thing that may write it is a reap, when a heartbeat came so late
// that the node's lease ran out (a loaded machine; the waiter then loses
// its place, as TestPausedWaiterLosesItsPlace asserts). A log of the row's
// writes tells that case from any other: such an attempt proves nothing,
// and runs again with a waiter TTL twice as long. Any other write fails
// the test, and so does a lease that runs out in every attempt.
func TestHeartbeatKeepsWaiterQueued(t *testing.T) {
	for ttl := 200 * time.Millisecond; ttl <= 3200*time.Millisecond; ttl *= 2 {
		if heartbeatKeepsWaiterQueued(t, ttl) {
			return
		}
		t.Logf("waiter TTL %v: a heartbeat came too late, the node's lease ran out and its waiter was reaped; again with a longer TTL", ttl)
	}
	t.Fatal("the node's lease ran out in every attempt: its heartbeat does not keep it")
}

// heartbeatKeepsWaiterQueued is one attempt of
// TestHeartbeatKeepsWaiterQueued with a waiter TTL of ttl. It returns
// false when the node's lease ran out (its waiter reaped), true when the
// waiter row went untouched.
func heartbeatKeepsWaiterQueued(t *testing.T, ttl time.Duration) bool {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	q := pgx.Identifier{e.schema}.Sanitize()
	// Every write of a waiter row, in order: what it was, what it became,
	// and the database's clock then.
	_, err := e.pool.Exec(ctx, `CREATE TABLE `+q+`.test_waiter_writes (id bigserial PRIMARY KEY, op text, ticket bigint,
		old_expires timestamptz, new_expires timestamptz, at timestamptz);
	CREATE FUNCTION `+q+`.test_log_waiter_write() RETURNS trigger LANGUAGE plpgsql AS $f$
	BEGIN
		INSERT INTO `+q+`.test_waiter_writes (op, ticket, old_expires, new_expires, at)
		VALUES (TG_OP, OLD.ticket, OLD.expires, CASE WHEN TG_OP = 'UPDATE' THEN NEW.expires END, clock_timestamp());
		RETURN NULL;
	END $f$;
	CREATE TRIGGER test_log_waiter_write AFTER UPDATE OR DELETE ON `+q+`.waiters
		FOR EACH ROW EXECUTE FUNCTION `+q+`.test_log_waiter_write();`)
	must(t, err)
	define(t, e.s, "hb", 1)
	h, err := e.s.Acquire(ctx, req("holder", time.Minute, "hb"))
	must(t, err)
	pool := newPool(t, nil)
	node, err := pgstore.New(ctx, pool, pgstore.WithSchema(e.schema), pgstore.WithWaiterTTL(ttl))
	must(t, err)
	defer node.Close()
	done := make(chan error, 1)
	go func() {
		r := req("w", time.Minute, "hb")
		r.Wait = true
		g, err := node.Acquire(ctx, r)
		if err == nil {
			err = node.Release(ctx, g.Handle(), nil)
		}
		done <- err
	}()
	waiting(t, e.s, "hb", 1)
	var first time.Time
	var ticket int64
	var version string // the row version: xmin changes with every write
	must(t, e.pool.QueryRow(ctx, "SELECT ticket, xmin::text FROM "+q+".waiters").Scan(&ticket, &version))
	must(t, e.pool.QueryRow(ctx, "SELECT expires FROM "+q+".nodes").Scan(&first))
	// Three leases later (a state of the node's row, not a time): the same
	// waiter row, never rewritten.
	waitFor(t, "the node's lease to be renewed", func() bool {
		var exp time.Time
		err := e.pool.QueryRow(ctx, "SELECT expires FROM "+q+".nodes").Scan(&exp)
		return err == nil && exp.Sub(first) > 3*ttl
	})
	var tk int64
	var now string
	err = e.pool.QueryRow(ctx, "SELECT ticket, xmin::text FROM "+q+".waiters").Scan(&tk, &now)
	kept := err == nil && tk == ticket && now == version
	if !kept {
		// The first write of the waiter's row must be a reap: its lease
		// set from the sentinel to its node's, which had run out.
		var op string
		var old, exp *time.Time
		var at time.Time
		must(t, e.pool.QueryRow(ctx, "SELECT op, old_expires, new_expires, at FROM "+q+".test_waiter_writes "+
			"WHERE ticket = $1 ORDER BY id LIMIT 1", ticket).Scan(&op, &old, &exp, &at))
		var sentinel time.Time
		must(t, e.pool.QueryRow(ctx, "SELECT "+q+".node_lease_sentinel()").Scan(&sentinel))
		if op != "UPDATE" || old == nil || !old.Equal(sentinel) || exp == nil || exp.After(at) {
			t.Fatalf("the waiter row: ticket %d version %s, was %d %s (rewritten: %s, expires %v to %v at %v, not a reap)",
				tk, now, ticket, version, op, old, exp, at)
		}
	} else {
		wantState(t, e.s, "hb", 1, 1)
	}
	must(t, e.s.Release(ctx, h.Handle(), nil))
	must(t, <-done)
	return kept
}

// TestUnreachableNotUndone: a statement that never reached the server
// (no connection could be had) is retried, a few times with backoff; a
// database that comes back is ridden out, one that does not gives one
// error matching pgstore.ErrUnreachable, and no undo is attempted.
func TestUnreachableNotUndone(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	define(t, e.s, "u", 1)
	var down atomic.Bool
	var attempts, upAfter atomic.Int64 // upAfter: back up after so many failed attempts (0: never)
	tr := &recorderTracer{}
	cfg, err := pgxpool.ParseConfig(dbURL())
	must(t, err)
	cfg.ConnConfig.Tracer = tr
	cfg.BeforeConnect = func(ctx context.Context, _ *pgx.ConnConfig) error {
		if down.Load() {
			if n := attempts.Add(1); n == upAfter.Load() {
				down.Store(false)
			}
			// What a refused connection gives: nothing listens on port 1.
			c, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:1/test?connect_timeout=1")
			if err == nil {
				_ = c.Close(ctx)
				return errors.New("port 1 answered")
			}
			return err
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	must(t, err)
	defer pool.Close()
	node, err := pgstore.New(ctx, pool, pgstore.WithSchema(e.schema), pgstore.WithoutListen())
	must(t, err)
	defer node.Close()

	down.Store(true)
	pool.Reset()
	_, err = node.Acquire(ctx, req("r", time.Minute, "u"))
	if !errors.Is(err, pgstore.ErrUnreachable) || strings.Contains(err.Error(), "TTL") || attempts.Load() < 2 {
		t.Fatalf("acquire while down (%d connection attempts): %v", attempts.Load(), err)
	}
	if tr.any("undo") {
		t.Fatal("an acquisition that never reached the server was undone")
	}
	wantState(t, e.s, "u", 0, 0)

	// Down for the first two attempts only: ridden out.
	attempts.Store(0)
	upAfter.Store(2)
	down.Store(true)
	g, err := node.Acquire(ctx, req("r", time.Minute, "u"))
	must(t, err)
	must(t, node.Release(ctx, g.Handle(), nil))
}

// TestReleaseHandsOnlyToFreshWaiters: a release hands the freed slot to
// the head waiter only when that waiter's node is renewing it (at least 30
// % of its lease left). A head whose node stopped renewing it (a row
// nobody renews, 20 % of its lease left) is not handed a slot that its TTL
// would then hold: the lock stays free, and the waiter would have to check
// for itself. A fresh head (90 % left) is handed the slot at once.
func TestReleaseHandsOnlyToFreshWaiters(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	for _, c := range []struct {
		lock   string
		left   string // of a 1 s lease
		handed bool
	}{{"stale", "200 milliseconds", false}, {"fresh", "900 milliseconds", true}} {
		define(t, e.s, c.lock, 1)
		g, err := e.s.Acquire(ctx, req("holder", time.Minute, c.lock))
		must(t, err)
		_, err = e.pool.Exec(ctx, `WITH w AS (
			INSERT INTO `+q+`.waiters (ticket, op, ref, kind, locks, ttl, hold, counted, since, expires, wttl)
			VALUES (nextval('`+q+`.tickets'), 424242, 'ghost-'||$1::text, '', ARRAY[$1::text], 60000000, 0, false,
			        now() - interval '5 seconds', clock_timestamp() + $2::interval, 1000000) RETURNING ticket)
			INSERT INTO `+q+`.queue (lock, ticket) SELECT $1::text, ticket FROM w`, c.lock, c.left)
		must(t, err)
		must(t, e.s.Release(ctx, g.Handle(), nil))
		var n int
		must(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM "+q+".holders WHERE lock = $1 AND ref = 'ghost-'||$1", c.lock).Scan(&n))
		if handed := n == 1; handed != c.handed {
			t.Errorf("%s head waiter handed the slot: %v, want %v", c.lock, handed, c.handed)
		}
	}
}

// TestEveryReleaseHandsOverInItsCommit: a release of several locks and a
// ReleaseStale grant the freed slot to the head waiter in their own
// statement, as the release of one lock does: the waiter (a node's, which
// sends nothing here) holds the lock once the release returns, with no
// check of its own.
func TestEveryReleaseHandsOverInItsCommit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	held := func(lock string) bool {
		var n int
		must(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM "+q+".holders WHERE lock = $1 AND ref = 'ghost'", lock).Scan(&n))
		return n == 1
	}
	for _, name := range []string{"several/a", "several/b", "stale"} {
		define(t, e.s, name, 1)
	}

	g, err := e.s.Acquire(ctx, req("holder", time.Minute, "several/a", "several/b"))
	must(t, err)
	nodeWaiter(t, e, "several/a", "ghost", 200, 600, "9 seconds")
	must(t, e.s.Release(ctx, g.Handle(), nil))
	if !held("several/a") {
		t.Error("the release of two locks did not hand several/a to its head waiter")
	}

	g, err = e.s.Acquire(ctx, req("holder", time.Minute, "stale"))
	must(t, err)
	nodeWaiter(t, e, "stale", "ghost", 201, 601, "9 seconds")
	ok, err := e.s.ReleaseStale(ctx, g.Handle(), time.Microsecond, nil)
	must(t, err)
	if !ok {
		t.Fatal("ReleaseStale of a lease not renewed for a microsecond released nothing")
	}
	if !held("stale") {
		t.Error("ReleaseStale did not hand the lock to its head waiter")
	}
}

// nodeWaiter queues ref on lock as a waiter of node (its
// row carries node_lease_sentinel(), its lease is the node's), the node's row having
// left of a 10 s waiter lease (long, so that a slow machine does not turn
// a fresh node stale under the test). It returns the waiter's ticket.
func nodeWaiter(t *testing.T, e *env, lock, ref string, node, op int64, left string) int64 {
	t.Helper()
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	_, err := e.pool.Exec(ctx, "INSERT INTO "+q+".nodes (id, expires, wttl) VALUES ($1, clock_timestamp() + $2::interval, 10000000) "+
		"ON CONFLICT (id) DO UPDATE SET expires = excluded.expires", node, left)
	must(t, err)
	var ticket int64
	must(t, e.pool.QueryRow(ctx, `WITH w AS (
		INSERT INTO `+q+`.waiters (ticket, op, ref, kind, locks, ttl, hold, counted, since, expires, wttl, node)
		VALUES (nextval('`+q+`.tickets'), $4, $2, '', ARRAY[$1::text], 60000000, 0, false, now(), `+q+`.node_lease_sentinel(), 10000000, $3)
		RETURNING ticket)
		INSERT INTO `+q+`.queue (lock, ticket) SELECT $1::text, ticket FROM w RETURNING ticket`, lock, ref, node, op).Scan(&ticket))
	return ticket
}

// TestWaitersLiveAsTheirNode: a waiter's liveness is its node's row. A
// release hands the slot to the head waiter of a node that renews its
// lease; not to one whose node has less than 30 % of its lease left (it
// stays queued, a try does not jump it); and a node whose lease ran out
// stops blocking at once: State no longer counts its waiter, a try is
// granted, and the operations that met it deleted it.
func TestWaitersLiveAsTheirNode(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	count := func(sql string, args ...any) int {
		var n int
		must(t, e.pool.QueryRow(ctx, sql, args...).Scan(&n))
		return n
	}
	for i, c := range []struct {
		lock, left string
		handed     bool
	}{{"renewed", "9 seconds", true}, {"late", "2 seconds", false}} {
		define(t, e.s, c.lock, 1)
		g, err := e.s.Acquire(ctx, req("holder", time.Minute, c.lock))
		must(t, err)
		nodeWaiter(t, e, c.lock, "ghost", int64(100+i), int64(500+i), c.left)
		must(t, e.s.Release(ctx, g.Handle(), nil))
		handed := count("SELECT count(*) FROM "+q+".holders WHERE lock = $1 AND ref = 'ghost'", c.lock) == 1
		if handed != c.handed {
			t.Errorf("%s: the head waiter handed the slot: %v, want %v", c.lock, handed, c.handed)
		}
		if !c.handed {
			wantState(t, e.s, c.lock, 0, 1)
			if _, err := e.s.Acquire(ctx, req("try", time.Minute, c.lock)); !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("%s: a try jumped a live waiter: %v", c.lock, err)
			}
		}
	}
	// Time passes: the late node's lease runs out, and so does the expiry
	// its waiter took from it when the release met it.
	_, err := e.pool.Exec(ctx, "UPDATE "+q+".nodes SET expires = expires - interval '3 seconds' WHERE id = 101")
	must(t, err)
	_, err = e.pool.Exec(ctx, "UPDATE "+q+".waiters SET expires = expires - interval '3 seconds' "+
		"WHERE node = 101 AND expires <> "+q+".node_lease_sentinel()")
	must(t, err)
	wantState(t, e.s, "late", 0, 0)
	g, err := e.s.Acquire(ctx, req("try", time.Minute, "late"))
	must(t, err)
	must(t, e.s.Release(ctx, g.Handle(), nil))
	if n := count("SELECT count(*) FROM " + q + ".waiters WHERE node = 101"); n != 0 {
		t.Errorf("%d waiters of the dead node left", n)
	}
	// A node that died unseen, its waiter queued behind a lease that then
	// ran out: a try meets it first, and takes the lock over.
	define(t, e.s, "unseen", 1)
	_, err = e.s.Acquire(ctx, req("gone", time.Second, "unseen"))
	must(t, err)
	nodeWaiter(t, e, "unseen", "ghost", 102, 502, "-1 millisecond")
	must(t, e.s.Advance(ctx, time.Minute))
	g, err = e.s.Acquire(ctx, req("try", time.Minute, "unseen"))
	must(t, err)
	must(t, e.s.Release(ctx, g.Handle(), nil))
}

// TestLateNodeKeepsItsWaiters: a node that is late (less than 30 % of
// its lease left) but alive is not handed a slot, and its waiter is left
// as it is: a try does not jump it, and once the node renews, the waiter's
// own check is granted in its place.
func TestLateNodeKeepsItsWaiters(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "pause", 1)
	g, err := e.s.Acquire(ctx, req("holder", time.Minute, "pause"))
	must(t, err)
	ticket := nodeWaiter(t, e, "pause", "paused", 200, 600, "2 seconds")
	must(t, e.s.Release(ctx, g.Handle(), nil))
	var owned bool
	must(t, e.pool.QueryRow(ctx, "SELECT expires = "+q+".node_lease_sentinel() FROM "+q+".waiters WHERE ticket = $1", ticket).Scan(&owned))
	if !owned {
		t.Fatal("the waiter of a late node was reaped")
	}
	if _, err := e.s.Acquire(ctx, req("try", time.Minute, "pause")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a try jumped the waiter of a late node: %v", err)
	}
	// The node renews, then its waiter checks (as its store would).
	var n int64
	must(t, e.pool.QueryRow(ctx, "SELECT "+q+".node_beat(200, 10000000, '{}', '{}', '{}')").Scan(&n))
	var ev string
	must(t, e.pool.QueryRow(ctx, "SELECT r_ev FROM "+q+".check_one('{pause}', 'paused', '', 60000000, 0, false, true, 600, $1, "+
		"10000000, 0, 200, false, '{1}', false)", ticket).Scan(&ev))
	if n != 1 || ev != "granted" {
		t.Fatalf("after the node's heartbeat (%d rows) its waiter's check: %s, want granted", n, ev)
	}
	wantState(t, e.s, "pause", 1, 0)
}

// TestOneNodeSweeps: of the stores of a schema, one sweeps, the live node
// of lowest id; a node whose row expired, or that closed, leaves it to the
// next; a live node of lower id takes it.
func TestOneNodeSweeps(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "sw", 1)
	h, err := e.s.Acquire(ctx, req("holder", time.Minute, "sw"))
	must(t, err)
	// A waiter on each of three nodes starts its heartbeat.
	nodes := []*pgstore.Store{e.node(t), e.node(t), e.node(t)}
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req("w"+strconv.Itoa(i), time.Minute, "sw")
			r.Wait = true
			_, _ = n.Acquire(ctx, r)
		}()
	}
	waiting(t, e.s, "sw", 3)
	slices.SortFunc(nodes, func(a, b *pgstore.Store) int { return cmp.Compare(a.NodeID(), b.NodeID()) })
	sweeps := func(want ...bool) func() bool {
		return func() bool {
			for i, n := range nodes {
				if n.Sweeps() != want[i] {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, "the lowest node alone to sweep", sweeps(true, false, false))
	// A live node of lower id (1: ids are drawn above 0) takes the sweep.
	_, err = e.pool.Exec(ctx, "INSERT INTO "+q+".nodes (id, expires, wttl) VALUES (1, now() + interval '1 hour', 1000000)")
	must(t, err)
	waitFor(t, "no store to sweep while a lower node lives", sweeps(false, false, false))
	// Once its row has expired, the lowest store sweeps again.
	_, err = e.pool.Exec(ctx, "UPDATE "+q+".nodes SET expires = now() - interval '1 second' WHERE id = 1")
	must(t, err)
	waitFor(t, "the lowest store to sweep again", sweeps(true, false, false))
	// The sweeper closes (its row goes): the next one sweeps.
	must(t, nodes[0].Close())
	nodes = nodes[1:]
	waitFor(t, "the next node alone to sweep", sweeps(true, false))
	must(t, e.s.Release(ctx, h.Handle(), nil))
}

// TestSweepRemovesDeadNodes: waiters of a node that died and that no
// operation met go with sweep_nodes(), then the node's row; a live node's
// row and waiters stay; Close removes the store's own node row.
func TestSweepRemovesDeadNodes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	count := func(sql string) int {
		var n int
		must(t, e.pool.QueryRow(ctx, sql).Scan(&n))
		return n
	}
	for i := range 3 {
		lock := "s" + string(rune('a'+i))
		define(t, e.s, lock, 1)
		g, err := e.s.Acquire(ctx, req("holder", time.Minute, lock))
		must(t, err)
		_ = g
		nodeWaiter(t, e, lock, "dead", 300, int64(700+i), "-1 second")
		nodeWaiter(t, e, lock, "live", 301, int64(800+i), "1 hour")
	}
	var n int64
	must(t, e.pool.QueryRow(ctx, "SELECT "+q+".sweep_nodes(64)").Scan(&n))
	if n != 4 || count("SELECT count(*) FROM "+q+".waiters WHERE node = 300") != 0 ||
		count("SELECT count(*) FROM "+q+".nodes WHERE id = 300") != 0 {
		t.Fatalf("sweep_nodes deleted %d rows; the dead node's waiters and row must go", n)
	}
	if count("SELECT count(*) FROM "+q+".waiters WHERE node = 301") != 3 || count("SELECT count(*) FROM "+q+".nodes WHERE id = 301") != 1 {
		t.Fatal("sweep_nodes deleted a live node's waiters or row")
	}
	// A grant handed to a node that then died, unconfirmed, that nothing
	// met: it ends with the node's lease.
	define(t, e.s, "handed", 1)
	g, err := e.s.Acquire(ctx, req("holder", time.Minute, "handed"))
	must(t, err)
	nodeWaiter(t, e, "handed", "ghost", 302, 790, "9 seconds")
	must(t, e.s.Release(ctx, g.Handle(), nil))
	_, err = e.pool.Exec(ctx, "UPDATE "+q+".nodes SET expires = clock_timestamp() - interval '1 millisecond' WHERE id = 302")
	must(t, err)
	must(t, e.pool.QueryRow(ctx, "SELECT "+q+".sweep_nodes(64)").Scan(&n))
	if count("SELECT count(*) FROM "+q+".holders WHERE lock = 'handed' AND expires > clock_timestamp()") != 0 ||
		count("SELECT count(*) FROM "+q+".nodes WHERE id = 302") != 0 {
		t.Fatal("sweep_nodes left a dead node's unconfirmed grant live, or its row")
	}
	// A store that waited has a node row until it closes.
	s2, err := pgstore.New(ctx, newPool(t, nil), pgstore.WithSchema(e.schema))
	must(t, err)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		r := req("w", time.Minute, "sa")
		r.Wait = true
		_, err := s2.Acquire(wctx, r)
		done <- err
	}()
	waitFor(t, "the second store's node row", func() bool { return count("SELECT count(*) FROM "+q+".nodes") == 2 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled waiter: %v", err)
	}
	must(t, s2.Close())
	if n := count("SELECT count(*) FROM " + q + ".nodes"); n != 1 {
		t.Fatalf("%d node rows after Close, want the live ghost's only", n)
	}
}

// TestHandedGrantEndsWithItsNode: a slot a release hands to a node's
// waiter is its node's until the node confirms it (its next heartbeat). A
// node that died (its row still fresh when the release ran) never
// confirms: once its lease runs out, the grant ends with it and a try
// takes the lock over, long before the grant's own 1-minute TTL. A
// confirmed grant outlives its node's lease (it is its holder's, kept by
// its TTL), and a real store confirms the grants its waiters take.
func TestHandedGrantEndsWithItsNode(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	nodeOf := func(lock, ref string) (node *int64) {
		must(t, e.pool.QueryRow(ctx, "SELECT node FROM "+q+".holders WHERE lock = $1 AND ref = $2", lock, ref).Scan(&node))
		return node
	}
	for i, c := range []struct {
		lock      string
		confirmed bool
	}{{"died", false}, {"confirmed", true}} {
		define(t, e.s, c.lock, 1)
		g, err := e.s.Acquire(ctx, req("holder", time.Minute, c.lock))
		must(t, err)
		node := int64(900 + i)
		nodeWaiter(t, e, c.lock, "ghost", node, int64(950+i), "9 seconds")
		must(t, e.s.Release(ctx, g.Handle(), nil))
		if n := nodeOf(c.lock, "ghost"); n == nil || *n != node {
			t.Fatalf("%s: the handed grant's node: %v, want %d", c.lock, n, node)
		}
		if c.confirmed {
			var n int64
			must(t, e.pool.QueryRow(ctx, "SELECT "+q+".node_beat($1, 10000000, '{}', ARRAY[$2], '{ghost}')",
				node, c.lock).Scan(&n))
			if got := nodeOf(c.lock, "ghost"); got != nil {
				t.Fatalf("a confirmed grant is still its node's: %d", *got)
			}
		}
		_, err = e.pool.Exec(ctx, "UPDATE "+q+".nodes SET expires = clock_timestamp() - interval '1 millisecond' WHERE id = $1", node)
		must(t, err)
		g, err = e.s.Acquire(ctx, req("try", time.Minute, c.lock))
		if c.confirmed {
			if !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("a try took a confirmed grant whose node's lease ran out: %v", err)
			}
			continue
		}
		must(t, err)
		must(t, e.s.Release(ctx, g.Handle(), nil))
	}
	// A real store confirms the grant its waiter took from a handoff (a
	// long waiter lease, so that its node is fresh whatever the machine's
	// load: its heartbeat comes every 2 s).
	define(t, e.s, "real", 1)
	h, err := e.s.Acquire(ctx, req("holder", time.Minute, "real"))
	must(t, err)
	node, err := pgstore.New(ctx, newPool(t, nil), pgstore.WithSchema(e.schema), pgstore.WithWaiterTTL(8*time.Second))
	must(t, err)
	defer node.Close()
	got := make(chan error, 1)
	go func() {
		r := req("w", time.Minute, "real")
		r.Wait = true
		_, err := node.Acquire(ctx, r)
		got <- err
	}()
	waiting(t, e.s, "real", 1)
	must(t, e.s.Release(ctx, h.Handle(), nil))
	must(t, <-got)
	var handed bool
	must(t, e.pool.QueryRow(ctx, "SELECT handed IS NOT NULL FROM "+q+".holders WHERE lock = 'real' AND ref = 'w'").Scan(&handed))
	if !handed {
		t.Fatal("the release did not hand the slot to the waiter")
	}
	waitFor(t, "the grant to be confirmed", func() bool {
		var n *int64
		err := e.pool.QueryRow(ctx, "SELECT node FROM "+q+".holders WHERE lock = 'real' AND ref = 'w'").Scan(&n)
		return err == nil && n == nil
	})
}

// TestQueueCountsMatchTheQueue: locks.queued and locks.unowned, which the
// counts read instead of the queue while every waiter is a live node's,
// are the lock's queue rows and those whose waiter keeps a lease of its
// own, through queueing (of one lock and of two), cancellation and
// handoffs on two stores; and the counts the events carry stay exact.
func TestQueueCountsMatchTheQueue(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	same := func(when string) {
		t.Helper()
		rows, err := e.pool.Query(ctx, "SELECT l.name, l.queued, l.unowned, "+
			"(SELECT count(*) FROM "+q+".queue x WHERE x.lock = l.name)::int, "+
			"(SELECT count(*) FROM "+q+".queue x JOIN "+q+".waiters w ON w.ticket = x.ticket "+
			"  WHERE x.lock = l.name AND (NOT x.own OR w.expires <> "+q+".node_lease_sentinel()))::int, "+
			"(SELECT count(*) FROM "+q+".queue x WHERE x.lock = l.name AND NOT x.own)::int "+
			"FROM "+q+".locks l")
		must(t, err)
		defer rows.Close()
		for rows.Next() {
			var name string
			var queued, unowned, n, own, flagged int
			must(t, rows.Scan(&name, &queued, &unowned, &n, &own, &flagged))
			if queued != n || unowned != flagged || own != flagged {
				t.Fatalf("%s, %s: queued %d (rows %d), unowned %d (rows %d, of waiters with their own lease %d)",
					when, name, queued, n, unowned, flagged, own)
			}
		}
		must(t, rows.Err())
	}
	define(t, e.s, "cnt", 1)
	define(t, e.s, "cnt2", 1)
	h, err := e.s.Acquire(ctx, req("holder", time.Minute, "cnt"))
	must(t, err)
	other, err := pgstore.New(ctx, newPool(t, nil), pgstore.WithSchema(e.schema))
	must(t, err)
	defer other.Close()
	stores := []*pgstore.Store{e.s, other}
	var wg sync.WaitGroup
	var cancels []context.CancelFunc
	start := func(s *pgstore.Store, ref string, names ...string) {
		wctx, cancel := context.WithCancel(ctx)
		cancels = append(cancels, cancel)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req(ref, time.Minute, names...)
			r.Wait = true
			g, err := s.Acquire(wctx, r)
			if err == nil {
				err = s.Release(ctx, g.Handle(), nil)
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Error(err)
			}
		}()
	}
	for i := range 20 {
		start(stores[i%2], "w"+string(rune('a'+i)), "cnt")
		if i == 9 {
			start(other, "both", "cnt", "cnt2") // a waiter of two locks: a lease of its own
		}
	}
	waiting(t, e.s, "cnt", 21)
	same("21 queued")
	for i := 0; i < 21; i += 2 {
		cancels[i]()
	}
	waiting(t, e.s, "cnt", 10)
	same("11 cancelled")
	must(t, e.s.Release(ctx, h.Handle(), nil))
	wg.Wait()
	for _, c := range cancels {
		c()
	}
	same("drained")
	wantState(t, e.s, "cnt", 0, 0)
}

// TestFailedUndoRetriedByHeartbeat: the waiter row of an acquisition its
// caller abandoned, when the undo could not reach the database, would live
// as long as its store's node; the store's heartbeat gives its place up.
// It leaves holds alone: the ref of an abandoned acquisition may hold its
// slot again by then (a re-entry keeps the holder row's op).
func TestFailedUndoRetriedByHeartbeat(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "busy", 1)
	define(t, e.s, "orphan", 1)
	define(t, e.s, "held", 1)
	h, err := e.s.Acquire(ctx, req("holder", time.Minute, "busy"))
	must(t, err)
	node, err := pgstore.New(ctx, newPool(t, nil), pgstore.WithSchema(e.schema))
	must(t, err)
	defer node.Close()
	// A waiter starts the node's heartbeat.
	got := make(chan error, 1)
	go func() {
		r := req("w", time.Minute, "busy")
		r.Wait = true
		g, err := node.Acquire(ctx, r)
		if err == nil {
			err = node.Release(ctx, g.Handle(), nil)
		}
		got <- err
	}()
	waiting(t, e.s, "busy", 1)
	g, err := e.s.Acquire(ctx, req("holder", time.Minute, "orphan"))
	must(t, err)
	nodeWaiter(t, e, "orphan", "abandoned", node.NodeID(), 4242, "10 seconds")
	// A hold whose acquisition was abandoned, then re-entered by its ref.
	job, err := node.Acquire(ctx, req("job", time.Minute, "held"))
	must(t, err)
	var op int64
	must(t, e.pool.QueryRow(ctx, "SELECT op FROM "+q+".holding WHERE lock = 'held' AND ref = 'job'").Scan(&op))
	node.UndoLater(op)
	node.UndoLater(4242)
	waitFor(t, "the heartbeat to give up the abandoned waiter's place", func() bool {
		var n int
		err := e.pool.QueryRow(ctx, "SELECT count(*) FROM "+q+".waiters WHERE op = 4242").Scan(&n)
		return err == nil && n == 0
	})
	wantState(t, e.s, "orphan", 1, 0)
	if st, err := node.Held(ctx, job.Handle()); err != nil || !st.Held {
		t.Fatalf("a hold of the ref of an abandoned acquisition was taken: %+v %v", st, err)
	}
	must(t, node.Release(ctx, job.Handle(), nil))
	must(t, e.s.Release(ctx, g.Handle(), nil))
	must(t, e.s.Release(ctx, h.Handle(), nil))
	must(t, <-got)
}

// TestDropDeadKeepsOtherLocksRows: a dead waiter of two locks met on one
// loses its place there only; its place on the other lock (and its waiter
// row) go when that lock's operations meet it, under that lock's row.
func TestDropDeadKeepsOtherLocksRows(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "d1", 1)
	define(t, e.s, "d2", 1)
	var ticket int64
	must(t, e.pool.QueryRow(ctx, `WITH w AS (
		INSERT INTO `+q+`.waiters (ticket, op, ref, kind, locks, ttl, hold, counted, since, expires)
		VALUES (nextval('`+q+`.tickets'), 77, 'ghost', '', '{d1,d2}', 60000000, 0, false, now(), now() - interval '1 second')
		RETURNING ticket)
		INSERT INTO `+q+`.queue (lock, ticket) SELECT l, ticket FROM w, unnest('{d1,d2}'::text[]) l RETURNING ticket`).Scan(&ticket))
	count := func(sql string) int {
		var n int
		must(t, e.pool.QueryRow(ctx, sql).Scan(&n))
		return n
	}
	var n int
	must(t, e.pool.QueryRow(ctx, "SELECT "+q+".drop_dead('d1', clock_timestamp(), 64)").Scan(&n))
	if n != 1 || count("SELECT count(*) FROM "+q+".queue WHERE lock = 'd1'") != 0 ||
		count("SELECT count(*) FROM "+q+".queue WHERE lock = 'd2'") != 1 || count("SELECT count(*) FROM "+q+".waiters") != 1 {
		t.Fatal("drop_dead on d1 touched d2's queue, or dropped the waiter row of a waiter still queued on d2")
	}
	must(t, e.pool.QueryRow(ctx, "SELECT "+q+".drop_dead('d2', clock_timestamp(), 64)").Scan(&n))
	if n != 1 || count("SELECT count(*) FROM "+q+".queue") != 0 || count("SELECT count(*) FROM "+q+".waiters") != 0 {
		t.Fatal("the dead waiter's last place and its row did not go")
	}
	if count("SELECT count(*) FROM "+q+".locks WHERE queued <> 0 OR unowned <> 0") != 0 {
		t.Fatal("the counts of the lock rows do not match their queues")
	}
}

// TestHandoffToOwnNodeNotNotified: a release that hands its slot to a
// waiter of its own store gives the waiter its grant from the statement's
// answer, and sends no notification; a release on another
// store notifies the grant. Notifications arrive in commit order, so a
// marker notified after the release comes after the release's grant, if it
// sent one. Polls are an hour apart: the waiter is woken only by its grant.
func TestHandoffToOwnNodeNotNotified(t *testing.T) {
	defer pgstore.SetListenPoll(time.Hour)()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	define(t, e.s, "own", 1)
	node, err := pgstore.New(ctx, e.pool, pgstore.WithSchema(e.schema), pgstore.WithPollInterval(time.Hour))
	must(t, err)
	defer node.Close()
	lc, err := pgx.Connect(ctx, dbURL())
	must(t, err)
	defer lc.Close(context.Background())
	channel := pgx.Identifier{pgstore.ChannelOf(e.schema)}.Sanitize()
	_, err = lc.Exec(ctx, "LISTEN "+channel)
	must(t, err)
	for _, c := range []struct {
		releaser *pgstore.Store
		notified bool
	}{{node, false}, {e.s, true}} {
		h, err := c.releaser.Acquire(ctx, req("holder", time.Minute, "own"))
		must(t, err)
		done := make(chan error, 1)
		go func() {
			r := req("waiter", time.Minute, "own")
			r.Wait = true
			g, err := node.Acquire(ctx, r)
			if err == nil {
				err = node.Release(ctx, g.Handle(), nil)
			}
			done <- err
		}()
		waiting(t, e.s, "own", 1)
		must(t, c.releaser.Release(ctx, h.Handle(), nil))
		must(t, <-done)
		_, err = e.pool.Exec(ctx, "SELECT pg_notify($1, 'marker')", pgstore.ChannelOf(e.schema))
		must(t, err)
		grants := 0
		for {
			n, err := lc.WaitForNotification(ctx)
			must(t, err)
			if n.Payload == "marker" {
				break
			}
			if strings.HasPrefix(n.Payload, "g ") {
				grants++
			}
		}
		if notified := grants > 0; notified != c.notified || grants > 1 {
			t.Errorf("release on the waiter's store %v: %d grants notified", c.releaser == node, grants)
		}
	}
}
