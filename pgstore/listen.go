package pgstore

import (
	"context"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/sleeplock/sleeplock/internal/announce"
)

// channelOf is the NOTIFY channel of a schema: a hash, since a channel name
// is an identifier of at most 63 bytes.
func channelOf(schema string) string {
	h := fnv.New64a()
	h.Write([]byte(schema))
	return "sleeplock_" + strconv.FormatUint(h.Sum64(), 16)
}

// waiter is one waiting Acquire of this store.
type waiter struct {
	op     int64
	ticket int64          // 0 until queued
	names  []string       // the locks it waits for
	slots  map[string]int // their slots, as last read
	wake   chan struct{}  // a check is due (capacity 1)
	up     chan struct{}  // it may have become a head of this node's queue (capacity 1)
	handed chan handoff   // a release granted it (capacity 1)
}

// took is a grant a waiter of this store took: the next heartbeat tells
// the database (a grant a release made for a node's waiter is the node's
// until then).
type took struct{ lock, ref string }

// handoff is a grant a release made on a waiter's behalf, as its
// notification "g <op> <ticket> <token> <at> <expires> <seq> <slots>
// <running> <waiting> <waited>" carries it (times in µs).
type handoff struct {
	op, ticket, token, at, expires, seq, slots, running, waiting, waited int64
}

// parseHandoff reads the payload of a handoff notification.
func parseHandoff(payload string) (handoff, bool) {
	f := strings.Fields(payload)
	if len(f) != 11 || f[0] != "g" {
		return handoff{}, false
	}
	var v [10]int64
	for i := range v {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return handoff{}, false
		}
		v[i] = n
	}
	return handoff{op: v[0], ticket: v[1], token: v[2], at: v[3], expires: v[4], seq: v[5], slots: v[6],
		running: v[7], waiting: v[8], waited: v[9]}, true
}

// dispatcher keeps this store's waiters per lock in ticket order, wakes
// them when a notification says their lock may have a slot for them (only
// as many as it has free slots, the first in ticket order), renews their
// waiter leases (one statement per store, not per waiter) and, in one store
// of the schema, sweeps what dead nodes left behind. Its goroutines start
// with the first waiter and stop at Close.
type dispatcher struct {
	s         *Store
	node      int64 // this store's row in the nodes table
	mu        sync.Mutex
	byLock    map[string][]*waiter // local waiters of each lock, in ticket order
	all       map[int64]*waiter    // by op
	started   bool
	waited    bool // a waiting acquisition began: its first statement may have made the node's row
	closing   bool
	inflight  map[string][]chan struct{} // releases of this store with events, per lock, until emitted
	took      []took                     // grants its waiters took since the last heartbeat
	undos     []int64                    // abandoned acquisitions whose undo failed
	pending   map[int64]int              // acquisitions whose first statement may queue them as this node's
	resync    atomic.Bool                // compare the node's waiters in the database with this store's
	early     [earlyHandoffs]handoff     // the last handoffs for waiters this store did not know (yet)
	nearly    int                        // handoffs written to early
	listening atomic.Bool                // notifications arrive: waiters need not poll fast
	listener  bool                       // the listener runs (d.mu)
	beats     atomic.Bool                // the heartbeat runs: the node's row is kept
	watching  atomic.Bool                // a hold is watched: the listener runs (see watch)
	ctx       context.Context            // of the background work, ended by close
	born      time.Time                  // when the store began, for wrote
	wrote     atomic.Int64               // when (since born) the beat that last wrote the node's row was sent; 0: never
	stale     atomic.Bool                // the last beat found a node that stopped renewing
	sweeper   atomic.Bool                // at the last beat, no live node had a lower id: this one sweeps
	done      chan struct{}
	cancel    context.CancelFunc
	bg        sync.WaitGroup // listener and heartbeat
	active    sync.WaitGroup // waiting Acquire calls
	ann       announce.Set   // listeners of announcements (Store.Listen)
}

