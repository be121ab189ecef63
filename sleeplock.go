package sleeplock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sleeplock/sleeplock/internal/plain"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/store"
)

// DefaultTTL is the lease TTL of acquisitions on the SQLite and PostgreSQL
// stores (any store but the memory store) when New is given no WithTTL: a
// holder whose process dies without releasing blocks others for at most
// that long. On the memory store a lease has no TTL unless one is given,
// since its holders die with the store.
const DefaultTTL = 30 * time.Second

// Locks is the entry point: named locks kept in a Store. It is safe for
// concurrent use.
type Locks struct {
	store   store.Store
	fast    plain.Store   // a memory store's plain path, when a call without options may take it
	watcher store.Watcher // non-nil when the store can tell at once of a lost hold
	ttl     time.Duration
	ev      *dispatcher   // nil without a notifier
	emitter store.Emitter // nil without notifiers
	inline  []*guarded    // WithInlineNotifier
	panics  atomic.Int64  // notifier calls that panicked: NotifierPanics
	err     error         // a bad Option, reported by every call

	mu   sync.Mutex
	live map[*life]struct{} // leases whose keep-alive runs
}

func (l *Locks) track(lf *life) {
	l.mu.Lock()
	if l.live == nil {
		l.live = make(map[*life]struct{})
	}
	l.live[lf] = struct{}{}
	l.mu.Unlock()
}

func (l *Locks) untrack(lf *life) {
	l.mu.Lock()
	delete(l.live, lf)
	l.mu.Unlock()
}

// Option configures Locks.
type Option func(*Locks)

// WithTTL sets the default lease TTL of acquisitions (TTL overrides it for
// one call). A lease with a TTL is kept alive while its holder lives (see
// Lease) and may be taken over once it expires. Without WithTTL the
// default differs by store: none on the memory store (a lease lasts until
// released), DefaultTTL (30 s) on the SQLite and PostgreSQL stores. d must
// be positive.
func WithTTL(d time.Duration) Option {
	return func(l *Locks) {
		if err := store.CheckTTL(d, 0, false); err != nil && l.err == nil {
			l.err = err
		}
		l.ttl = d
	}
}

// WithNotifier sends every event of these Locks to n, queued and delivered
// on a goroutine of sleeplock's, so a slow n never delays the lock path.
// Given more than once, it adds each notifier: every event goes to each of
// them, in the order the options were given, through one queue (so a slow
// one delays the others' later events, never the lock path). A nil n (or a
// nil pointer or func in it) is a bad option: leave WithNotifier out for
// none. A panic in n is recovered and counted (see Notifier); the other
// notifiers still get the event.
func WithNotifier(n Notifier) Option {
	return func(l *Locks) {
		if isNil(n) {
			l.setErr(store.Invalid(store.ErrInvalidConfig, "nil", "WithNotifier needs a Notifier (leave the option out for none)"))
			return
		}
		l.addNotifier(n)
	}
}

// WithInlineNotifier sends every event of these Locks to n on the lock
// path, as each change happens, with no queue: for notifiers that are
// cheap, never block and are safe for concurrent use, such as metric
// counters (package promevents). n runs on the caller's goroutine, on the
// memory store while the lock's state is held, so a slow n slows every
// caller of that lock, and n must not call the Locks. A panic in n is
// recovered (see Notifier): the change it reports stands. It may be given
// more than once, and together with WithNotifier.
func WithInlineNotifier(n Notifier) Option {
	return func(l *Locks) {
		if isNil(n) {
			l.setErr(store.Invalid(store.ErrInvalidConfig, "nil", "WithInlineNotifier needs a Notifier (leave the option out for none)"))
			return
		}
		l.inline = append(l.inline, l.guard(n))
		l.setEmitter()
	}
}

// setEmitter makes the emitter the stores are given from the notifiers.
func (l *Locks) setEmitter() {
	switch {
	case len(l.inline) == 0 && l.ev == nil:
		l.emitter = nil
	case len(l.inline) == 0:
		l.emitter = l.ev
	case len(l.inline) == 1 && l.ev == nil:
		l.emitter = inlineEmitter{l.inline[0]}
	default:
		l.emitter = &fanout{inline: l.inline, queued: l.ev}
	}
}

