// Package store is the contract between package sleeplock and the places
// where lock state lives (memory, SQLite, PostgreSQL, Redis). Users of sleeplock do
// not need it unless they write a store; every store passes the conformance
// suite in package storetest.
//
// A store does all the work that must be atomic: definitions, grants with
// FIFO waiting, re-entrancy, release, renewal and takeover after expiry,
// judged on the store's own clock. Package sleeplock adds validation, refs,
// keep-alive, lost-lease signalling and event delivery on top.
//
// Inputs reaching a store have been validated by sleeplock (names, slots,
// TTLs, refs); a store still returns an error rather than panicking when
// given something it cannot handle.
package store

import (
	"context"
	"time"
)

// Store keeps named locks and their leases.
type Store interface {
	// Define creates a lock with the given slots, or a family of locks when
	// name ends in "/*". It reports created=false, changing nothing, when
	// the same definition exists already, and a *ConflictError when the
	// name exists with other slots. It emits EventCreated when it creates.
	Define(ctx context.Context, name string, slots int, ev Emitter) (created bool, err error)
	// Reconcile makes the store's definitions those of defs, all or
	// nothing, as one atomic change: it reads the definitions where it
	// writes (in one transaction, or a read and a script that writes only
	// if what was read did not change) and carries out the plan of
	// PlanReconcile. Every entry is defined as Define does (the same
	// definition again creates nothing; an entry given twice with other
	// slots is a *ConflictError); with opts.Resize an entry whose name is
	// defined with other slots is resized as Resize does (holders keep
	// their slots, waiters are granted what became free) instead of being
	// a *ConflictError; with opts.Prune every definition whose name is not
	// an entry is deleted as Delete does, with opts.Force as its force (a
	// lock in use is an *InUseError). When anything fails nothing changes
	// and no event is emitted. With no options it defines every entry.
	Reconcile(ctx context.Context, defs []Definition, opts ReconcileOptions, ev Emitter) (Reconciled, error)
	// Resize changes the slots of a defined lock or family (and of the
	// family's live members) without dropping holders; waiters are granted
	// slots that became free. ErrNotFound when nothing has that name.
	Resize(ctx context.Context, name string, slots int, ev Emitter) error
	// Acquire grants each lock in req, all or nothing, with the request's
	// weight of that lock's slots (see AcquireRequest.Weight), or refuses
	// with a *BusyError (req.Wait false), or waits in FIFO order until it
	// can grant or ctx ends (req.Wait true). A waiter blocks those behind
	// it until it is granted, whatever its weight: nobody is granted past
	// it. A weight larger than a lock's slots is refused at once with a
	// *WeightError, and so is a waiter left too heavy by a Resize. A ref
	// that holds a lock already is given its hold back at once
	// (re-entrancy), at the weight it holds, whatever the request's.
	Acquire(ctx context.Context, req AcquireRequest) (Grant, error)
	// Release frees h's slots that h's ref (and token, where h has one)
	// still holds, and grants them to waiters. ErrNotHeld when it freed
	// nothing; an error matching ErrNotHeld when it freed only some.
	//
	// Release, Keep, Held and ReleaseStale report NotFound (ErrNotFound),
	// changing nothing, when a name of h is covered by no definition: a
	// typo is never a silent "not held".
	Release(ctx context.Context, h Handle, ev Emitter) error
	// Keep renews h: each of its locks expires hold (or ttl when hold is
	// 0) from now on the store's clock, only while h's ref still holds
	// every lock of h; otherwise nothing changes and the error is
	// ErrNotHeld. ttl 0 means "never expires".
	Keep(ctx context.Context, h Handle, ttl, hold time.Duration) (expires time.Time, err error)
	// Held reports whether h's ref still holds every lock of h, with the
	// store's clock and the lease's times. A lease past its expiry that
	// nobody has taken over is still held: Held and Expired are both true
	// (see Status). Once another caller took it over it is not held.
	Held(ctx context.Context, h Handle) (Status, error)
	// ReleaseStale releases h's locks only while h's ref still holds the
	// first of them and that lease is stale: older than staleAfter (judged
	// from its last renewal, dated back for a hold shorter than its TTL) or,
	// when staleAfter is 0, past its expiry. It reports whether this call
	// released them; of concurrent callers at most one gets true.
	ReleaseStale(ctx context.Context, h Handle, staleAfter time.Duration, ev Emitter) (bool, error)
	// Delete removes the definition name, a lock or a family ("x/*"), with
	// the state of its locks (a family's members in use too): holders,
	// queue and counters; State, List and Stats no longer show them. A
	// lock in use (a holder, live or past its expiry, or a waiter; for a
	// family, of any member) is refused with an *InUseError that counts
	// them, changing nothing, unless force: then its holds end as
	// released by another (DeletedHold: watchers and renewals learn that
	// the lease was lost) and its waiters return an error matching
	// ErrNotFound (DeletedWhileWaiting). A name with no definition of its
	// own, a family member too, is ErrNotFound (NotDeletable), changing
	// nothing. A lock defined again after a Delete grants tokens above
	// every token it granted before. It emits EventDeleted for each lock
	// it deletes, after the released events of the holds it ended.
	Delete(ctx context.Context, name string, force bool, ev Emitter) (Deleted, error)
	// State reports a lock's slots, holders and waiters (holders and queue
	// only when detail is true). A family member that is not in use reports
	// the family's slots and nothing running.
	State(ctx context.Context, name string, detail bool) (State, error)
	// List reports the state of every defined lock and family, and of every
	// family member in use, sorted by name.
	List(ctx context.Context, detail bool) ([]State, error)
	// Close releases the store's resources. Leases are not released.
	// Callers waiting in Acquire return an error matching ErrClosed (and
	// nothing else), and a store whose queue is shared with other
	// processes removes this store's waiters from it before it returns.
	Close() error
}

