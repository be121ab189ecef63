package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sleeplock/sleeplock/store"
)

// dbError marks an error of the database: the transaction is rolled back.
type dbError struct{ err error }

func (e *dbError) Error() string { return "sqlitestore: " + e.err.Error() }
func (e *dbError) Unwrap() error { return e.err }

// txn is one write transaction and what it learned.
type txn struct {
	s       *Store
	ctx     context.Context // not cancelled: a transaction runs to its end
	now     int64           // µs since the epoch, read once
	changed bool            // holders or queue changed: wake waiters
	locks   map[string]*lk
	evs     []pending
	ends    []ending
	counter map[string]*counter
	stats   map[string]*statDelta // by definition: see flushStats
	told    bool                  // recorded a hold ended by another (tell)
	read    bool                  // a read-only check: a write fails with errNeedWrite
	abort   bool                  // roll back whatever f returns (all or nothing)
}

// errNeedWrite ends a read-only check that found something to change.
var errNeedWrite = errors.New("sqlitestore: needs a write transaction")

type pending struct {
	to store.Emitter
	e  store.Event
}

type counter struct {
	v     int64
	dirty bool
}

// hrow is a holder row.
type hrow struct {
	ref, kind                             string
	token                                 int64
	count                                 int
	weight                                int
	acquired, renewed, expires, ttl, hold int64
	pid, pgrp                             int
	pstart                                int64
	host                                  string
}

// lk is a lock as this transaction sees it: its slots, holders (by token)
// and live waiters (by ticket).
type lk struct {
	name    string
	def     string // its definition: name, or the family that covers it
	slots   int
	holders []hrow
	queue   []int64
	asked   map[int64]int // the weights of queue's waiters that ask other than 1
}

// used returns the slots l's holders take.
func (l *lk) used() int {
	n := 0
	for i := range l.holders {
		n += l.holders[i].weight
	}
	return n
}

// asks returns the weight the waiter with ticket asks of l (WeightAll:
// every slot).
func (l *lk) asks(ticket int64) int {
	if w, ok := l.asked[ticket]; ok {
		return w
	}
	return 1
}

// ahead returns the slots the first p waiters of l's queue ask of it.
func (l *lk) ahead(p int) int {
	if len(l.asked) == 0 {
		return p
	}
	n := 0
	for _, ticket := range l.queue[:p] {
		n += store.Need(l.asks(ticket), l.slots)
	}
	return n
}

// do runs f in a write transaction (BEGIN IMMEDIATE) on the store's
// connection; it commits unless f fails with an error of the database, then
// delivers the events f emitted and wakes the waiters of this process when
// anything changed. ctx bounds the wait for the write lock only. A
// transaction that finds the database busy (its BEGIN, a statement of f,
// its COMMIT) is rolled back and run again, from 50µs doubling to 2ms
// between tries, until the busy timeout has passed since do began; then
// it fails with an error matching ErrBusy.
func (s *Store) do(ctx context.Context, f func(t *txn) error) error {
	return s.retry(ctx, f, s.doOnce)
}

// retry runs once(ctx, f, deadline) until it does not find the database
// busy or the busy timeout has passed since retry began, pausing from
// firstPause doubling to lastPause between tries: the loop of do and read.
func (s *Store) retry(ctx context.Context, f func(t *txn) error, once func(context.Context, func(t *txn) error, time.Time) error) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	deadline := time.Now().Add(s.cfg.busy)
	for d := firstPause; ; d = min(2*d, lastPause) {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := once(ctx, f, deadline)
		if !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		if err := s.busyPause(ctx, d); err != nil {
			return err
		}
	}
}

// Pauses between the tries of a busy database.
const (
	firstPause = 50 * time.Microsecond
	lastPause  = 2 * time.Millisecond
)