// New returns Locks kept in s, or in a new memory store when s is nil.
// Leases have no TTL on the memory store and DefaultTTL (30 s) on any other
// store, unless WithTTL (or TTL, for one call) says otherwise. A bad
// option (a TTL that is not positive, a nil option or notifier) makes every
// call return its error. Every method of a nil or zero Locks, and every call
// given a nil context, returns an error matching ErrInvalid.
func New(s store.Store, opts ...Option) *Locks {
	l := &Locks{store: s}
	if s == nil {
		l.store = memstore.New()
	}
	// The memory store's allocation-free path: memstore sets plain.Of in
	// its init (memstore/plain.go); any other store answers nil.
	mem := plain.Of(l.store)
	if mem == nil {
		l.ttl = DefaultTTL
	}
	l.watcher, _ = l.store.(store.Watcher)
	for _, o := range opts {
		if o == nil {
			l.setErr(errNilOption)
			continue
		}
		o(l)
	}
	if mem != nil && l.emitter == nil && l.ttl == 0 && l.err == nil {
		l.fast = mem
	}
	return l
}

// Store returns the store the locks are kept in.
func (l *Locks) Store() store.Store {
	if l == nil {
		return nil
	}
	return l.store
}

// Close closes the store, ends the keep-alives of the leases still held
// (they are lost: Done closes, their contexts are cancelled) and delivers
// the events still queued. Leases are not released: other processes take
// them over after their TTL. Callers waiting to acquire return ErrClosed.
func (l *Locks) Close() error {
	if l == nil || l.store == nil {
		return errNoLocks
	}
	err := l.store.Close()
	l.mu.Lock()
	live := make([]*life, 0, len(l.live))
	for lf := range l.live {
		live = append(live, lf)
	}
	l.mu.Unlock()
	for _, lf := range live {
		lf.lose(fmt.Errorf("%w: the Locks were closed", store.ErrLeaseLost))
		if lf.exited != nil {
			<-lf.exited
		}
	}
	if l.ev != nil {
		l.ev.flush()
	}
	return err
}

// Define creates the lock name with slots slots: up to slots holders at
// once. A name ending in "/*" defines a family: "chat/*" covers "chat/42",
// "chat/43", … each a lock of its own with those slots, created on first
// use. Defining the same lock again with the same slots does nothing; with
// other slots it is a *ConflictError (use Resize).
func (l *Locks) Define(ctx context.Context, name string, slots int) error {
	if err := l.usable(ctx); err != nil {
		return err
	}
	if err := store.CheckDefinition(name, slots); err != nil {
		return err
	}
	_, err := l.store.Define(ctx, name, slots, l.emitter)
	return err
}

// Resize changes the slots of a defined lock or family without dropping
// holders. With fewer slots than holders, new grants wait until enough
// holders have released.
func (l *Locks) Resize(ctx context.Context, name string, slots int) error {
	if err := l.usable(ctx); err != nil {
		return err
	}
	if err := store.CheckDefinition(name, slots); err != nil {
		return err
	}
	return l.store.Resize(ctx, name, slots, l.emitter)
}

// Applied is what an Apply changed: the entries it created and resized,
// the locks and families it pruned, and the holds and waiters that
// pruning ended (PruneInUse).
type Applied = store.Reconciled

// ApplyOption adjusts one Apply.
type ApplyOption func(*applyConfig)

type applyConfig struct{ opts store.ReconcileOptions }

// AllowResize makes Apply resize a lock or family that the config gives
// other slots than it has, as Resize does, in the same all-or-nothing step
// (without it that is a conflict).
func AllowResize() ApplyOption { return func(c *applyConfig) { c.opts.Resize = true } }

// Prune makes Apply delete every lock and family that the config does not
// name, as Delete does, in the same all-or-nothing step: one that is held
// or waited for is refused (*InUseError) and nothing changes.
func Prune() ApplyOption { return func(c *applyConfig) { c.opts.Prune = true } }

// PruneInUse is Prune that deletes locks in use too, as Delete with Force
// does: their holds are lost and their waiters return ErrNotFound.
func PruneInUse() ApplyOption {
	return func(c *applyConfig) { c.opts.Prune, c.opts.Force = true, true }
}

// Deleted is what a Delete did: the holds and waiters a forced Delete
// ended.
type Deleted = store.Deleted

// DeleteOption adjusts one Delete.
type DeleteOption func(*deleteConfig)

type deleteConfig struct{ force bool }