func (d *dispatcher) init(s *Store) {
	d.s = s
	d.born = time.Now()
	d.node = rand.Int64N(1<<62) + 1
	d.byLock = make(map[string][]*waiter)
	d.all = make(map[int64]*waiter)
	d.pending = make(map[int64]int)
	d.done = make(chan struct{})
	d.ctx, d.cancel = context.WithCancel(context.Background())
}

// pend records that acquisition op is sending a statement that may queue
// it as this node's waiter, before it has joined (see resyncWaiters); the
// function returned forgets it.
func (d *dispatcher) pend(op int64) func() {
	d.mu.Lock()
	d.pending[op]++
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		if d.pending[op]--; d.pending[op] <= 0 {
			delete(d.pending, op)
		}
		d.mu.Unlock()
	}
}

// enter counts a waiting acquisition in from its first statement on, so
// that Close waits for it (its waiter, its undo) before it closes the
// pool; the caller calls d.active.Done when it ends. It returns false when
// the store is closing.
func (d *dispatcher) enter() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return false
	}
	d.waited = true
	d.active.Add(1)
	return true
}

// join registers w, starting the background work on the first waiter. It
// returns false when the store is closing.
func (d *dispatcher) join(w *waiter) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return false
	}
	d.active.Add(1)
	d.all[w.op] = w
	d.start()
	return true
}

// start starts the background work (d.mu held), once.
func (d *dispatcher) start() {
	if d.started {
		return
	}
	d.started = true
	d.beats.Store(true)
	d.bg.Add(1)
	go d.heartbeat(d.ctx)
	d.startListener()
}

// startListener starts the listener (d.mu held), once, when the store
// has a LISTEN connection to make.
func (d *dispatcher) startListener() {
	if d.listener || d.s.lcfg == nil {
		return
	}
	d.listener = true
	d.bg.Add(1)
	go d.listen(d.ctx)
}

// watch starts the listener, once, for a hold this store watches: a hold
// released, stale-released or deleted by another node is told on the
// schema's channel ("e …", see lost()). Only the listener: the node's row
// and heartbeat are for waiters, and a holder that never waits writes
// nothing more.
func (d *dispatcher) watch() {
	if d.s == nil || d.watching.Load() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return
	}
	d.watching.Store(true)
	d.startListener()
}

// startListening starts the background work for a listener of
// announcements; false when the store is closing.
func (d *dispatcher) startListening() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return false
	}
	d.start()
	return true
}

// earlyHandoffs is how many handoffs for unknown waiters a store keeps: a
// release may hand a waiter its slot, and its notification arrive, before
// the waiter's node has read the answer of the statement that queued it.
// Handoffs for other nodes' waiters pass through it too; a waiter that
// misses its handoff still finds it at its next check.
const earlyHandoffs = 64