// doOnce is one try of do. When it fails with a busy database's error
// (isBusy), nothing was committed.
func (s *Store) doOnce(ctx context.Context, f func(t *txn) error, deadline time.Time) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	if err := s.beginBy(ctx, "BEGIN IMMEDIATE", deadline); err != nil {
		s.mu.Unlock()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.pathError(err)
	}
	t := &txn{s: s, ctx: context.WithoutCancel(ctx), now: time.Now().UnixMicro()}
	left := len(s.left)
	var err error
	for _, ticket := range s.left {
		if err = t.dropWaiter(ticket); err != nil {
			break
		}
	}
	if err == nil {
		err = f(t)
	}
	if err == nil || !isDB(err) {
		if ferr := t.flush(); ferr != nil {
			err = ferr
		}
	}
	if isDB(err) || t.abort {
		_, _ = s.wc.ExecContext(t.ctx, "ROLLBACK")
		if isReadOnly(err) {
			s.dropConn()
		}
		s.mu.Unlock()
		if !isDB(err) {
			return err
		}
		return s.pathError(errors.Unwrap(err))
	}
	if s.beforeCommit != nil {
		s.beforeCommit(t)
	}
	if _, cerr := s.wc.ExecContext(t.ctx, "COMMIT"); cerr != nil {
		_, _ = s.wc.ExecContext(t.ctx, "ROLLBACK")
		if isReadOnly(cerr) {
			s.dropConn()
		}
		s.mu.Unlock()
		return s.pathError(cerr)
	}
	s.left = s.left[left:]
	// Events go out before the next transaction of this store commits, so
	// that this process delivers them in commit order (Emit does not block).
	for _, p := range t.evs {
		p.to.Emit(p.e)
	}
	s.mu.Unlock()
	for _, e := range t.ends {
		s.ended(e)
	}
	if t.changed {
		s.notify()
	}
	return err
}

// begin starts a write transaction on wc, retrying while another
// connection writes: from 50µs doubling to 2ms between tries (with
// jitter), up to the busy timeout. SQLite's own busy handler sleeps
// 1, 2, 5, 10, 15, 20, 25… ms, too coarse for a hand-off between
// processes; the connection's busy timeout is 0 for this reason.
func (s *Store) begin(ctx context.Context) error {
	return s.beginBy(ctx, "BEGIN IMMEDIATE", time.Now().Add(s.cfg.busy))
}

// beginBy runs stmt (a BEGIN) as begin describes, trying until deadline
// (opening the connection, when it must, is tried again as well). The statement itself
// runs without ctx's cancellation: a BEGIN interrupted after it took effect
// would leave the connection inside a transaction.
//
// A connection that SQLite opened while the file could not be written is
// read-only for good: a BEGIN IMMEDIATE on it fails with SQLITE_READONLY.
// beginBy then drops it and begins on another, up to twice: the pool may
// first hand back an idle connection of the poller, opened read-only too;
// the next is new, and writable if the file is again.
func (s *Store) beginBy(ctx context.Context, stmt string, deadline time.Time) error {
	renewed := 0
	for d := firstPause; ; d = min(2*d, lastPause) {
		var err error
		if s.wc == nil {
			err = s.connect(ctx)
		}
		if err == nil {
			_, err = s.wc.ExecContext(context.WithoutCancel(ctx), stmt)
		}
		if isReadOnly(err) {
			s.dropConn()
			if renewed++; renewed <= 2 {
				continue
			}
		}
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		if err := s.busyPause(ctx, d); err != nil {
			return err
		}
	}
}

// busyPause pauses after a try that found the database busy.
func (s *Store) busyPause(ctx context.Context, d time.Duration) error {
	if s.onBusy != nil {
		s.onBusy()
	}
	return pause(ctx, d)
}