// Force makes a Delete of a lock in use go ahead: its holds end as
// released by another (their Done closes, their contexts end with
// ErrLeaseLost, as when a lease is taken over) and its waiters return an
// error matching ErrNotFound.
func Force() DeleteOption { return func(c *deleteConfig) { c.force = true } }

// Delete removes the lock or family name: its definition and its state,
// counters included (State, List and Stats no longer show it). Deleting a
// family ("chat/*") deletes its members in use too. A lock that is held
// or waited for (for a family, any member) is refused with an
// *InUseError that counts its holders and waiters (matching ErrInUse),
// changing nothing, unless Force is given. A name with no definition of
// its own, a member of a family too, is ErrNotFound: delete the family,
// or release the member. A lock defined again later (or a member used
// again) grants fencing tokens above every one it granted before: a
// Guard of a lease of the deleted lock never passes. Delete emits a
// deleted event for each lock it removes.
func (l *Locks) Delete(ctx context.Context, name string, opts ...DeleteOption) (Deleted, error) {
	if err := l.usable(ctx); err != nil {
		return Deleted{}, err
	}
	if err := store.CheckDefinition(name, 1); err != nil { // a lock or a family pattern
		return Deleted{}, err
	}
	var c deleteConfig
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return l.store.Delete(ctx, name, c.force, l.emitter)
}

// State is a lock's state: Slots, Running (live holders), Expired (holders
// past their expiry that nobody took over yet), Leases and Waiting; Holders
// and Queue only from StateDetail and List (State leaves them empty: index
// them only after checking their length).
type State = store.State

// Holder is a holder of a lock, as State reports it.
type Holder = store.Holder

// Waiter is a caller in a lock's queue, as State reports it.
type Waiter = store.Waiter

// State reports the slots of name and how many hold and wait (Slots,
// Running, Expired, Leases, Waiting): counts only, read cheaply. Its
// Holders and Queue are empty (nil); StateDetail gives them.
func (l *Locks) State(ctx context.Context, name string) (State, error) {
	return l.state(ctx, name, false)
}

// StateDetail reports what State does, plus Holders (ref, kind, token,
// weight, times) and Queue (ref, kind, weight, locks, since), oldest
// first. List gives the same for every lock.
func (l *Locks) StateDetail(ctx context.Context, name string) (State, error) {
	return l.state(ctx, name, true)
}

func (l *Locks) state(ctx context.Context, name string, detail bool) (State, error) {
	if err := l.usable(ctx); err != nil {
		return State{}, err
	}
	if err := store.CheckDefinition(name, 1); err != nil {
		return State{}, err
	}
	return l.store.State(ctx, name, detail)
}

// List reports the state of every defined lock and family and of every
// family member in use, sorted by name, with holders and queues.
func (l *Locks) List(ctx context.Context) ([]State, error) {
	if err := l.usable(ctx); err != nil {
		return nil, err
	}
	return l.store.List(ctx, true)
}

// Acquire takes a slot of name, waiting in FIFO order while all slots are
// taken, until ctx ends (then it returns ctx's error and takes nothing: a
// slot granted as ctx ended goes to the next waiter). A caller whose ref
// holds the lock already gets its lease back at once (see Ref).
func (l *Locks) Acquire(ctx context.Context, name string, opts ...AcquireOption) (Lease, error) {
	if len(opts) == 0 && l != nil && l.fast != nil && ctx != nil {
		return l.acquirePlain(ctx, name, true)
	}
	return l.acquire(ctx, name, nil, true, opts)
}

// acquirePlain is the memory store's fast path: an anonymous lease of one
// lock, with no options, no TTL and no notifier (the store checks a name
// it does not hold already).
func (l *Locks) acquirePlain(ctx context.Context, name string, wait bool) (Lease, error) {
	slot, token, err := l.fast.Acquire(ctx, name, wait)
	if err != nil {
		return l.plainFailed(ctx, name, wait, err)
	}
	return Lease{slot: slot, token: token}, nil
}

// plainFailed is the answer to a plain acquisition that failed with err:
// a lock that grants no plain lease (plain.ErrNotPlain) is acquired the
// general way.
func (l *Locks) plainFailed(ctx context.Context, name string, wait bool, err error) (Lease, error) {
	if err == plain.ErrNotPlain { //nolint:errorlint // the sentinel itself
		return l.acquire(ctx, name, nil, wait, []AcquireOption{}) // non-nil options: not the plain path again
	}
	return Lease{}, err
}