// queued records w's ticket (a new one when it queued again) and the slots
// of its locks, and hands it a handoff that came before.
func (d *dispatcher) queued(w *waiter, ticket int64, slots map[string]int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.unlist(w)
	w.ticket = ticket
	w.slots = slots
	for i := range d.early {
		if h := d.early[i]; h.op == w.op && h.ticket == ticket {
			d.early[i] = handoff{}
			select {
			case w.handed <- h:
			default:
			}
		}
	}
	for _, n := range w.names {
		ws := d.byLock[n]
		i, _ := slices.BinarySearchFunc(ws, ticket, func(x *waiter, t int64) int { return compareInt(x.ticket, t) })
		d.byLock[n] = slices.Insert(ws, i, w)
	}
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// setSlots updates the slots w read for lock n; when they grew, the
// waiters that became heads are woken.
func (d *dispatcher) setSlots(w *waiter, n string, slots int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w.slots == nil || w.slots[n] == slots || slots <= 0 {
		return
	}
	grew := slots > w.slots[n]
	for _, x := range d.byLock[n] {
		if x.slots != nil {
			x.slots[n] = slots
		}
	}
	if grew {
		d.wakeFirst(n, slots)
	}
}

// unlist removes w from the per-lock lists (d.mu held) and wakes the
// waiters that became heads.
func (d *dispatcher) unlist(w *waiter) {
	if w.ticket == 0 {
		return
	}
	for _, n := range w.names {
		ws := d.byLock[n]
		if i := slices.Index(ws, w); i >= 0 {
			ws = slices.Delete(ws, i, i+1)
			if len(ws) == 0 {
				delete(d.byLock, n)
			} else {
				d.byLock[n] = ws
				if slots := w.slots[n]; i < slots && slots-1 < len(ws) {
					signal(ws[slots-1].up)
				}
			}
		}
	}
	w.ticket = 0
}

// leave removes w for good.
func (d *dispatcher) leave(w *waiter) {
	d.mu.Lock()
	d.unlist(w)
	delete(d.all, w.op)
	d.mu.Unlock()
	d.active.Done()
}

// head reports whether w could be granted as far as this store knows: for
// each of its locks, fewer of this store's waiters are ahead of it than the
// lock has slots. A waiter that is not a head waits to be woken instead of
// polling: the waiters ahead of it leave first, and wake it as they do.
func (d *dispatcher) head(w *waiter) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w.ticket == 0 {
		return true
	}
	for _, n := range w.names {
		i := slices.Index(d.byLock[n], w)
		if s := w.slots[n]; s > 0 && i >= s {
			return false
		}
	}
	return true
}

func wakeOne(w *waiter) { signal(w.wake) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// wakeFirst wakes the first free waiters of lock n (d.mu held).
func (d *dispatcher) wakeFirst(n string, free int) {
	ws := d.byLock[n]
	for i := 0; i < len(ws) && i < free; i++ {
		wakeOne(ws[i])
	}
}

// releasing registers a release of lock name whose event is still to be
// emitted; the returned function, called once it is, ends it.
func (d *dispatcher) releasing(name string) func() {
	ch := make(chan struct{})
	d.mu.Lock()
	if d.inflight == nil {
		d.inflight = make(map[string][]chan struct{})
	}
	d.inflight[name] = append(d.inflight[name], ch)
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		cs := d.inflight[name]
		if i := slices.Index(cs, ch); i >= 0 {
			cs = slices.Delete(cs, i, i+1)
		}
		if len(cs) == 0 {
			delete(d.inflight, name)
		} else {
			d.inflight[name] = cs
		}
		d.mu.Unlock()
		close(ch)
	}
}

// releases returns the releases of lock name in flight now: a waiter handed
// its grant by one of them waits until they have emitted their events, so
// this store's events keep the store's order (released, then acquired).
func (d *dispatcher) releases(name string) []chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.inflight[name])
}

// afterReleases waits until the releases of lock name that this store has
// in flight now have emitted their events (or ctx ends).
func (d *dispatcher) afterReleases(ctx context.Context, name string) {
	for _, c := range d.releases(name) {
		select {
		case <-c:
		case <-ctx.Done():
			return
		}
	}
}

// notified handles a payload "<free>:<lock>" (wake that many waiters of
// the lock) or a handoff ("g …": give the grant to its waiter); unknown
// locks and waiters are ignored.
func (d *dispatcher) notified(payload string) {
	if d.announced(payload) {
		return
	}
	if rest, ok := strings.CutPrefix(payload, "e\t"); ok {
		d.lost(rest)
		return
	}
	if strings.HasPrefix(payload, "g ") {
		h, ok := parseHandoff(payload)
		if !ok {
			return
		}
		d.mu.Lock()
		if w := d.all[h.op]; w != nil && w.ticket == h.ticket {
			select {
			case w.handed <- h:
			default:
			}
		} else if w == nil || w.ticket == 0 {
			d.early[d.nearly%earlyHandoffs] = h
			d.nearly++
		}
		d.mu.Unlock()
		return
	}
	num, name, ok := strings.Cut(payload, ":")
	free, err := strconv.Atoi(num)
	if !ok || err != nil || free < 1 {
		free = 1
	}
	d.mu.Lock()
	d.wakeFirst(name, free)
	d.mu.Unlock()
}

