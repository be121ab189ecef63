package sleeplock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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
	plain   plain.Store   // a memory store's plain path, when a call without options may take it
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
	// The memory store's allocation-free path (package internal/plain);
	// any other store has none.
	var mem plain.Store
	if p, ok := l.store.(plain.Provider); ok {
		mem = p.Plain()
	}
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
		l.plain = mem
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
		if lf.looping() {
			lf.done.Wait()
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
	if err := l.usableFor(ctx, name, slots); err != nil {
		return err
	}
	_, err := l.store.Define(ctx, name, slots, l.emitter)
	return err
}

// Resize changes the slots of a defined lock or family without dropping
// holders. With fewer slots than holders, new grants wait until enough
// holders have released.
func (l *Locks) Resize(ctx context.Context, name string, slots int) error {
	if err := l.usableFor(ctx, name, slots); err != nil {
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
	if err := l.usableFor(ctx, name, 1); err != nil { // a lock or a family pattern
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
	if err := l.usableFor(ctx, name, 1); err != nil {
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
	return l.acquire(ctx, nil, name, true, nil, opts)
}

// TryAcquire takes a slot of name if one is free and nobody waits for it,
// without waiting; otherwise it returns a *BusyError (errors.Is(err,
// ErrUnavailable)). It never jumps the queue.
func (l *Locks) TryAcquire(ctx context.Context, name string, opts ...AcquireOption) (Lease, error) {
	return l.acquire(ctx, nil, name, false, nil, opts)
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
	return l.acquire(ctx, nil, names[0], true, &names, opts)
}

// acquire is the one route of every acquisition to the store: of name, or
// of *all when all is not nil (AcquireAll's names), or of the lock of the
// handle k, whose Locks and name (checked when k was made) it takes from k.
// (A handle's call passes neither, so that the handle's methods inline
// into their callers; all is a pointer so that every argument of the hot
// path but opts is passed in a register.) When the store has a plain
// path (package internal/plain: the memory store's, allocation-free) and
// every option is one a plain lease can serve (plainOptions), it takes
// that path; otherwise it goes the general way (acquireStore), which reads
// the options into the full config. The name is checked once: by the
// plain path, for a name its store has no lock of, or by request.
func (l *Locks) acquire(ctx context.Context, k *Lock, name string, wait bool, all *[]string, opts []AcquireOption) (Lease, error) {
	if k != nil {
		l, name = k.l, k.name
	}
	weight, waits, plainOK := 0, wait, true
	if len(opts) != 0 {
		weight, waits, plainOK = plainOptions(opts, wait)
	}
	// l.plain is set only on usable Locks (see New), so that the plain
	// path, the hot one, checks no more of l.
	if !plainOK || all != nil || l == nil || l.plain == nil || ctx == nil || (k != nil && k.err != nil) {
		if err := l.usableBy(ctx, k); err != nil {
			return Lease{}, err
		}
		var names []string
		if all != nil {
			names = *all
		}
		return l.acquireStore(ctx, name, names, k != nil, plainConfig{wait: wait, keepAlive: true}, opts)
	}
	// The plain path: weight slots, by name or through the lock k keeps
	// (the store's Lookup, once), so that its calls skip the lookup by
	// name. Each way is one call into the store.
	var plk plain.Lock
	var token int64
	var err error
	var n *plainLock
	if k != nil {
		n = k.plainLock()
	}
	switch {
	case weight != 0 && weight != 1:
		plk, token, err = l.plain.AcquireWeighted(ctx, name, weight, waits)
	case n != nil:
		plk = n.Lock
		token, err = n.Acquire(ctx, waits)
	default:
		plk, token, err = l.plain.Acquire(ctx, name, waits)
	}
	if err == nil {
		return Lease{plk: plk, token: token}, nil
	}
	if err != plain.ErrNotPlain { //nolint:errorlint // the sentinel itself
		return Lease{}, err
	}
	// A lock that grants no plain lease (rare; it may have been deleted):
	// the general way, its name known good. A handle looks its lock up
	// again next time.
	if k != nil {
		k.mem.Store(nil)
	}
	return l.acquireStore(ctx, name, nil, true, plainConfig{wait: wait, keepAlive: true}, opts)
}

// plainOptions reads opts as the plain path serves them: the weight they
// ask for (0: one slot) and whether to wait (wait, unless NoWait); ok is
// false when an option is one a plain lease cannot serve, or bad (the
// general way reads them then, and reports the error).
func plainOptions(opts []AcquireOption, wait bool) (weight int, waits bool, ok bool) {
	p := plainConfig{wait: wait}
	for _, o := range opts {
		if !p.apply(o) {
			return 0, wait, false
		}
	}
	return p.weight, p.wait, p.err == nil
}

// acquireStore is the general way of acquire: it reads the options rest
// into the full config, from p, and makes the store's Acquire of its
// request (see request), and the lease's life when it needs one.
func (l *Locks) acquireStore(ctx context.Context, name string, names []string, checked bool, p plainConfig, rest []AcquireOption) (Lease, error) {
	c := acquireConfig{plainConfig: p, ttl: l.ttl}
	for _, o := range rest {
		c.apply(o)
	}
	if c.err != nil {
		return Lease{}, c.err
	}
	req, err := c.request(name, names, checked)
	if err != nil {
		return Lease{}, err
	}
	req.Events = l.emitter
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

// request is the store's request for c, of name or (not nil) names,
// checked: the locks' names, unless checked says name was; the weights
// and the TTL.
func (c *acquireConfig) request(name string, names []string, checked bool) (store.AcquireRequest, error) {
	req := store.AcquireRequest{Name: name, Kind: c.kind, TTL: c.ttl, Hold: c.hold, StaleAfter: c.stale, Wait: c.wait,
		Counted: c.counted, ReenterAll: c.reenterAll, Weight: c.weight}
	switch {
	case names != nil:
		if err := store.CheckNames(names); err != nil {
			return store.AcquireRequest{}, err
		}
		if len(names) > 1 {
			req.More = names[1:]
		}
	case !checked:
		if err := store.CheckName(name); err != nil {
			return store.AcquireRequest{}, err
		}
	}
	if c.weights != nil {
		if err := weightsOf(&req, c.weights); err != nil {
			return store.AcquireRequest{}, err
		}
	}
	if err := store.CheckTTL(c.ttl, c.hold, true); err != nil {
		return store.AcquireRequest{}, err
	}
	if c.ref != "" {
		req.Ref = store.RefOf(c.ref)
	} else {
		req.Ref = store.NewRef()
	}
	return req, nil
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

// AcquireOption adjusts one acquisition. Its values are made by Ref,
// Kind, TTL, Weight, NoWait and the other functions that return one; an
// acquisition reads them (acquireConfig.apply) without calling any code of
// theirs, so that reading them allocates nothing. A nil AcquireOption is a
// bad option: the acquisition returns an error matching ErrInvalidConfig.
type AcquireOption interface {
	acquireOption()
}

// The kinds of AcquireOption, each made by the function named.
type (
	refOption       string        // Ref
	kindOption      string        // Kind
	ttlOption       time.Duration // TTL
	holdOption      time.Duration // Hold
	staleOption     time.Duration // StaleAfter
	weightOption    int           // Weight
	weightForOption struct {      // WeightFor
		name string
		k    int
	}
	flagOption uint8                         // the options without a value
	bindOption struct{ ctx context.Context } // BindTo
	// executeOption binds the lease to Execute's context.
	executeOption struct{ ctx context.Context }
)

// The flagOptions.
const (
	sharedOption flagOption = iota + 1
	exclusiveOption
	noWaitOption
	countedOption
	reenterAllOption
	noKeepAliveOption
)

func (refOption) acquireOption()       {}
func (kindOption) acquireOption()      {}
func (ttlOption) acquireOption()       {}
func (holdOption) acquireOption()      {}
func (staleOption) acquireOption()     {}
func (weightOption) acquireOption()    {}
func (weightForOption) acquireOption() {}
func (flagOption) acquireOption()      {}
func (bindOption) acquireOption()      {}
func (executeOption) acquireOption()   {}

// plainConfig is what the options a plain lease can serve ask for: a
// weight, not to wait, no keep-alive. It is all that the plain path reads,
// small so that the hot path sets up no more (acquireConfig holds the
// rest).
type plainConfig struct {
	weight    int // see Weight, Exclusive; 0: one slot
	err       error
	wait      bool
	keepAlive bool
	weightBy  weightSource // the option that set weight, to refuse a contradiction
}

// apply reads the option o into p when a plain lease can serve it (a bad
// one, nil or out of range, sets p's error), and reports whether it did;
// acquireConfig.apply reads the others.
func (p *plainConfig) apply(o AcquireOption) bool {
	switch o := o.(type) {
	case nil:
		p.fail(errNilOption)
	case weightOption:
		if err := checkWeight(int(o)); err != nil {
			p.fail(err)
			return true
		}
		p.setWeight(int(o), byWeight)
	case flagOption:
		switch o {
		case sharedOption:
			p.setWeight(1, byShared)
		case exclusiveOption:
			p.setWeight(store.WeightAll, byExclusive)
		case noWaitOption:
			p.wait = false
		case noKeepAliveOption:
			p.keepAlive = false
		default:
			return false
		}
	default:
		return false
	}
	return true
}

// apply reads the option o into c; a bad one (nil, or a value out of
// range) sets c's error.
func (c *acquireConfig) apply(o AcquireOption) {
	if c.plainConfig.apply(o) {
		return
	}
	switch o := o.(type) {
	case flagOption:
		switch o {
		case countedOption:
			c.counted = true
		case reenterAllOption:
			c.reenterAll = true
		}
	case refOption:
		if o == "" {
			c.fail(store.Invalid(store.ErrInvalidRef, `""`, "a ref must not be empty (leave Ref out for a random one)"))
			return
		}
		c.failOn(store.CheckRef("ref", string(o)))
		c.ref = string(o)
	case kindOption:
		c.failOn(store.CheckRef("kind", string(o)))
		c.kind = string(o)
	case ttlOption:
		c.failUnlessPositive(time.Duration(o), store.ErrInvalidTTL, "a TTL must be positive")
		c.ttl = time.Duration(o)
	case holdOption:
		c.failUnlessPositive(time.Duration(o), store.ErrInvalidHold, "a hold must be positive")
		c.hold = time.Duration(o)
	case staleOption:
		c.failUnlessPositive(time.Duration(o), store.ErrInvalidTTL, "StaleAfter must be positive")
		c.stale = time.Duration(o)
	case weightForOption:
		if err := checkWeight(o.k); err != nil {
			c.fail(err)
			return
		}
		if c.weights == nil {
			c.weights = make(map[string]int)
		}
		c.weights[o.name] = o.k
	case bindOption:
		if o.ctx == nil {
			c.fail(store.Invalid(store.ErrInvalidConfig, "nil", "BindTo needs a context"))
			return
		}
		c.bind = o.ctx
	case executeOption:
		c.execute = o.ctx
	}
}

// acquireConfig is what an acquisition's options ask for (apply): those a
// plain lease can serve (plainConfig), and the rest.
type acquireConfig struct {
	plainConfig
	counted    bool
	reenterAll bool // see ReenterAll
	ref, kind  string
	ttl, hold  time.Duration
	stale      time.Duration
	bind       context.Context
	execute    context.Context
	weights    map[string]int // see WeightFor
}

func (c *plainConfig) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// failOn is fail of err, when there is one.
func (c *plainConfig) failOn(err error) {
	if err != nil {
		c.fail(err)
	}
}

// failUnlessPositive fails with an *InvalidError of kind when d is not
// positive.
func (c *plainConfig) failUnlessPositive(d time.Duration, kind error, rule string) {
	if d <= 0 {
		c.fail(store.Invalid(kind, d.String(), rule))
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
func Ref(ref string) AcquireOption { return refOption(ref) }

// Kind says what the holder is ("turn", "click", "backup"): refusals
// report it (BusyError.Kind) so a caller learns what holds the lock.
func Kind(kind string) AcquireOption { return kindOption(kind) }

// TTL sets this lease's TTL: once it passes without renewal the lease may
// be taken over. d must be positive.
func TTL(d time.Duration) AcquireOption { return ttlOption(d) }

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
func Hold(d time.Duration) AcquireOption { return holdOption(d) }

// StaleAfter makes this acquisition take over another holder's lease once
// that lease has not been renewed for d (on the store's clock, a hold
// dated back), whatever the other lease's own TTL says: the turn locks'
// rule, where the acquirer's ttl_s says how old a lock must be to be taken
// over ("busy_since < now - ttl_s"). Without it a lease is taken over once
// past its own expiry, which is the same when every holder uses the same
// TTL and safer when they do not. d must be positive.
func StaleAfter(d time.Duration) AcquireOption { return staleOption(d) }

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
func Weight(k int) AcquireOption { return weightOption(k) }

// weightSource names the option that set a config's weight.
type weightSource uint8

const (
	byNone weightSource = iota
	byWeight
	byShared
	byExclusive
)

// name is how the caller wrote the option of weight w.
func (o weightSource) name(w int) string {
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
func (c *plainConfig) setWeight(w int, by weightSource) {
	if c.weightBy != byNone && c.weight != w {
		c.contradict(w, by)
		return
	}
	c.weight, c.weightBy = w, by
}

// contradict is setWeight's refusal of the weight w that by asks, after
// another option asked a different one.
func (c *plainConfig) contradict(w int, by weightSource) {
	first, second := c.weightBy.name(c.weight), by.name(w)
	c.fail(store.Invalid(store.ErrInvalidWeight, first+" and "+second,
		"the options contradict each other: give one weight option (Shared is one slot, Exclusive every slot)"))
}

// checkWeight validates a caller's weight: store.WeightAll is Exclusive's,
// not a number a caller gives.
func checkWeight(k int) error {
	if k >= 1 && k <= store.MaxSlots {
		return nil // the common case, inlined
	}
	return badWeight(k)
}

// badWeight is checkWeight's error for a weight out of its range.
func badWeight(k int) error {
	if k == store.WeightAll {
		return store.Invalid(store.ErrInvalidWeight, "-1", "a weight must be a positive integer no larger than 1000000 (Exclusive takes every slot)")
	}
	return store.CheckWeight(k)
}

// WeightFor makes the lease take k slots of the lock name (of an
// AcquireAll), whatever Weight says for the others. name must be one of
// the locks asked for.
func WeightFor(name string, k int) AcquireOption { return weightForOption{name, k} }

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
func Counted() AcquireOption { return countedOption }

// ReenterAll makes AcquireAll re-enter only as a whole: a ref that holds
// some of the locks but not all of them is refused at once, in the same
// atomic step as the acquisition, with a *BusyError naming the first lock
// of names that it holds (and that hold's kind). A ref that holds them all
// gets its lease back (re-entrancy); one that holds none acquires as usual.
func ReenterAll() AcquireOption { return reenterAllOption }

// NoKeepAlive turns off the automatic renewal of a lease with a TTL: it
// expires TTL (or Hold) after it was taken unless Keep is called, and its
// Done channel closes then.
func NoKeepAlive() AcquireOption { return noKeepAliveOption }

// BindTo releases the lease when ctx ends, as a process monitor frees the
// slot of a process that exits. Without it a lease outlives the context of
// the call that acquired it.
func BindTo(ctx context.Context) AcquireOption { return bindOption{ctx} }

// LeaseOf returns a handle to the hold that ref has on names, made without
// acquiring: for code that keeps refs rather than Lease values (a turn id in
// a database row). Its Release, Keep, Held and Status act on whatever ref
// holds of names then; it has no token and no keep-alive. Keep renews it
// with the TTL and Hold given here (or the Locks' default TTL).
func (l *Locks) LeaseOf(ref string, names []string, opts ...AcquireOption) (Lease, error) {
	if err := l.valid(); err != nil {
		return Lease{}, err
	}
	c := acquireConfig{ttl: l.ttl}
	c.apply(Ref(ref))
	for _, o := range opts {
		c.apply(o)
	}
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
	opts = append(opts[:len(opts):len(opts)], executeOption{ctx})
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