// TryAcquire takes a slot of name if one is free and nobody waits for it,
// without waiting; otherwise it returns a *BusyError (errors.Is(err,
// ErrUnavailable)). It never jumps the queue.
func (l *Locks) TryAcquire(ctx context.Context, name string, opts ...AcquireOption) (Lease, error) {
	if len(opts) == 0 && l != nil && l.fast != nil && ctx != nil {
		return l.acquirePlain(ctx, name, false)
	}
	return l.acquire(ctx, name, nil, false, opts)
}

// AcquireAll takes a slot of every lock in names, all or nothing, in one
// atomic step: it waits (in FIFO order on each lock) until it can take them
// all, or with NoWait refuses with a *BusyError naming the first lock, in
// names' order, that it could not take and what holds it. Locks the ref
// holds already count as taken. The lease releases them all. A store that
// keeps locks on several servers (store.Sharder: Redis Cluster) refuses
// locks of several of its shards with a *ShardError, taking nothing.
func (l *Locks) AcquireAll(ctx context.Context, names []string, opts ...AcquireOption) (Lease, error) {
	if len(names) == 0 {
		return Lease{}, store.CheckNames(names)
	}
	return l.acquire(ctx, names[0], names, true, opts)
}

func (l *Locks) acquire(ctx context.Context, name string, names []string, wait bool, opts []AcquireOption) (Lease, error) {
	if err := l.usable(ctx); err != nil {
		return Lease{}, err
	}
	if opts == nil && names == nil && l.fast != nil {
		return l.acquirePlain(ctx, name, wait)
	}
	if names == nil && l.fast != nil {
		if weight, waits, ok := plainWeight(opts, wait); ok {
			return l.acquireWeighted(ctx, name, weight, waits)
		}
	}
	c := acquireConfig{ttl: l.ttl, keepAlive: true, wait: wait}
	if len(opts) > 0 {
		p := configs.Get().(*acquireConfig) //nolint:forcetypeassert // only *acquireConfig is put
		p.ttl, p.keepAlive, p.wait = l.ttl, true, wait
		applyOptions(p, opts)
		if p.err == nil && p.weight != 0 && names == nil && l.fast != nil && p.plainButWeight() {
			// A weighted plain lease (Weight, Shared, Exclusive, NoWait
			// and nothing else): read in place, as the rest is zero.
			weight, waits := p.weight, p.wait
			p.weight, p.weightBy, p.wait, p.keepAlive = 0, byNone, false, false
			configs.Put(p)
			return l.acquireWeighted(ctx, name, weight, waits)
		}
		c = takeConfig(p)
	}
	if c.err != nil {
		return Lease{}, c.err
	}
	req := store.AcquireRequest{Name: name, Kind: c.kind, TTL: c.ttl, Hold: c.hold, StaleAfter: c.stale, Wait: c.wait, Counted: c.counted, ReenterAll: c.reenterAll,
		Weight: c.weight, Events: l.emitter}
	if names != nil {
		if err := store.CheckNames(names); err != nil {
			return Lease{}, err
		}
		if len(names) > 1 {
			req.More = names[1:]
		}
	} else if err := store.CheckName(name); err != nil {
		return Lease{}, err
	}
	if c.weights != nil {
		if err := weightsOf(&req, c.weights); err != nil {
			return Lease{}, err
		}
	}
	if err := store.CheckTTL(c.ttl, c.hold, true); err != nil {
		return Lease{}, err
	}
	if c.ref != "" {
		req.Ref = store.RefOf(c.ref)
	} else {
		req.Ref = store.NewRef()
	}
	var start time.Time
	lifeNeeded := c.needsLife()
	if lifeNeeded {
		start = time.Now()
	}
	g, err := l.store.Acquire(ctx, req)
	if err != nil {
		return Lease{}, err
	}
	var lf *life
	if lifeNeeded {
		lf = l.startLife(g, &c, start)
	}
	return newLease(l, g, lf, false), nil
}

// weightsOf sets req.Weights from WeightFor's map, refusing a name that is
// not one of req's locks.
func weightsOf(req *store.AcquireRequest, m map[string]int) error {
	names := req.Names()
	req.Weights = make([]int, len(names))
	found := 0
	for i, n := range names {
		req.Weights[i] = req.Weight
		if k, ok := m[n]; ok {
			req.Weights[i] = k
			found++
		}
	}
	if found < len(m) {
		for n := range m {
			if !slices.Contains(names, n) {
				return store.Invalid(store.ErrInvalidLocks, strconv.Quote(n), "WeightFor names a lock that is not asked for")
			}
		}
	}
	return nil
}