// Watcher is implemented by stores that can tell a holder, without its
// next renewal, that its hold ended (released, taken over, released by
// someone else, deleted). All four stores do. The memory store sees every
// end. A database store sees the ends that its own process makes or
// finds, and those another process tells it of (PostgreSQL by
// LISTEN/NOTIFY, Redis by the script that ends the hold); a hold taken
// over elsewhere without a word is learnt at the next renewal.
type Watcher interface {
	// Watch calls f once, on its own goroutine or the caller's, when h's hold
	// ends, with ErrReleased (released by its holder) or an error matching
	// ErrLeaseLost. If the store has seen h's hold end already, f is called
	// before Watch returns (a database store remembers the last ends it
	// saw, not every one).
	Watch(h Handle, f func(reason error))
}

// Guarder is implemented by stores that can fence a write made in the
// caller's own transaction: PostgreSQL (a pgx.Tx or *sql.Tx), SQLite (a
// *sql.Tx on the same file) and Redis (a *redisstore.Tx). The memory
// store, which has no transactions, does not.
type Guarder interface {
	// Guard verifies, inside tx, that h is still held (past its expiry or
	// not, as long as nobody took it over) and keeps it from being taken
	// over or released until tx ends; on Redis, the writes of tx run in the
	// same script as the check. tx is the store's transaction type; any
	// other value is an error matching ErrUnsupported. A lost lease is an
	// error matching ErrLeaseLost.
	Guard(ctx context.Context, tx any, h Handle) error
}

// AcquireRequest asks for a slot of Name and, all or nothing, of each lock
// in More.
type AcquireRequest struct {
	Name string   // the first lock, in the caller's order
	More []string // further locks, in the caller's order (AcquireAll)
	Ref  Ref      // who asks; never zero
	Kind string   // what the holder is ("turn", "click"); may be ""
	// TTL is how long the lease lasts without renewal; 0 means never (a
	// store that cannot keep leases forever rejects 0).
	TTL time.Duration
	// Hold, when not 0 and shorter than TTL, is how long the lease blocks
	// others before it may be taken over: it is dated back by TTL-Hold.
	Hold time.Duration
	// StaleAfter, when not 0, is how old another holder's lease must be
	// for this request to take it over: not renewed for StaleAfter (its
	// Renewed time, dated back by TTL-Hold for a hold), on the store's
	// clock, whatever that lease's own expiry says (the turn locks'
	// "busy_since < now - ttl_s"). 0: a lease is taken over once past its
	// own expiry.
	StaleAfter time.Duration
	Wait       bool // wait in the queue when refused
	Counted    bool // a re-entrant acquire adds to the holder's count
	// ReenterAll allows re-entry only as a whole: when Ref holds some but
	// not all of the request's locks, the request is refused (whatever
	// Wait says) with a *BusyError naming, in the caller's order, the
	// first lock Ref holds, with that hold's kind and ref. When Ref holds
	// them all it re-enters; when it holds none it acquires as usual.
	ReenterAll bool
	// Weight is how many of a lock's slots the request takes, as one hold
	// (one token, one release): 0 or 1 take one, WeightAll every slot the
	// lock has when it is granted. Weights, when not nil, gives the weight
	// of each lock in Names' order instead (AcquireAll).
	Weight  int
	Weights []int
	Events  Emitter
}

// WeightAll is the weight of an exclusive hold: every slot of the lock, as
// many as it has when the hold is granted.
const WeightAll = -1