// pause waits about d (d/2 to 3d/2: tries of several processes spread
// out), or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d/2 + rand.N(d))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// whileBusy runs f until it returns anything but a busy database's error,
// trying again as begin does (from 50µs doubling to 2ms between tries,
// with jitter) up to the busy timeout. It serves what a new file's set-up
// can make busy outside a transaction: opening a connection, whose
// switch to WAL mode SQLite may refuse without waiting, and reading on
// wc, whose busy timeout is 0, while another process sets the file up or
// recovers its WAL index (SQLITE_BUSY_RECOVERY). Several processes
// opening a new file at once meet both.
func (s *Store) whileBusy(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(s.cfg.busy)
	for d := firstPause; ; d = min(2*d, lastPause) {
		err := f()
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		if err := s.busyPause(ctx, d); err != nil {
			return err
		}
	}
}

// connect opens the store's connection for transactions; s.mu is held
// (or the store is not shared yet).
func (s *Store) connect(ctx context.Context) error {
	wc, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	// Transactions begin in begin's own retry loop.
	if _, err := wc.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		_ = wc.Close()
		return err
	}
	s.wc = wc
	return nil
}

// dropConn closes the store's connection for transactions, not to be used
// again (database/sql does not put a connection that reports
// driver.ErrBadConn back in its pool); s.mu is held. The next transaction
// opens another.
func (s *Store) dropConn() {
	if s.wc == nil {
		return
	}
	_ = s.wc.Raw(func(any) error { return driver.ErrBadConn })
	_ = s.wc.Close()
	s.wc = nil
}

// isReadOnly reports SQLite's SQLITE_READONLY (and its extended codes):
// the file, its WAL or its shared memory could not be written.
func isReadOnly(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_READONLY
}

func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_BUSY || se.Code()&0xff == sqlite3.SQLITE_LOCKED)
}

// read runs f in a read transaction (a snapshot; it waits for no writer)
// on the store's connection. f fails with errNeedWrite at its first write.
// A read that finds the database busy (a deferred BEGIN takes its
// snapshot at f's first statement, which may meet a connection that
// recovers or removes the WAL) is tried again as do's transactions are,
// until the busy timeout has passed since read began.
func (s *Store) read(ctx context.Context, f func(t *txn) error) error {
	return s.retry(ctx, f, s.readOnce)
}

// readOnce is one try of read.
func (s *Store) readOnce(ctx context.Context, f func(t *txn) error, deadline time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	if err := s.beginBy(ctx, "BEGIN", deadline); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.pathError(err)
	}
	t := &txn{s: s, ctx: context.WithoutCancel(ctx), now: time.Now().UnixMicro(), read: true}
	err := f(t)
	_, _ = s.wc.ExecContext(t.ctx, "ROLLBACK")
	if isReadOnly(err) {
		s.dropConn()
	}
	if isDB(err) {
		return s.pathError(errors.Unwrap(err))
	}
	return err
}

func isDB(err error) bool {
	var d *dbError
	return errors.As(err, &d)
}

func (t *txn) exec(q string, args ...any) error {
	if t.read {
		return errNeedWrite
	}
	if _, err := t.s.wc.ExecContext(t.ctx, q, args...); err != nil {
		return &dbError{err}
	}
	return nil
}

func (t *txn) query(q string, args []any, row func(scan func(...any) error) error) error {
	rows, err := t.s.wc.QueryContext(t.ctx, q, args...)
	if err != nil {
		return &dbError{err}
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return &dbError{err}
		}
	}
	if err := rows.Err(); err != nil {
		return &dbError{err}
	}
	return nil
}

// names returns the first column of q's rows, a name each.
func (t *txn) names(q string, args ...any) ([]string, error) {
	var out []string
	err := t.query(q, args, func(scan func(...any) error) error {
		var n string
		if err := scan(&n); err != nil {
			return err
		}
		out = append(out, n)
		return nil
	})
	return out, err
}

func (t *txn) queryRow(q string, args []any, dest ...any) (bool, error) {
	if t.read && !strings.HasPrefix(q, "SELECT") {
		return false, errNeedWrite
	}
	err := t.s.wc.QueryRowContext(t.ctx, q, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, &dbError{err}
	}
	return true, nil
}