// plainWeight reads the weight and the wait that opts ask for, without
// applying them, when they are options made once by this package (Weight
// of 1 to fastWeights, Shared, Exclusive, NoWait) that set one weight: the
// common weighted acquisition, which then needs no config from the pool
// and no call of each option. ok is false for any other opts (another
// option, a nil one, no weight, or two weights, which may contradict each
// other): they are applied.
func plainWeight(opts []AcquireOption, wait bool) (weight int, waits bool, ok bool) {
	waits = wait
	for _, o := range opts {
		id := optionID(o)
		i := 0
		for i < len(knownOptions) && knownOptions[i] != id {
			i++
		}
		if i == len(knownOptions) { // a nil option too: none is nil

			return 0, false, false
		}
		switch k := knownWeights[i]; {
		case k == 0: // NoWait
			waits = false
		case weight != 0:
			return 0, false, false
		default:
			weight = k
		}
	}
	return weight, waits, weight != 0
}

// optionID is what tells one option value from another: a func value is
// a pointer to the function and what it captured, which copies share.
func optionID(o AcquireOption) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&o)) }

// fastWeights is the largest weight for which Weight returns an option
// made once (weightOptions), which plainWeight recognises.
const fastWeights = 8

var (
	// weightOptions[k-1] is Weight(k), made once for each k of 1 to
	// fastWeights.
	weightOptions = func() (opts [fastWeights]AcquireOption) {
		for i := range opts {
			opts[i] = newWeight(i + 1)
		}
		return opts
	}()
	sharedOption    AcquireOption = func(c *acquireConfig) { c.setWeight(1, byShared) }
	exclusiveOption AcquireOption = func(c *acquireConfig) { c.setWeight(store.WeightAll, byExclusive) }
	noWaitOption    AcquireOption = func(c *acquireConfig) { c.wait = false }

	// knownOptions are the options plainWeight recognises, by optionID,
	// and knownWeights the weight each sets (0: NoWait, which sets none).
	knownOptions, knownWeights = func() (ids [fastWeights + 3]unsafe.Pointer, weights [fastWeights + 3]int) {
		for i, o := range weightOptions {
			ids[i], weights[i] = optionID(o), i+1
		}
		ids[fastWeights], weights[fastWeights] = optionID(sharedOption), 1
		ids[fastWeights+1], weights[fastWeights+1] = optionID(exclusiveOption), store.WeightAll
		ids[fastWeights+2], weights[fastWeights+2] = optionID(noWaitOption), 0
		return ids, weights
	}()
)

// plainButWeight reports whether c asks nothing of a plain acquisition
// but a weight.
func (c *acquireConfig) plainButWeight() bool {
	return c.ref == "" && c.kind == "" && c.ttl == 0 && c.hold == 0 && c.stale == 0 && !c.counted &&
		c.bind == nil && c.execute == nil && !c.reenterAll && c.weights == nil && !c.general
}

// acquireWeighted is the memory store's plain path with a weight: its
// lease is a plain lease, whose Lock (the store's view of the lock for
// that weight) says the slots it takes.
func (l *Locks) acquireWeighted(ctx context.Context, name string, weight int, wait bool) (Lease, error) {
	slot, token, err := l.fast.AcquireWeighted(ctx, name, weight, wait)
	if err != nil {
		if err == plain.ErrNotPlain { //nolint:errorlint // the sentinel itself
			return l.acquire(ctx, name, nil, wait, []AcquireOption{func(c *acquireConfig) { c.weight, c.general = weight, true }})
		}
		return Lease{}, err
	}
	return Lease{slot: slot, token: token}, nil
}

// withOptions applies opts to a copy of c. The options are given a
// config from a pool: one on the stack would move to the heap on every
// call, as the compiler cannot see what an option does with it.
func withOptions(c acquireConfig, opts []AcquireOption) acquireConfig {
	p := configs.Get().(*acquireConfig) //nolint:forcetypeassert // only *acquireConfig is put
	*p = c
	applyOptions(p, opts)
	return takeConfig(p)
}

// takeConfig returns p's settings and puts p back in configs, zeroed so
// that it keeps nothing the caller gave alive.
func takeConfig(p *acquireConfig) acquireConfig {
	c := *p
	*p = acquireConfig{}
	configs.Put(p)
	return c
}