// WeightOf returns the weight asked of the i-th lock of Names: 1 for 0,
// WeightAll for an exclusive hold.
func (r *AcquireRequest) WeightOf(i int) int {
	if r == nil {
		return 1
	}
	w := r.Weight
	if r.Weights != nil && i >= 0 && i < len(r.Weights) {
		w = r.Weights[i]
	}
	if w == 0 {
		return 1
	}
	return w
}

// Weighted reports whether any lock of r is asked with a weight other
// than 1.
func (r *AcquireRequest) Weighted() bool {
	if r == nil {
		return false
	}
	if r.Weight != 0 && r.Weight != 1 {
		return true
	}
	for _, w := range r.Weights {
		if w != 0 && w != 1 {
			return true
		}
	}
	return false
}

// Need returns the slots a weight takes of a lock with slots slots:
// slots for WeightAll, 1 for 0, else weight.
func Need(weight, slots int) int {
	switch weight {
	case WeightAll:
		return slots
	case 0:
		return 1
	}
	return weight
}

// Definition is one lock (or family, a name ending in "/*") to define.
type Definition struct {
	Name  string
	Slots int
}

// ReconcileOptions say what Reconcile may change besides creating.
type ReconcileOptions struct {
	Resize bool // resize an entry defined with other slots
	Prune  bool // delete the definitions that are not entries
	Force  bool // prune definitions in use too, as a forced Delete
}

// Reconciled is what a Reconcile did, each list in the order of defs (the
// pruned definitions by name).
type Reconciled struct {
	Created []string // entries created
	Resized []string // entries resized
	Deleted []string // definitions pruned
	Holds   int      // holds the pruning ended (Force)
	Waiters int      // waiters the pruning ended (Force)
}

// Deleted is what a Delete did.
type Deleted struct {
	Holds   int // holds ended (force)
	Waiters int // waiters ended (force)
}

// Names returns the request's locks in the caller's order.
func (r *AcquireRequest) Names() []string {
	if r == nil {
		return nil
	}
	return append([]string{r.Name}, r.More...)
}

// Lock is one lock of a grant with its fencing token.
type Lock struct {
	Name  string
	Token int64 // grows with every grant of the lock; never reused
}

// Grant is a successful acquisition.
type Grant struct {
	Lock             // the first lock
	More      []Lock // the others of an all-or-nothing grant
	Ref       Ref
	Kind      string
	TTL, Hold time.Duration
	Acquired  time.Time // store's clock; zero when the store did not read its clock
	Expires   time.Time // store's clock; zero: never
	Reentered bool      // every lock was held by Ref already
	Weight    int       // the slots the hold of the first lock takes (1 unless weighted)
}

// Handle returns the handle that names g's hold.
func (g *Grant) Handle() Handle {
	if g == nil {
		return Handle{}
	}
	return Handle{Lock: g.Lock, More: g.More, Ref: g.Ref}
}

// Handle names a hold: locks and ref, and tokens where known (a token of 0
// matches any hold of the ref).
type Handle struct {
	Lock
	More []Lock
	Ref  Ref
}

// Each calls f for every lock of h in order.
func (h *Handle) Each(f func(Lock)) {
	if h == nil || f == nil {
		return
	}
	f(h.Lock)
	for _, l := range h.More {
		f(l)
	}
}

// Status is what Held reports.
type Status struct {
	// Held: the ref still holds every lock of the handle, whether or not a
	// lease of it is past its expiry.
	Held bool
	// Expired: held, but a lease of the handle is past its expiry and
	// nobody has taken it over yet. Any acquirer may take it over at once;
	// until then it names its holder, which may still renew (Keep),
	// guard a write (Guard) or release it.
	Expired bool
	Now     time.Time // the store's clock when it answered
	Renewed time.Time // when the first lock was taken or last kept, dated back by TTL-Hold
	Expires time.Time // zero: never
}

// State is a lock's state.
type State struct {
	Name    string
	Slots   int
	Family  bool // Name is a family pattern
	Running int  // slots of live holders (not past their expiry), each holder counted with its weight
	Expired int  // slots of holders past their expiry that nobody has taken over yet
	Leases  int  // holders, live and expired, each counted once whatever its weight
	Waiting int
	Holders []Holder // with detail, oldest first: live and expired ones (see Holder.Expires)
	Queue   []Waiter // with detail, in queue order
	Now     time.Time
}