// next returns the next value of a counter ("token", "seq").
func (t *txn) next(name string) (int64, error) {
	if t.counter == nil {
		t.counter = map[string]*counter{}
	}
	c := t.counter[name]
	if c == nil {
		c = &counter{}
		if _, err := t.queryRow("SELECT value FROM counters WHERE name = ?", []any{name}, &c.v); err != nil {
			return 0, err
		}
		t.counter[name] = c
	}
	c.v++
	c.dirty = true
	return c.v, nil
}

func (t *txn) flush() error {
	if err := t.flushStats(); err != nil {
		return err
	}
	for name, c := range t.counter {
		if c.dirty {
			if err := t.exec("UPDATE counters SET value = ? WHERE name = ?", c.v, name); err != nil {
				return err
			}
			c.dirty = false
		}
	}
	return nil
}

// emit queues an event for delivery after the commit. Events that record
// a change get the next sequence number.
func (t *txn) emit(to store.Emitter, e store.Event) error {
	if to == nil {
		return nil
	}
	e.Time = fromMicros(t.now)
	if e.Type != store.EventRefused && e.Type != store.EventLost {
		seq, err := t.next("seq")
		if err != nil {
			return err
		}
		e.Seq = uint64(seq)
	}
	t.evs = append(t.evs, pending{to, e})
	return nil
}

// slotsOf returns the slots of name's definition (the name itself, else
// its most specific family), or store.NotFound.
func (t *txn) slotsOf(name string) (int, error) {
	_, slots, err := t.defOf(name)
	return slots, err
}

// defOf returns name's definition (the name itself, else its most
// specific family) and its slots, or store.NotFound.
func (t *txn) defOf(name string) (string, int, error) {
	pats := []string{name}
	store.FamilyOf(name, func(p string) bool { pats = append(pats, p); return true })
	best, slots := len(pats), 0
	err := t.query("SELECT name, slots FROM defs WHERE name IN (SELECT value FROM json_each(?))", []any{jsonList(pats)},
		func(scan func(...any) error) error {
			var n string
			var sl int
			if err := scan(&n, &sl); err != nil {
				return err
			}
			if i := slices.Index(pats, n); i >= 0 && i < best {
				best, slots = i, sl
			}
			return nil
		})
	if err != nil {
		return "", 0, err
	}
	if best == len(pats) {
		return "", 0, store.NotFound(name)
	}
	return pats[best], slots, nil
}

// load reads a lock: its slots, holders and live waiters. Holders and
// waiters whose process is gone are deleted on the way (an expired event
// to ev for each holder), and so are waiters whose own lease ran out.
func (t *txn) load(name string, ev store.Emitter) (*lk, error) {
	if l := t.locks[name]; l != nil {
		return l, nil
	}
	def, slots, err := t.defOf(name)
	if err != nil {
		return nil, err
	}
	l := &lk{name: name, def: def, slots: slots}
	err = t.query(`SELECT ref, kind, token, count, weight, acquired, renewed, expires, ttl, hold, pid, pstart, host, pgrp
		FROM holders WHERE lock = ? ORDER BY token`, []any{name}, func(scan func(...any) error) error {
		var h hrow
		if err := scan(&h.ref, &h.kind, &h.token, &h.count, &h.weight, &h.acquired, &h.renewed, &h.expires, &h.ttl, &h.hold,
			&h.pid, &h.pstart, &h.host, &h.pgrp); err != nil {
			return err
		}
		l.holders = append(l.holders, h)
		return nil
	})
	if err != nil {
		return nil, err
	}
	type qrow struct {
		ticket, alive, pstart int64
		pid, weight           int
		host                  sql.NullString
	}
	var qs []qrow
	err = t.query(`SELECT q.ticket, q.weight, coalesce(w.alive, 0), coalesce(w.pid, 0), coalesce(w.pstart, 0), w.host
		FROM queue q LEFT JOIN waiters w ON w.ticket = q.ticket WHERE q.lock = ? ORDER BY q.ticket`, []any{name},
		func(scan func(...any) error) error {
			var q qrow
			if err := scan(&q.ticket, &q.weight, &q.alive, &q.pid, &q.pstart, &q.host); err != nil {
				return err
			}
			qs = append(qs, q)
			return nil
		})
	if err != nil {
		return nil, err
	}
	if t.locks == nil {
		t.locks = map[string]*lk{}
	}
	t.locks[name] = l
	for i := 0; i < len(l.holders); {
		h := &l.holders[i]
		if gone(t.s.me, h.pid, h.pstart, h.host) && !groupLives(t.s.me, h.pgrp, h.host) {
			if err := t.drop(l, i, ev, store.EventExpired, lostBecause("its process ended")); err != nil {
				return nil, err
			}
			continue
		}
		i++
	}
	wttl := t.s.cfg.waiterTTL.Microseconds()
	for _, q := range qs {
		if !q.host.Valid || q.alive+wttl <= t.now || gone(t.s.me, q.pid, q.pstart, q.host.String) {
			if err := t.dropWaiter(q.ticket); err != nil {
				return nil, err
			}
			continue
		}
		l.queue = append(l.queue, q.ticket)
		if q.weight != 1 {
			if l.asked == nil {
				l.asked = map[int64]int{}
			}
			l.asked[q.ticket] = q.weight
		}
	}
	return l, nil
}

