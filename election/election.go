// Package election elects one leader among candidates that share a
// sleeplock store (memory, SQLite, PostgreSQL, Redis, or any store that
// passes the conformance suite), on top of sleeplock's leases.
//
// An election is a lock of one slot whose holder is the leader. Campaign
// waits in FIFO order until the candidate leads and returns its Term: the
// term's fencing token grows from term to term, and its Done channel
// closes no later than the moment the store could elect another candidate
// (the lease's local deadline, measured by this process's monotonic clock
// from before the last renewal that succeeded). Resign hands leadership to
// the next candidate at once. Run ends the leader's work before it
// resigns. Leader reads the current leader, and Observe reports every
// change, vacancy included, from the store's own push (notifications on
// PostgreSQL, a PUBLISH on Redis, the change watch on SQLite, direct calls
// in memory).
//
// A candidate's ID and advertised value live in the lease of its term: the
// ID in its ref ("ID#" and 16 random hex digits, so that two campaigns of
// one ID are two candidates) and the value in its kind, which Proclaim
// changes in place (store.Relabeler). Observe listens through
// store.Announcer. See docs/store-contract.md.
package election

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/store"
)

// DefaultTTL is the TTL of a term's lease unless WithTTL says otherwise: a
// leader that dies without resigning is replaced within it.
const DefaultTTL = 15 * time.Second

// MaxIDBytes and MaxValueBytes bound a candidate's ID and value (UTF-8 with
// no control characters).
const (
	MaxIDBytes    = 128
	MaxValueBytes = store.MaxRefBytes
)

// Errors. Bad input is a *sleeplock.InvalidError matching
// sleeplock.ErrInvalid and ErrInvalidCandidate or sleeplock.ErrInvalidName.
var (
	// ErrNoLeader: nobody leads the election now.
	ErrNoLeader = errors.New("election: no leader")
	// ErrNotLeader: the term has ended (resigned, lost, taken over).
	ErrNotLeader = errors.New("election: the term has ended")
	// ErrInvalidCandidate: a candidate's ID is empty, or its ID or value is
	// too long or has control characters.
	ErrInvalidCandidate = errors.New("election: invalid candidate")
)

// Election is one named election on a store. It is safe for concurrent
// use; many candidates (in this process and others) may campaign in it.
type Election struct {
	locks   *sleeplock.Locks
	name    string
	ttl     time.Duration
	defined atomic.Bool
}

// Option configures an Election.
type Option func(*config)

type config struct {
	ttl time.Duration
	err error
}

// WithTTL sets the TTL of a term's lease (default DefaultTTL): it is
// renewed every third of it, and a leader that stops renewing is replaced
// once it passes. It must be positive.
func WithTTL(d time.Duration) Option {
	return func(c *config) {
		if err := store.CheckTTL(d, 0, false); err != nil && c.err == nil {
			c.err = err
		}
		c.ttl = d
	}
}

// New returns the election name on locks' store. The election is a lock of
// one slot of that name, defined on first use, and again after a Campaign
// found it gone (sleeplock.ErrNotFound: deleted, or lost with a store that
// keeps nothing across a restart); a lock of that name with other slots is
// an error then (sleeplock.ErrAlreadyDefined). A name that is not a valid
// lock name is a *sleeplock.InvalidError.
func New(locks *sleeplock.Locks, name string, opts ...Option) (*Election, error) {
	if locks == nil {
		return nil, store.Invalid(store.ErrInvalidConfig, "nil", "election.New needs a *sleeplock.Locks")
	}
	if err := store.CheckName(name); err != nil {
		return nil, err
	}
	c := config{ttl: DefaultTTL}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	return &Election{locks: locks, name: name, ttl: c.ttl}, nil
}

// errNoElection is the error of a nil or zero *Election.
var errNoElection = store.Invalid(store.ErrInvalidConfig, "a nil or zero *election.Election", "an Election comes from election.New")

func (e *Election) usable(ctx context.Context) error {
	switch {
	case e == nil || e.locks == nil:
		return errNoElection
	case ctx == nil:
		return store.Invalid(store.ErrInvalidConfig, "nil", "a context is required")
	}
	return nil
}

// Name returns the election's name (its lock's).
func (e *Election) Name() string {
	if e == nil {
		return ""
	}
	return e.name
}

// TTL returns the TTL of a term's lease.
func (e *Election) TTL() time.Duration {
	if e == nil {
		return 0
	}
	return e.ttl
}

// Candidate is who campaigns: an ID that names it (a host name, a pod)
// and a value it advertises while it leads (an address).
type Candidate struct {
	ID    string // 1 to MaxIDBytes bytes
	Value string // 0 to MaxValueBytes bytes
}

func checkText(what, s string, maxBytes int, empty bool) error {
	rule := fmt.Sprintf("a candidate's %s is at most %d bytes of UTF-8 with no control characters", what, maxBytes)
	switch {
	case s == "" && !empty:
		return store.Invalid(ErrInvalidCandidate, `""`, "a candidate needs an ID")
	case len(s) > maxBytes:
		return store.Invalid(ErrInvalidCandidate, strconv.Itoa(len(s))+" bytes", rule)
	case !utf8.ValidString(s):
		return store.Invalid(ErrInvalidCandidate, strconv.Quote(s), rule)
	case strings.ContainsFunc(s, unicode.IsControl):
		return store.Invalid(ErrInvalidCandidate, strconv.Quote(s), rule)
	}
	return nil
}

func (c Candidate) check() error {
	if err := checkText("ID", c.ID, MaxIDBytes, false); err != nil {
		return err
	}
	return checkValue(c.Value)
}

