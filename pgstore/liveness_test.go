package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sleeplock/sleeplock/pgstore"
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
	node, err := pgstore.New(ctx, pool, pgstore.WithSchema(e.schema), pgstore.WithPollInterval(time.Hour))
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
				"WHERE query LIKE 'LISTEN %' AND datname = current_database() AND query LIKE '%' || $1 || '%'",
				pgstore.ChannelOf(e.schema)).Scan(&n))
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
	for i := 0; count("SELECT count(*) FROM "+q+".waiters")+count("SELECT count(*) FROM "+q+".locks")+
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
	must(t, e.pool.QueryRow(ctx, "SELECT r_ev FROM "+q+".acquire('{p}', 'paused', '', 60000000, 0, false, true, 42, $1, 1000000, 0)",
		ticket).Scan(&ev))
	if ev != "gone" {
		t.Fatalf("the paused waiter's check: %s, want gone", ev)
	}
}

// TestHeartbeatKeepsWaiterQueued: a waiter's lease (WithWaiterTTL) is
// renewed by its store while it waits, however long.
func TestHeartbeatKeepsWaiterQueued(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	q := pgx.Identifier{e.schema}.Sanitize()
	define(t, e.s, "hb", 1)
	h, err := e.s.Acquire(ctx, req("holder", time.Minute, "hb"))
	must(t, err)
	pool := newPool(t, nil)
	node, err := pgstore.New(ctx, pool, pgstore.WithSchema(e.schema), pgstore.WithWaiterTTL(200*time.Millisecond))
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
	must(t, e.pool.QueryRow(ctx, "SELECT ticket, expires FROM "+q+".waiters").Scan(&ticket, &first))
	// Three leases later (a state of the row, not a time): the same row.
	waitFor(t, "the waiter lease to be renewed", func() bool {
		var exp time.Time
		var tk int64
		err := e.pool.QueryRow(ctx, "SELECT ticket, expires FROM "+q+".waiters").Scan(&tk, &exp)
		return err == nil && tk == ticket && exp.Sub(first) > 600*time.Millisecond
	})
	wantState(t, e.s, "hb", 1, 1)
	must(t, e.s.Release(ctx, h.Handle(), nil))
	must(t, <-done)
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