// drop deletes holder i of l and emits typ (released or expired); the
// hold's watchers learn reason.
func (t *txn) drop(l *lk, i int, ev store.Emitter, typ store.EventType, reason error) error {
	return t.dropTelling(l, i, ev, typ, reason, "")
}

// dropTelling drops holder i of l as drop does, and when why is not ""
// (the hold ended by another caller: endByRef, endStale, endDeleted)
// records the end in the table ended, for the holder's process.
func (t *txn) dropTelling(l *lk, i int, ev store.Emitter, typ store.EventType, reason error, why string) error {
	h := l.holders[i]
	t.ended(l, &h, typ, reason)
	t.ends = append(t.ends, ending{l.name, h.ref, h.token, reason})
	if err := t.exec("DELETE FROM holders WHERE lock = ? AND ref = ?", l.name, h.ref); err != nil {
		return err
	}
	if why != "" {
		if err := t.tell(l.name, h.ref, h.token, why); err != nil {
			return err
		}
	}
	l.holders = slices.Delete(l.holders, i, i+1)
	t.changed = true
	return t.emit(ev, store.Event{Type: typ, Lock: l.name, Slots: l.slots, Running: l.used(), Waiting: len(l.queue),
		Ref: h.ref, Kind: h.kind, Token: h.token, Weight: h.weight, Held: micros(t.now - h.acquired)})
}

// dropWaiter deletes a waiter and its places in every queue.
func (t *txn) dropWaiter(ticket int64) error {
	if err := t.exec("DELETE FROM queue WHERE ticket = ?", ticket); err != nil {
		return err
	}
	if err := t.exec("DELETE FROM waiters WHERE ticket = ?", ticket); err != nil {
		return err
	}
	for _, l := range t.locks {
		if i := slices.Index(l.queue, ticket); i >= 0 {
			l.queue = slices.Delete(l.queue, i, i+1)
			delete(l.asked, ticket)
		}
	}
	t.changed = true
	return nil
}

// each loads the locks of h in order and calls f with each, the index of
// the holder of h's ref (with the lock's token, when it has one) or -1,
// and the lock of h; it stops at the first error.
func (t *txn) each(h *store.Handle, ev store.Emitter, f func(l *lk, i int, x store.Lock) error) error {
	ref := h.Ref.String()
	var err error
	h.Each(func(x store.Lock) {
		if err != nil {
			return
		}
		var l *lk
		if l, err = t.load(x.Name, ev); err == nil {
			err = f(l, l.find(ref, x.Token), x)
		}
	})
	return err
}