func checkValue(v string) error { return checkText("value", v, MaxValueBytes, true) }

// refSep separates a candidate's ID from the random part of its ref.
const refSep = "#"

// newRef returns a new ref for a campaign of id: its random part is 64
// bits of a generated ref's 128 (store.NewRef).
func newRef(id string) string {
	return id + refSep + store.NewRef().String()[:16]
}

// CandidateID returns the candidate ID in the ref of a term's lease (or
// of a waiting campaign), and false when ref is not one.
func CandidateID(ref string) (string, bool) {
	i := strings.LastIndex(ref, refSep)
	if i <= 0 || len(ref)-i-1 != 16 {
		return ref, false
	}
	if _, err := hex.DecodeString(ref[i+1:]); err != nil {
		return ref, false
	}
	return ref[:i], true
}

// define defines the election's lock once.
func (e *Election) define(ctx context.Context) error {
	if e.defined.Load() {
		return nil
	}
	if err := e.locks.Define(ctx, e.name, 1); err != nil {
		return fmt.Errorf("election %q: %w", e.name, err)
	}
	e.defined.Store(true)
	return nil
}

// Campaign waits in FIFO order, behind the candidates that campaigned
// before, until c leads, and returns its term. When ctx ends first it
// returns ctx's error and leaves the queue: it is never granted afterwards.
// Bad input is a *sleeplock.InvalidError, returned at once.
func (e *Election) Campaign(ctx context.Context, c Candidate) (*Term, error) {
	if err := e.usable(ctx); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := e.define(ctx); err != nil {
		return nil, err
	}
	ref := newRef(c.ID)
	lease, err := e.locks.Acquire(ctx, e.name, sleeplock.Ref(ref), sleeplock.Kind(c.Value), sleeplock.TTL(e.ttl))
	if errors.Is(err, sleeplock.ErrNotFound) {
		// The lock has gone (deleted, or lost with a store that keeps
		// nothing across a restart): the next Campaign defines it again.
		e.defined.Store(false)
	}
	if err != nil {
		return nil, err
	}
	t := &Term{e: e, lease: lease, id: c.ID, value: c.Value}
	e.announce(ctx, t.snapshot())
	return t, nil
}

// Leader is who leads an election, as the store says.
type Leader struct {
	ID      string    // the candidate's ID
	Value   string    // the value it advertises (Proclaim changes it)
	Token   int64     // the fencing token of its term
	Since   time.Time // when its term began, on the store's clock
	Expires time.Time // when its lease expires unless renewed, on the store's clock
	Waiting int       // candidates waiting to lead
}

// Leader returns the current leader, or ErrNoLeader when nobody leads: no
// term was ever granted, the last one was resigned, or its lease expired
// (a leader that expired knows it no longer leads). One store read.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if err := e.usable(ctx); err != nil {
		return Leader{}, err
	}
	v, err := e.read(ctx)
	if err != nil {
		return Leader{}, err
	}
	if !v.leads {
		return Leader{}, ErrNoLeader
	}
	return v.leader, nil
}

// Status is an election as the state of its lock shows it (StatusOf).
type Status struct {
	// Leading reports whether a candidate leads: Leader is that candidate
	// then. A lease past its expiry that nobody took over yet leads no
	// more.
	Leading bool
	// Leader is the leader when Leading; its Waiting (the candidates
	// waiting to lead) is set either way.
	Leader Leader
}

// StatusOf reads an election from the state of its lock, as
// sleeplock.Locks.List and StateDetail return it (with holders and
// queue), and reports false when st is not an election's. An election is
// recognised by its candidates: a lock of one slot, not a family, with at
// least one holder or waiter, every one of them with a candidate's ref
// (CandidateID). So a vacant election that nobody campaigns in is, in a
// state, a free lock of one slot like any other, and a plain lock held
// under refs made to look like a candidate's would be taken for one.
func StatusOf(st store.State) (Status, bool) {
	if st.Slots != 1 || st.Family || len(st.Holders)+len(st.Queue) == 0 {
		return Status{}, false
	}
	for _, h := range st.Holders {
		if _, ok := CandidateID(h.Ref); !ok {
			return Status{}, false
		}
	}
	for _, w := range st.Queue {
		if _, ok := CandidateID(w.Ref); !ok {
			return Status{}, false
		}
	}
	v := viewOf(st)
	return Status{Leading: v.leads, Leader: v.leader}, true
}

// view is an election's state as read or announced.
type view struct {
	leads  bool
	leader Leader
	left   time.Duration // until the leader's lease expires, as of the read
	// seq counts the leader's proclaims in its term, as its Term knows
	// them; 0 in a read, which cannot tell.
	seq int64
}

// read reads the election's state in one store call.
func (e *Election) read(ctx context.Context) (view, error) {
	st, err := e.locks.StateDetail(ctx, e.name)
	if errors.Is(err, store.ErrNotFound) {
		return view{}, nil
	}
	if err != nil {
		return view{}, err
	}
	return viewOf(st), nil
}

func viewOf(st store.State) view {
	v := view{leader: Leader{Waiting: st.Waiting}}
	for _, h := range st.Holders {
		if !h.Expires.IsZero() && !h.Expires.After(st.Now) {
			continue // expired: its holder no longer leads
		}
		id, _ := CandidateID(h.Ref)
		v.leads = true
		v.leader = Leader{ID: id, Value: h.Kind, Token: h.Token, Since: h.Acquired, Expires: h.Expires, Waiting: st.Waiting}
		if !h.Expires.IsZero() {
			v.left = h.Expires.Sub(st.Now)
		}
		break
	}
	return v
}