// wakeAll makes every waiter check (the listener came or went).
func (d *dispatcher) wakeAll() {
	d.mu.Lock()
	for _, w := range d.all {
		wakeOne(w)
	}
	d.mu.Unlock()
}

// fresh reports whether the node's row, last written by a beat sent at
// wrote, still has more than 40 % of its lease at now (both since born):
// the beat leaves it until then, so the row is written every 60 % of the
// waiter TTL (the beats come every fifth of it), and 40 % is the margin of
// a beat that is late. (node_beat() writes a row with less than 60 % of
// its lease left, so it writes when the beat sends it.) Measured from when
// that beat was sent, the row's age is overestimated, never under.
func (d *dispatcher) fresh(now time.Duration) bool {
	w := d.wrote.Load()
	return w > 0 && now-time.Duration(w) < d.s.cfg.waiterTTL*6/10
}

// wakeHeads makes the heads of this store's queue check.
func (d *dispatcher) wakeHeads() {
	d.mu.Lock()
	var heads []*waiter
	for _, w := range d.all {
		heads = append(heads, w)
	}
	d.mu.Unlock()
	for _, w := range heads {
		if d.head(w) {
			wakeOne(w)
		}
	}
}

// several returns the acquisitions of the queued waiters of several locks
// (which keep a waiter lease of their own).
func (d *dispatcher) several() []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []int64
	for op, w := range d.all {
		if w.ticket != 0 && len(w.names) > 1 {
			out = append(out, op)
		}
	}
	return out
}

// undoLater keeps an abandoned acquisition whose undo failed: its waiter
// row, if it was queued, lives as long as this store's node, so the
// heartbeat gives up its place until that is done (drop_waiter, migration
// 005; a slot it may have been granted is left to its TTL, as its caller
// was told: its ref may hold that slot again by then).
func (d *dispatcher) undoLater(op int64) {
	d.mu.Lock()
	if len(d.undos) < maxTook {
		d.undos = append(d.undos, op)
	}
	d.mu.Unlock()
}

// undosPerBeat bounds the places a heartbeat gives up, so that a backlog
// never delays the next renewal of the node.
const undosPerBeat = 16

// retryUndos gives up, through the pool and after the node's renewal, the
// places of up to undosPerBeat acquisitions undoLater kept, within a
// sixteenth of the waiter TTL; those not done are kept.
func (d *dispatcher) retryUndos(ctx context.Context) {
	d.mu.Lock()
	n := min(len(d.undos), undosPerBeat)
	us := slices.Clone(d.undos[:n])
	d.undos = d.undos[n:]
	d.mu.Unlock()
	if len(us) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, d.s.cfg.waiterTTL/16)
	defer cancel()
	var failed []int64
	for _, op := range us {
		var n int64
		if err := queryOne(ctx, d.s.c, d.s.q.dropWaiter, []any{op}, &n); err != nil {
			failed = append(failed, op)
		}
	}
	if len(failed) > 0 {
		d.mu.Lock()
		d.undos = append(failed, d.undos...)
		d.mu.Unlock()
	}
}

// close ends the waiting calls (they leave the queue) and stops the
// background work.
func (d *dispatcher) close() {
	d.mu.Lock()
	d.closing = true
	close(d.done)
	started, waited := d.started, d.waited
	d.mu.Unlock()
	d.active.Wait()
	if d.cancel != nil {
		d.cancel()
	}
	d.bg.Wait()
	if !started && !waited {
		return
	}
	// The grants its waiters took stop being the node's; then the node's
	// row goes (its waiters have left). A waiter whose first statement
	// queued it made the row even when its call ended before it joined
	// (its context ended as the answer came): no heartbeat started, the
	// row is deleted all the same.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if started {
		d.beat(ctx, d.s.c)
	}
	_ = d.s.c.exec(ctx, d.s.q.nodeDown, d.node)
	cancel()
}