// first checks that a definition covers every lock of h, loads h's first
// lock and returns it with the index of h's holder of it (-1: none).
func (t *txn) first(h *store.Handle, ev store.Emitter) (*lk, int, error) {
	if err := t.checkNames(h); err != nil {
		return nil, -1, err
	}
	l, err := t.load(h.Name, ev)
	if err != nil {
		return nil, -1, err
	}
	return l, l.find(h.Ref.String(), h.Token), nil
}

// find returns the index of ref's holder record of l (with token, unless
// token is 0), or -1.
func (l *lk) find(ref string, token int64) int {
	for i := range l.holders {
		if h := &l.holders[i]; h.ref == ref && (token == 0 || h.token == token) {
			return i
		}
	}
	return -1
}

// live reports whether h has not expired.
func (t *txn) live(h *hrow) bool { return h.expires == 0 || h.expires > t.now }

// free returns the free slots of l, first taking over expired (or, with
// staleAfter, stale) leases when need slots are wanted and fewer are free.
func (t *txn) free(l *lk, need int, staleAfter time.Duration, ev store.Emitter) (int, error) {
	free := l.slots - l.used()
	if free >= need {
		return free, nil
	}
	for i := 0; i < len(l.holders); {
		if t.takeable(&l.holders[i], staleAfter) {
			if err := t.drop(l, i, ev, store.EventExpired, lostBecause("taken over after its TTL")); err != nil {
				return 0, err
			}
			continue
		}
		i++
	}
	return l.slots - l.used(), nil
}

// takeable reports whether h may be taken over: past its expiry, or with
// staleAfter, not renewed for staleAfter. A lease with no TTL never is.
func (t *txn) takeable(h *hrow, staleAfter time.Duration) bool {
	if h.expires == 0 {
		return false
	}
	if staleAfter > 0 {
		return h.renewed+staleAfter.Microseconds() <= t.now
	}
	return h.expires <= t.now
}

// wakeAt returns when the first holder of l becomes takeable (0: never).
func (t *txn) wakeAt(l *lk, staleAfter time.Duration) int64 {
	var at int64
	for i := range l.holders {
		h := &l.holders[i]
		if h.expires == 0 {
			continue
		}
		x := h.expires
		if staleAfter > 0 {
			x = h.renewed + staleAfter.Microseconds()
		}
		if at == 0 || x < at {
			at = x
		}
	}
	return at
}

// leaseTimes returns the expiry and renewal time of a lease of ttl and
// hold taken or kept now.
func (t *txn) leaseTimes(ttl, hold time.Duration, acquired int64) (expires, renewed int64) {
	if ttl <= 0 {
		return 0, acquired
	}
	length := ttl
	if hold > 0 && hold < ttl {
		length = hold
	}
	return t.now + length.Microseconds(), t.now - (ttl - length).Microseconds()
}