// applyOptions applies opts to p; a nil option is an error.
func applyOptions(p *acquireConfig, opts []AcquireOption) {
	for _, o := range opts {
		if o == nil {
			p.fail(errNilOption)
			continue
		}
		o(p)
	}
}

// configs are the configs options are applied to, zero when put back.
var configs = sync.Pool{New: func() any { return new(acquireConfig) }}

// AcquireOption adjusts one acquisition.
type AcquireOption func(*acquireConfig)

type acquireConfig struct {
	ref, kind string
	ttl, hold time.Duration
	stale     time.Duration
	wait      bool
	counted   bool
	keepAlive bool
	bind      context.Context
	execute   context.Context
	err       error

	reenterAll bool // see ReenterAll

	weight   int            // see Weight, Exclusive; 0: one slot
	weightBy weightOption   // the option that set weight, to refuse a contradiction
	weights  map[string]int // see WeightFor
	general  bool           // not the plain path (it cannot grant this lock)
}

func (c *acquireConfig) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// needsLife reports whether the lease needs its life at the grant: a
// keep-alive or expiry watch (a TTL), or a context bound to a call. Other
// leases make theirs on the first Done, Context or Err.
func (c *acquireConfig) needsLife() bool {
	return c.bind != nil || c.execute != nil || c.ttl > 0
}

// Ref names the holder: a turn id, a job id. A caller whose ref holds
// the lock already gets its lease back at once, with no new slot and no
// event (re-entrancy); one release frees it unless Counted. A ref is one
// holder wherever it is used: another Locks value, or another process on a
// shared store, asking with the same ref gets the hold back too, and its
// release frees it; give each holder a ref of its own. Without Ref every
// acquisition gets a new random 128-bit ref.
func Ref(ref string) AcquireOption {
	return func(c *acquireConfig) {
		if ref == "" {
			c.fail(store.Invalid(store.ErrInvalidRef, `""`, "a ref must not be empty (leave Ref out for a random one)"))
			return
		}
		if err := store.CheckRef("ref", ref); err != nil {
			c.fail(err)
		}
		c.ref = ref
	}
}

// Kind says what the holder is ("turn", "click", "backup"): refusals
// report it (BusyError.Kind) so a caller learns what holds the lock.
func Kind(kind string) AcquireOption {
	return func(c *acquireConfig) {
		if err := store.CheckRef("kind", kind); err != nil {
			c.fail(err)
		}
		c.kind = kind
	}
}

// TTL sets this lease's TTL: once it passes without renewal the lease may
// be taken over. d must be positive.
func TTL(d time.Duration) AcquireOption {
	return func(c *acquireConfig) {
		if d <= 0 {
			c.fail(store.Invalid(store.ErrInvalidTTL, d.String(), "a TTL must be positive"))
		}
		c.ttl = d
	}
}

// Hold makes the lease block others for d after it was taken or last
// renewed, though its TTL is longer: it is dated back by TTL-d, so another
// caller may take it over d after its last renewal (the turn locks'
// hold_s). 0 < d <= TTL.
//
// A hold bounds how long a holder that stops renewing blocks others, not
// how long a living holder may keep the lease: with the automatic
// keep-alive (the default) the lease is renewed every d/3 and blocks others
// for as long as its holder lives: a job that runs for an hour under a
// one-minute hold keeps its lock for the hour. With NoKeepAlive it blocks for d unless Keep is
// called, and its Done closes when d has passed. To bound the time a holder
// may work, give Execute (or the work) a context with a deadline.
func Hold(d time.Duration) AcquireOption {
	return func(c *acquireConfig) {
		if d <= 0 {
			c.fail(store.Invalid(store.ErrInvalidHold, d.String(), "a hold must be positive"))
		}
		c.hold = d
	}
}

// StaleAfter makes this acquisition take over another holder's lease once
// that lease has not been renewed for d (on the store's clock, a hold
// dated back), whatever the other lease's own TTL says: the turn locks'
// rule, where the acquirer's ttl_s says how old a lock must be to be taken
// over ("busy_since < now - ttl_s"). Without it a lease is taken over once
// past its own expiry, which is the same when every holder uses the same
// TTL and safer when they do not. d must be positive.
func StaleAfter(d time.Duration) AcquireOption {
	return func(c *acquireConfig) {
		if d <= 0 {
			c.fail(store.Invalid(store.ErrInvalidTTL, d.String(), "StaleAfter must be positive"))
		}
		c.stale = d
	}
}