// Holder is one holder of a lock.
type Holder struct {
	Ref      string
	Kind     string
	Token    int64
	Count    int       // re-entrant holds (1 unless counted)
	Weight   int       // the slots the hold takes (1 unless weighted)
	Acquired time.Time // zero when not recorded
	Renewed  time.Time // when taken or last kept, dated back by TTL-Hold for a hold (see AcquireRequest.Hold)
	Expires  time.Time // zero: never
	// Hold is the lease's hold (AcquireRequest.Hold): when shorter than
	// its TTL (Expires-Renewed), a grant or renewal lasts Hold, not the
	// TTL. 0: none.
	Hold time.Duration
}

// Length is how long a grant or renewal of h lasts: its Hold when it has
// one, else its TTL (Expires-Renewed). 0 for a lease that never expires.
func (h Holder) Length() time.Duration {
	if h.Expires.IsZero() || h.Renewed.IsZero() {
		return 0
	}
	ttl := h.Expires.Sub(h.Renewed)
	if h.Hold > 0 && h.Hold < ttl {
		return h.Hold
	}
	return ttl
}

// Kept returns when h was taken or last renewed, on the store's clock:
// Expires less Length (Renewed is dated back for a hold; Kept is not).
// Zero for a lease that never expires.
func (h Holder) Kept() time.Time {
	n := h.Length()
	if n <= 0 {
		return time.Time{}
	}
	return h.Expires.Add(-n)
}

// LateAfter is how long after its last renewal (Kept) a holder is late: a
// holder that lives renews every third of its Length (Lease's keep-alive),
// so it is late once half its Length has passed, a third plus a margin of
// half a third for a slow store or a paused process. A late holder missed
// a renewal it owed: most likely its process died or stopped, and the lock
// stays held until its expiry (Expires), which is not yet past.
func (h Holder) LateAfter() time.Duration { return h.Length() / 2 }

// Late reports whether h, at now on the store's clock, is late: it has an
// expiry and was last renewed more than LateAfter before now. A holder
// past its expiry is late too. A lease that never expires is never late.
func (h Holder) Late(now time.Time) bool {
	n := h.Length()
	return n > 0 && now.Sub(h.Expires.Add(-n)) > n/2
}

// Waiter is one caller in a lock's queue.
type Waiter struct {
	// Ref is the waiter's ref. A caller that gave none (the memory store's
	// plain Acquire) is listed under a generated ref of its wait: its
	// lease's ref, named by its fencing token, exists only once granted.
	Ref   string
	Kind  string
	Since time.Time // zero when not recorded
	Locks []string  // every lock it waits for (more than one for AcquireAll)
	// Weight is the slots it asks of this lock: 1 unless weighted,
	// WeightAll for an exclusive hold.
	Weight int
}

// Emitter receives the events of a store's changes. Emit must not block;
// package sleeplock's emitter queues. Events of one lock may reach Emit out
// of order when concurrent calls change the lock (a database store emits
// after its statement returns); their Seq orders them.
type Emitter interface {
	Emit(Event)
}

// EventType names an event.
type EventType uint8

// The events. The first four are ex_sleeplock's.
const (
	EventCreated  EventType = iota + 1 // a lock was defined
	EventAcquired                      // a slot was granted (not for a re-entrant acquire)
	EventReleased                      // a slot was released (not for a no-op release)
	EventWaiting                       // a caller joined the queue
	EventRefused                       // a try or no-wait acquisition was turned down
	EventExpired                       // a lease was taken over after its TTL
	EventLost                          // a holder learned it no longer holds its lease
	EventResized                       // a lock's slots changed
	EventDeleted                       // a lock (or family) was deleted
)

var eventNames = [...]string{"", "created", "acquired", "released", "waiting", "refused", "expired", "lost", "resized", "deleted"}

func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "unknown"
}

// Event is one change of a lock.
type Event struct {
	Type    EventType
	Lock    string // metadata: name
	Slots   int    // metadata: slots
	Running int    // state after the change: slots of every holder, expired ones not yet taken over too
	Waiting int    // state after the change
	Ref     string
	Kind    string
	Token   int64
	Weight  int           // acquired, released, waiting, refused, expired, lost: the slots asked or held (WeightAll: exclusive)
	Waited  time.Duration // acquired: time spent in the queue
	Held    time.Duration // released, expired, lost: time the slot was held
	Holder  string        // refused: the kind of what holds the lock
	Reason  error         // lost: why
	Time    time.Time     // the store's clock when it knew (zero when not read)
	// Seq orders the events of one lock: it grows strictly with every
	// change of the lock in the store (created, acquired, released,
	// waiting, expired, resized, deleted), across every process that shares the
	// store, so the events of a lock sorted by Seq replay its states
	// (Running, Waiting) in the store's order. 0 for events that change
	// nothing in the store (refused, lost).
	Seq uint64
}