// jitter returns d scaled by a random factor in [0.5, 1.5).
func jitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(rand.Int64N(int64(d)+1))
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// tookGrant records that a waiter of this store took a grant of lock from a
// waiting Acquire (see took).
func (d *dispatcher) tookGrant(lock, ref string) {
	d.mu.Lock()
	if len(d.took) >= maxTook {
		// The database has been out of reach for many beats: the oldest
		// grants stay their node's (they end with it, not with their TTL).
		d.took = d.took[1:]
	}
	d.took = append(d.took, took{lock, ref})
	d.mu.Unlock()
}

// maxTook bounds the grants a store keeps to confirm, and the undos it
// keeps to retry.
const maxTook = 4096

// beat renews, through c, the lease of this store's node (the waiter lease
// of its waiters of one lock) and those of its waiters of several locks,
// and confirms the grants its waiters took. It runs from the first waiter
// to Close, waiters or not, so the node's row never goes stale while the
// store lives.
func (d *dispatcher) beat(ctx context.Context, c conn) {
	defer d.retryUndos(ctx)
	several := d.several()
	sent := time.Since(d.born)
	d.mu.Lock()
	tk := d.took
	if len(tk) == 0 && len(several) == 0 && !d.resync.Load() && !d.stale.Load() && d.fresh(sent) {
		// Nothing to send: the node's row has more than 40 % of its
		// lease left (it was written less than 60 % of the waiter TTL
		// before: see fresh), there is nothing to confirm or renew, and
		// no node was stale at the last beat (while one is, every beat
		// runs, and wakes the heads).
		d.mu.Unlock()
		return
	}
	d.took = nil
	d.mu.Unlock()
	locks := make([]string, len(tk))
	refs := make([]string, len(tk))
	for i, t := range tk {
		locks[i], refs[i] = t.lock, t.ref
	}
	var n int64
	var stale, sweeper bool
	args := nodeBeatArgs{node: d.node, wttl: micros(d.s.cfg.waiterTTL), several: intArray(several),
		locks: textArray(locks), refs: textArray(refs)}
	// The statement runs to its end, bounded by the waiter TTL, even when
	// Close cancels ctx: the server would finish a statement whose client
	// gave up on it, and its write of the node's row could then come after
	// Close's delete of that row, which waits for the beats to return.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.s.cfg.waiterTTL)
	err := queryOne(bctx, c, d.s.q.nodeBeat, args.values(), &n, &stale, &sweeper)
	cancel()
	if err != nil {
		// (the database may have been restarted or failed over)
		d.resync.Store(true)
		if len(tk) > 0 {
			d.mu.Lock()
			d.took = append(tk, d.took...)
			d.mu.Unlock()
		}
		return
	}
	if n > 0 && len(tk) == 0 && len(several) == 0 {
		// Nothing else to write: the count is the node's row, written.
		d.wrote.Store(int64(sent))
	}
	d.stale.Store(stale)
	d.sweeper.Store(sweeper)
	if stale {
		// A node stopped renewing: its waiters ahead of this store's
		// heads are passed by the heads' next check, which nothing else
		// would wake (their leases end without a notification).
		d.wakeHeads()
	}
	if d.resync.Swap(false) {
		d.resyncWaiters(ctx, c)
	}
}

// resyncWaiters gives up the places the database keeps for this node's
// waiters of one lock that no call of this store waits for. They come
// back when a dequeue is lost: a waiter's grant, or its leaving, committed
// on a primary that then failed over to a standby it had not reached, or
// committed with synchronous_commit off before a crash. Such a place lives as long as the
// node, so at the head of a queue it would block the lock for good, even
// past an expired holder. It runs after a heartbeat that failed, when the
// listener connects (a crash or a failover ends the connections), and
// every resyncBeats beats.
func (d *dispatcher) resyncWaiters(ctx context.Context, c conn) {
	var ops []int64
	if err := queryOne(ctx, c, d.s.q.nodeWaiters, []any{d.node}, &ops); err != nil {
		d.resync.Store(true)
		return
	}
	d.mu.Lock()
	for _, op := range ops {
		if d.all[op] == nil && d.pending[op] == 0 && !slices.Contains(d.undos, op) && len(d.undos) < maxTook {
			d.undos = append(d.undos, op)
		}
	}
	d.mu.Unlock()
}