// Weight makes the lease take k of the lock's slots, as one hold: one
// token, one release (of every lock, for AcquireAll; WeightFor sets one
// lock's). A weighted caller waits in the same FIFO queue as the others and
// blocks those behind it until k slots are free: nobody is let past it, so
// a large request is never starved by a stream of small ones, at the cost
// of slots left idle while it waits. A k larger than the lock's slots is
// refused at once with a *WeightError (errors.Is(err, ErrTooHeavy)), and a
// caller waiting when a Resize leaves the lock with fewer than k slots gets
// that error too. k must be 1 to 1,000,000. A ref that holds the lock
// already gets its hold back at the weight it holds (Lease.Weight says
// which): a hold never changes weight; release it and acquire again.
// Weight, Shared and Exclusive each set the weight: two of them that ask
// different weights (Shared with Weight(3), Exclusive then Weight(3)) are
// refused with an *InvalidError matching ErrInvalidWeight that names both.
func Weight(k int) AcquireOption {
	if k >= 1 && k <= fastWeights {
		return weightOptions[k-1]
	}
	return newWeight(k)
}

// newWeight makes the option Weight(k).
func newWeight(k int) AcquireOption {
	return func(c *acquireConfig) {
		if err := checkWeight(k); err != nil {
			c.fail(err)
			return
		}
		c.setWeight(k, byWeight)
	}
}

// weightOption names the option that set a config's weight.
type weightOption uint8

const (
	byNone weightOption = iota
	byWeight
	byShared
	byExclusive
)

// name is how the caller wrote the option of weight w.
func (o weightOption) name(w int) string {
	switch o {
	case byShared:
		return "Shared()"
	case byExclusive:
		return "Exclusive()"
	}
	return "Weight(" + strconv.Itoa(w) + ")"
}

// setWeight sets the weight w given by option by. Two options that ask
// different weights (Shared and Weight(3), Exclusive and Weight(3),
// Weight(2) and Weight(3)) contradict each other: an *InvalidError naming
// both, rather than the last one silently winning.
func (c *acquireConfig) setWeight(w int, by weightOption) {
	if c.weightBy != byNone && c.weight != w {
		first, second := c.weightBy.name(c.weight), by.name(w)
		c.fail(store.Invalid(store.ErrInvalidWeight, first+" and "+second,
			"the options contradict each other: give one weight option (Shared is one slot, Exclusive every slot)"))
		return
	}
	c.weight, c.weightBy = w, by
}

// checkWeight validates a caller's weight: store.WeightAll is Exclusive's,
// not a number a caller gives.
func checkWeight(k int) error {
	if k == store.WeightAll {
		return store.Invalid(store.ErrInvalidWeight, "-1", "a weight must be a positive integer no larger than 1000000 (Exclusive takes every slot)")
	}
	return store.CheckWeight(k)
}

// WeightFor makes the lease take k slots of the lock name (of an
// AcquireAll), whatever Weight says for the others. name must be one of
// the locks asked for.
func WeightFor(name string, k int) AcquireOption {
	return func(c *acquireConfig) {
		if err := checkWeight(k); err != nil {
			c.fail(err)
			return
		}
		if c.weights == nil {
			c.weights = make(map[string]int)
		}
		c.weights[name] = k
	}
}

// WeightAll is the weight a queued exclusive caller reports in State's
// queue (Waiter.Weight): every slot of the lock.
const WeightAll = store.WeightAll

// Exclusive makes the lease take every slot of the lock (a writer): it
// waits until no other lease holds the lock, and while it holds nobody
// else does. As every weighted caller, a waiting writer blocks readers
// (Shared) that arrive after it: writers are not starved. The weight is
// the lock's slots when it is granted; a lock resized to more slots later
// has room beside it.
func Exclusive() AcquireOption { return exclusiveOption }

// Shared makes the lease take one slot (a reader): any number of readers
// up to the lock's slots hold it together, and none while a writer
// (Exclusive) holds it. It is the default weight, named for symmetry with
// Exclusive.
func Shared() AcquireOption { return sharedOption }

// NoWait makes Acquire and AcquireAll refuse at once, like TryAcquire,
// instead of waiting.
func NoWait() AcquireOption { return noWaitOption }