// addHolder records a hold of weight slots of l for req.
func (t *txn) addHolder(l *lk, req *store.AcquireRequest, weight int) (*hrow, error) {
	token, err := t.next("token")
	if err != nil {
		return nil, err
	}
	h := hrow{ref: req.Ref.String(), kind: req.Kind, token: token, count: 1, weight: weight, acquired: t.now,
		ttl: req.TTL.Microseconds(), hold: req.Hold.Microseconds(), pid: t.s.me.pid, pstart: t.s.me.start, host: t.s.me.host}
	if g := t.s.cfg.group; g != nil {
		h.pgrp = max(g(), 0)
	}
	h.expires, h.renewed = t.leaseTimes(req.TTL, req.Hold, t.now)
	if err := t.exec(`INSERT INTO holders (lock, ref, kind, token, count, weight, acquired, renewed, expires, ttl, hold, pid, pstart, host, pgrp)
		VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, l.name, h.ref, h.kind, h.token, h.weight, h.acquired, h.renewed, h.expires,
		h.ttl, h.hold, h.pid, h.pstart, h.host, h.pgrp); err != nil {
		return nil, err
	}
	l.holders = append(l.holders, h)
	t.changed = true
	return &l.holders[len(l.holders)-1], nil
}

// renew dates h as kept now with ttl and hold.
func (t *txn) renew(l *lk, h *hrow, ttl, hold time.Duration) error {
	h.expires, h.renewed = t.leaseTimes(ttl, hold, h.acquired)
	h.ttl, h.hold = ttl.Microseconds(), hold.Microseconds()
	return t.exec("UPDATE holders SET expires = ?, renewed = ?, ttl = ?, hold = ? WHERE lock = ? AND ref = ?",
		h.expires, h.renewed, h.ttl, h.hold, l.name, h.ref)
}

// grantAll gives req a slot of every lock (its existing hold where it has
// one). since is when it queued (0: it did not).
func (t *txn) grantAll(req *store.AcquireRequest, locks []*lk, since int64) (store.Grant, error) {
	g := store.Grant{Ref: req.Ref, Kind: req.Kind, TTL: req.TTL, Hold: req.Hold, Reentered: true}
	ref := req.Ref.String()
	for n, l := range locks {
		var h *hrow
		if i := l.find(ref, 0); i >= 0 {
			h = &l.holders[i]
			if req.Counted {
				h.count++
				if err := t.exec("UPDATE holders SET count = count + 1 WHERE lock = ? AND ref = ?", l.name, ref); err != nil {
					return g, err
				}
			}
			if req.TTL > 0 {
				if err := t.renew(l, h, req.TTL, req.Hold); err != nil {
					return g, err
				}
			}
			if len(locks) == 1 {
				g.Kind, g.TTL, g.Hold = h.kind, micros(h.ttl), micros(h.hold)
			}
		} else {
			g.Reentered = false
			var err error
			if h, err = t.addHolder(l, req, store.Need(req.WeightOf(n), l.slots)); err != nil {
				return g, err
			}
			t.granted(l, since)
			var waited time.Duration
			if since > 0 {
				waited = micros(t.now - since)
			}
			if err := t.emit(req.Events, store.Event{Type: store.EventAcquired, Lock: l.name, Slots: l.slots,
				Running: l.used(), Waiting: len(l.queue), Ref: ref, Kind: req.Kind, Token: h.token, Weight: h.weight, Waited: waited}); err != nil {
				return g, err
			}
		}
		lock := store.Lock{Name: l.name, Token: h.token}
		exp := fromMicros(h.expires)
		if n == 0 {
			g.Lock, g.Acquired, g.Expires, g.Weight = lock, fromMicros(h.acquired), exp, h.weight
		} else {
			g.More = append(g.More, lock)
			if !exp.IsZero() && (g.Expires.IsZero() || exp.Before(g.Expires)) {
				g.Expires = exp
			}
		}
	}
	return g, nil
}

// refuse returns the refusal of a request of weight for l and emits it.
func (t *txn) refuse(l *lk, weight int, ev store.Emitter) error {
	e := store.Busy(l.name, weight, l.slots, l.used())
	if l.used() < l.slots && len(l.queue) > 0 {
		e.Queued = true
	} else if len(l.holders) > 0 {
		h := &l.holders[0]
		for i := range l.holders {
			if t.live(&l.holders[i]) {
				h = &l.holders[i]
				break
			}
		}
		e.Kind, e.Ref, e.Expires = h.kind, h.ref, fromMicros(h.expires)
	}
	t.stat(l).refusals++
	if err := t.emit(ev, store.Event{Type: store.EventRefused, Lock: l.name, Slots: l.slots, Running: l.used(),
		Waiting: len(l.queue), Holder: e.Kind, Weight: weight}); err != nil {
		return err
	}
	return e
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// jsonList encodes names as a JSON array of strings.
func jsonList(names []string) string {
	b, _ := json.Marshal(names)
	return string(b)
}