// Every sweepBeats beats (5 s at the default waiter TTL), the node that
// sweeps its schema sweeps it; every resyncBeats beats (a minute), each
// node compares its waiters in the database with its own (resyncWaiters).
const (
	beatsPerTTL = 5
	sweepBeats  = 25
	resyncBeats = 300
	// sweepRounds bounds the sweeps in a row while each finds a full
	// batch (sweepLimit rows) to delete.
	sweepRounds = 8
	sweepLimit  = 64
)

// heartbeat renews the waiter leases every fifth of the waiter TTL
// through the pool while the listener is down (the listener does it on its
// own connection, which a busy pool cannot hold up), sweeps every
// sweepBeats beats when this node is the schema's sweeper, and resyncs the
// node's waiters every resyncBeats beats.
//
// The sweeper is the live node of lowest id, as its last beat read: one
// node per schema sweeps, not every node (each sweep is a few statements
// of a few milliseconds, whatever it finds). When it dies or pauses, the
// next one sweeps once its row has expired, a waiter TTL later. The sweep
// is a clean-up, not what bounds how long a dead node's waiters block:
// their node's row does (its lease, read by every statement that judges
// the queue).
func (d *dispatcher) heartbeat(ctx context.Context) {
	defer d.bg.Done()
	every := d.s.cfg.waiterTTL / beatsPerTTL
	beats := 0
	for sleep(ctx, every) {
		if !d.listening.Load() {
			d.beat(ctx, d.s.c)
		}
		beats++
		if beats%sweepBeats == 0 && d.sweeper.Load() {
			d.sweep(ctx)
		}
		if beats%resyncBeats == 0 {
			d.resync.Store(true) // at the next beat, here or the listener's
		}
	}
}

// sweep runs sweep_nodes() and sweep() through the pool, again while either
// deleted a full batch (up to sweepRounds times).
func (d *dispatcher) sweep(ctx context.Context) {
	for range sweepRounds {
		var a, b int64
		if queryOne(ctx, d.s.c, d.s.q.sweepNodes, nil, &a) != nil ||
			queryOne(ctx, d.s.c, d.s.q.sweep, nil, &b) != nil ||
			(a < sweepLimit && b < sweepLimit) {
			return
		}
	}
}

// listen keeps one LISTEN connection, reconnecting with backoff, and
// renews the waiter leases on it between notifications. While it is down
// the waiters poll; when it comes back they all check once, so no wake-up
// sent meanwhile is missed.
func (d *dispatcher) listen(ctx context.Context) {
	defer d.bg.Done()
	cfg := d.s.lcfg.Copy()
	// A wait for notifications that times out must leave the connection
	// usable: a deadline, not a cancel request.
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	every := d.s.cfg.waiterTTL / beatsPerTTL
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			if _, err = c.Exec(ctx, d.s.q.listen); err == nil {
				d.listening.Store(true)
				d.resync.Store(true)
				backoff = 50 * time.Millisecond
				d.wakeAll()
				d.ann.SendAll("") // what was announced meanwhile is lost
				next := time.Now().Add(every)
				for {
					wctx, cancel := context.WithDeadline(ctx, next)
					n, werr := c.WaitForNotification(wctx)
					cancel()
					if werr == nil {
						d.notified(n.Payload)
						continue
					}
					if ctx.Err() != nil || !pgconn.Timeout(werr) || c.IsClosed() {
						break
					}
					if d.beats.Load() {
						d.beat(ctx, pgxConn{c})
					}
					next = time.Now().Add(every)
				}
				d.listening.Store(false)
				d.wakeAll()
			}
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = c.Close(cctx)
			cancel()
		}
		if !sleep(ctx, jitter(backoff)) {
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