// Counted makes a re-entrant acquire count: the lock is freed by as many
// releases as acquisitions.
func Counted() AcquireOption { return func(c *acquireConfig) { c.counted = true } }

// ReenterAll makes AcquireAll re-enter only as a whole: a ref that holds
// some of the locks but not all of them is refused at once, in the same
// atomic step as the acquisition, with a *BusyError naming the first lock
// of names that it holds (and that hold's kind). A ref that holds them all
// gets its lease back (re-entrancy); one that holds none acquires as usual.
func ReenterAll() AcquireOption { return func(c *acquireConfig) { c.reenterAll = true } }

// NoKeepAlive turns off the automatic renewal of a lease with a TTL: it
// expires TTL (or Hold) after it was taken unless Keep is called, and its
// Done channel closes then.
func NoKeepAlive() AcquireOption { return func(c *acquireConfig) { c.keepAlive = false } }

// BindTo releases the lease when ctx ends, as a process monitor frees the
// slot of a process that exits. Without it a lease outlives the context of
// the call that acquired it.
func BindTo(ctx context.Context) AcquireOption {
	return func(c *acquireConfig) {
		if ctx == nil {
			c.fail(store.Invalid(store.ErrInvalidConfig, "nil", "BindTo needs a context"))
			return
		}
		c.bind = ctx
	}
}

// LeaseOf returns a handle to the hold that ref has on names, made without
// acquiring: for code that keeps refs rather than Lease values (a turn id in
// a database row). Its Release, Keep, Held and Status act on whatever ref
// holds of names then; it has no token and no keep-alive. Keep renews it
// with the TTL and Hold given here (or the Locks' default TTL).
func (l *Locks) LeaseOf(ref string, names []string, opts ...AcquireOption) (Lease, error) {
	if err := l.valid(); err != nil {
		return Lease{}, err
	}
	c := withOptions(acquireConfig{ttl: l.ttl}, append([]AcquireOption{Ref(ref)}, opts...))
	if c.err != nil {
		return Lease{}, c.err
	}
	if err := store.CheckNames(names); err != nil {
		return Lease{}, err
	}
	if err := store.CheckTTL(c.ttl, c.hold, true); err != nil {
		return Lease{}, err
	}
	g := store.Grant{Lock: store.Lock{Name: names[0]}, Ref: store.RefOf(ref), Kind: c.kind, TTL: c.ttl, Hold: c.hold}
	for _, n := range names[1:] {
		g.More = append(g.More, store.Lock{Name: n})
	}
	return newLease(l, g, nil, true), nil
}

// ReleaseStale releases the locks that ref holds of names, only while ref
// still holds the first of them and that lease is stale: not renewed for
// staleAfter on the store's clock or, when staleAfter is 0, past its
// expiry. It is for cleaning up after a holder that died. It reports whether
// this call released them: of several callers at most one gets true. A
// lease with no TTL is never stale.
func (l *Locks) ReleaseStale(ctx context.Context, ref string, names []string, staleAfter time.Duration) (bool, error) {
	if err := l.usable(ctx); err != nil {
		return false, err
	}
	lease, err := l.LeaseOf(ref, names)
	if err != nil {
		return false, err
	}
	if staleAfter < 0 {
		return false, store.Invalid(store.ErrInvalidTTL, staleAfter.String(), "staleAfter must not be negative")
	}
	return l.store.ReleaseStale(ctx, lease.handle(), staleAfter, l.emitter)
}

// Execute runs fn holding a slot of name (acquired as Acquire does, with
// opts) and releases it when fn returns, fails or panics (the panic goes on
// after the release). fn's context is cancelled when ctx ends or the lease
// is lost (context.Cause tells which). Execute returns fn's result and
// error, or the acquisition's error.
func Execute[T any](ctx context.Context, l *Locks, name string, fn func(ctx context.Context) (T, error), opts ...AcquireOption) (T, error) {
	var zero T
	if fn == nil {
		return zero, store.Invalid(store.ErrInvalidConfig, "nil", "Execute needs a function to run")
	}
	opts = append(opts[:len(opts):len(opts)], func(c *acquireConfig) { c.execute = ctx })
	lease, err := l.Acquire(ctx, name, opts...)
	if err != nil {
		return zero, err
	}
	defer func() {
		// A release that fails (the store went away) must not hide fn's
		// result; the lease ends with its TTL.
		_ = lease.Release(context.WithoutCancel(ctx))
	}()
	return fn(lease.Context())
}
