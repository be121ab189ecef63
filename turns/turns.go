// Package turns gives the turn locks of a clustered chat agent on top of
// package sleeplock: one turn per chat and one turn in flight per user, so
// parallel chats cannot run past a limit, safe when a node dies mid-turn.
//
// It restates, one Go function per function, the turn locks of an Elixir
// chat agent (PhoenixKitAgent), whose locks are two database rows with
// TTLs: "the reference" below. This package documentation and each
// function's doc comment say what the reference says, sentence by
// sentence; the tests (internal/integration/turns/seed_test.go) quote
// those sentences.
//
// A turn holds two locks, the chat's and the user's, taken together or not
// at all (Acquire). A click on a confirmation card takes the user's lock
// alone under a ref of its own (ClickRef, AcquireUser): it is refused while
// a turn of the user runs, and no turn starts while it runs. Whoever is
// refused learns what holds the lock: ErrConversationBusy, ErrTurnInFlight
// or ErrClickInFlight.
//
// Every lock has a TTL judged on the store's clock (PostgreSQL's, not the
// nodes'), so a lock left by a node that went down frees itself: the next
// turn takes it over once it is older than the acquirer's TTL (the reference's
// rule; package sleeplock's default judges by the holder's own expiry, see
// sleeplock.StaleAfter), and ReleaseStale
// cleans up what is left of a turn lost with its node. A lock is released
// only by the ref that holds it, so a late release can never free a newer
// turn, and a running turn checks before each round that it still holds
// both locks (Held): a turn whose lock was taken over stops there.
//
// Turns keeps no state besides its configuration: every call names the
// holder by its ref, so a turn taken on one node may be checked, kept or
// released on any other. Acquire and AcquireUser also return the lease
// they took, which callers may keep or drop: it carries the fencing tokens
// (Lease.Tokens) that let a resource written during a turn refuse the
// writes of a turn that was taken over.
//
// Turns do not renew their locks, as in the reference: the turn TTL (WithTTL) is
// the longest a turn may run before another may take it over; choose it
// longer than any turn. Clicks, which block turns only briefly, keep their
// lock fresh with KeepUser.
//
// Package turns writes nothing but the locks of package sleeplock: it has
// no SQL of its own and works on every store, and it never touches the
// application's tables.
package turns

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/store"
)

// Errors of a refused acquisition. Each is returned wrapped together with
// the *sleeplock.BusyError that says which lock was refused and what holds
// it, so both errors.Is(err, ErrTurnInFlight) and errors.As(err, &busy)
// work.
var (
	// ErrConversationBusy: another turn holds the chat's lock.
	ErrConversationBusy = errors.New("turns: conversation busy")
	// ErrTurnInFlight: a turn of the user (in another chat) holds the
	// user's lock.
	ErrTurnInFlight = errors.New("turns: turn in flight")
	// ErrClickInFlight: a click of the user on a confirmation card holds
	// the user's lock.
	ErrClickInFlight = errors.New("turns: click in flight")
)

// The kinds recorded with each lock, which refusals report.
const (
	KindTurn  = "turn"  // the holder is a turn (Acquire)
	KindClick = "click" // the holder is a click on a confirmation card (AcquireUser)
)

// Defaults of New.
const (
	DefaultChatFamily = "chat"           // chat locks are "chat/<chat id>"
	DefaultUserFamily = "user"           // user locks are "user/<user id>"
	DefaultTTL        = 10 * time.Minute // the TTL of a turn's locks
)

// clickPrefix starts every ref made by ClickRef; 32 hex digits follow.
const clickPrefix = "click:"

// Turns takes and releases the turn locks of chats and users. It is safe
// for concurrent use. Any number of Turns, on any number of nodes, may
// share the locks of one store.
type Turns struct {
	locks      *sleeplock.Locks
	chatFamily string
	userFamily string
	ttl        time.Duration
	err        error // a bad Option, reported by every call
}

// Option configures New.
type Option func(*Turns)

// WithChatFamily sets the family of the chat locks: a chat "42" is locked
// as family+"/42". Default "chat".
func WithChatFamily(family string) Option {
	return func(t *Turns) { t.chatFamily = family }
}

// WithUserFamily sets the family of the user locks: a user "7" is locked as
// family+"/7". Default "user". It must differ from the chat family.
func WithUserFamily(family string) Option {
	return func(t *Turns) { t.userFamily = family }
}

// WithTTL sets the TTL of a turn's locks (the reference's ttl_s of acquire):
// once a turn's locks are that old, on the store's clock, another turn may
// take them over. Default DefaultTTL. d must be positive.
func WithTTL(d time.Duration) Option {
	return func(t *Turns) {
		if d <= 0 && t.err == nil {
			t.err = invalid(sleeplock.ErrInvalidTTL, d.String(), "a turn TTL must be positive")
		}
		t.ttl = d
	}
}

// New returns Turns that keep their locks in locks. The lock families must
// exist before the first acquisition: call Define once (on every node, it is
// idempotent) or declare "chat/*" and "user/*" with one slot each in the
// locks' configuration. A bad option makes every call return its error.
func New(locks *sleeplock.Locks, opts ...Option) *Turns {
	t := &Turns{
		locks:      locks,
		chatFamily: DefaultChatFamily,
		userFamily: DefaultUserFamily,
		ttl:        DefaultTTL,
	}
	for _, o := range opts {
		if o == nil {
			if t.err == nil {
				t.err = invalid(sleeplock.ErrInvalidConfig, "nil", "an option must not be nil")
			}
			continue
		}
		o(t)
	}
	if t.err == nil && locks == nil {
		t.err = invalid(sleeplock.ErrInvalidConfig, "nil", "turns.New needs *sleeplock.Locks")
	}
	for _, f := range []string{t.chatFamily, t.userFamily} {
		if t.err == nil && (f == "" || strings.Contains(f, "*") || strings.HasSuffix(f, "/")) {
			t.err = invalid(sleeplock.ErrInvalidName, strconv.Quote(f), `a lock family is a non-empty prefix with no "*" and no trailing "/"`)
		}
	}
	if t.err == nil && t.chatFamily == t.userFamily {
		t.err = invalid(sleeplock.ErrInvalidConfig, strconv.Quote(t.chatFamily), "the chat and user lock families must differ")
	}
	return t
}

// TTL returns the TTL of a turn's locks.
func (t *Turns) TTL() time.Duration {
	if t == nil {
		return 0
	}
	return t.ttl
}

// Define creates the two lock families, "chat/*" and "user/*" (or those
// set by the options), with one slot each. Defining them again does
// nothing, so every node may call it at start-up.
func (t *Turns) Define(ctx context.Context) error {
	if t == nil {
		return errNoTurns
	}
	if t.err != nil {
		return t.err
	}
	if err := t.locks.Define(ctx, t.chatFamily+"/*", 1); err != nil {
		return err
	}
	return t.locks.Define(ctx, t.userFamily+"/*", 1)
}

// ChatLock returns the name of the chat's lock ("chat/42").
func (t *Turns) ChatLock(chat string) string {
	if t == nil {
		return ""
	}
	return t.chatFamily + "/" + chat
}

// UserLock returns the name of the user's lock ("user/7").
func (t *Turns) UserLock(user string) string {
	if t == nil {
		return ""
	}
	return t.userFamily + "/" + user
}

// Acquire takes both locks for turnRef, or neither, in one atomic step.
// The chat is tried first, so a second turn in the same chat is
// ErrConversationBusy; a turn of the user in another chat is
// ErrTurnInFlight, a click of the user ErrClickInFlight. A lock is taken
// when it is free or older than the turn TTL (WithTTL) on the store's
// clock — the acquirer's TTL, as the reference's "busy_since < now - ttl_s",
// whatever TTL its holder was taken with. The locks are not renewed: they
// block other turns for the TTL unless released.
//
// Acquiring again with a ref that holds both already succeeds and changes
// nothing (turn refs are unique per turn): it returns the lease with the
// tokens of the first acquisition. A ref that holds only one of them — a
// turn asking for a second chat — is refused like any other holder, as the
// reference's statement refuses a lock that is neither free nor stale: the
// chat's lock with ErrConversationBusy, the user's with ErrTurnInFlight.
// All of this is one atomic step of the store (one statement on
// PostgreSQL), granted or refused.
//
// The lease returned is of both locks: its fencing tokens (Lease.Tokens)
// are the chat's and the user's, in that order. A resource written during
// the turn can refuse writes carrying a token lower than one it has seen,
// so a turn that was taken over cannot overwrite its successor's work.
// Keeping the lease is optional: Release, Held and Fresh work by turnRef
// alone, on any node.
//
// turnRef must be a turn's ref: not empty and not a click's.
func (t *Turns) Acquire(ctx context.Context, chat, user, turnRef string) (sleeplock.Lease, error) {
	names, err := t.both(chat, user)
	if err != nil {
		return sleeplock.Lease{}, err
	}
	if err := wantKind(turnRef, KindTurn); err != nil {
		return sleeplock.Lease{}, err
	}
	lease, err := t.locks.AcquireAll(ctx, names, sleeplock.Ref(turnRef), sleeplock.Kind(KindTurn),
		sleeplock.TTL(t.ttl), sleeplock.StaleAfter(t.ttl), sleeplock.NoWait(), sleeplock.NoKeepAlive(), sleeplock.ReenterAll())
	if err != nil {
		return sleeplock.Lease{}, t.refusal(err, names[0])
	}
	return lease, nil
}

// AcquireUser takes the user's lock alone for ref, a click on a
// confirmation card (see ClickRef), or refuses with ErrTurnInFlight or
// ErrClickInFlight. ttl is how old another holder's lock must be to be
// taken over — the TTL of a turn's locks, so a turn still running is never
// taken over. hold (at most ttl) is how long this lock blocks a turn: it is
// dated back by ttl-hold, so a turn takes it over hold after it was taken
// (or last kept, KeepUser), should it never be released (its node went
// down). Release it with ReleaseUser.
//
// The lease returned is of the user's lock: its fencing token
// (Lease.Token) guards the click's writes as a turn's tokens guard the
// turn's. Keeping the lease is optional: ReleaseUser and KeepUser work by
// ref alone, on any node.
//
// ref must be a click's ref (made by ClickRef).
func (t *Turns) AcquireUser(ctx context.Context, user, ref string, ttl, hold time.Duration) (sleeplock.Lease, error) {
	name, err := t.lockName("user", user)
	if err != nil {
		return sleeplock.Lease{}, err
	}
	if err := checkHold(ttl, hold); err != nil {
		return sleeplock.Lease{}, err
	}
	if err := wantKind(ref, KindClick); err != nil {
		return sleeplock.Lease{}, err
	}
	lease, err := t.locks.TryAcquire(ctx, name, sleeplock.Ref(ref), sleeplock.Kind(KindClick),
		sleeplock.TTL(ttl), sleeplock.Hold(hold), sleeplock.StaleAfter(ttl), sleeplock.NoKeepAlive())
	if err != nil {
		return sleeplock.Lease{}, t.refusal(err, "")
	}
	return lease, nil
}

// ClickRef returns a new ref for a click on a confirmation card, told apart
// from a turn's: "click:" and 128 random bits in hex (a generated ref's,
// store.NewRef). See KindOf.
func ClickRef() string {
	return clickPrefix + store.NewRef().String()
}

// KindOf tells a turn's ref from a click's: KindClick for a ref made by
// ClickRef, KindTurn for any other valid ref. A ref that is neither — empty,
// longer than 200 bytes, with control characters, or starting with "click:"
// without being one of ClickRef's — is an *sleeplock.InvalidError matching
// sleeplock.ErrInvalidRef.
func KindOf(ref string) (string, error) {
	if ref == "" {
		return "", invalid(sleeplock.ErrInvalidRef, `""`, "a turn or click ref must not be empty")
	}
	if rest, ok := strings.CutPrefix(ref, clickPrefix); ok {
		if len(rest) != 32 || strings.Trim(rest, "0123456789abcdef") != "" {
			return "", invalid(sleeplock.ErrInvalidRef, strconv.Quote(ref), `a ref starting with "click:" must be one made by ClickRef`)
		}
		return KindClick, nil
	}
	if err := store.CheckRef("ref", ref); err != nil {
		return "", err
	}
	return KindTurn, nil
}

// Fresh reports whether the chat's lock is turnRef's and younger than ttl
// on the store's clock: the turn may still run, on this node or another.
// turnRef must be a turn's ref (see KindOf).
func (t *Turns) Fresh(ctx context.Context, chat, turnRef string, ttl time.Duration) (bool, error) {
	name, err := t.lockName("chat", chat)
	if err != nil {
		return false, err
	}
	if ttl <= 0 {
		return false, invalid(sleeplock.ErrInvalidTTL, ttl.String(), "a TTL must be positive")
	}
	lease, err := t.turnLease(turnRef, name)
	if err != nil {
		return false, err
	}
	st, err := lease.Status(ctx)
	if err != nil {
		return false, err
	}
	return st.Held && st.Now.Sub(st.Renewed) < ttl, nil
}

// Held reports whether turnRef holds both locks. A running turn asks before
// each round: a turn whose lock was taken over stops there. A turn older
// than its TTL still holds its locks until another takes them over.
// turnRef must be a turn's ref (see KindOf).
func (t *Turns) Held(ctx context.Context, chat, user, turnRef string) (bool, error) {
	names, err := t.both(chat, user)
	if err != nil {
		return false, err
	}
	lease, err := t.turnLease(turnRef, names...)
	if err != nil {
		return false, err
	}
	return lease.Held(ctx)
}

// KeepUser dates the user's lock of ref as if taken now (with
// AcquireUser's ttl and hold), while ref still holds it: a click that runs
// longer than its hold keeps blocking a turn. It reports true when ref held
// it; otherwise nothing changed. Any node may keep a click's lock.
func (t *Turns) KeepUser(ctx context.Context, user, ref string, ttl, hold time.Duration) (bool, error) {
	name, err := t.lockName("user", user)
	if err != nil {
		return false, err
	}
	if err := checkHold(ttl, hold); err != nil {
		return false, err
	}
	if _, err := KindOf(ref); err != nil {
		return false, err
	}
	lease, err := t.locks.LeaseOf(ref, []string{name}, sleeplock.TTL(ttl), sleeplock.Hold(hold))
	if err != nil {
		return false, err
	}
	switch err := lease.Keep(ctx); {
	case err == nil:
		return true, nil
	case errors.Is(err, sleeplock.ErrNotHeld):
		return false, nil
	default:
		return false, err
	}
}

// Release releases both locks if turnRef still holds them; a lock that
// turnRef no longer holds (taken over after its TTL) is left to its new
// holder, so a late release can never free a newer turn. It returns an
// error matching sleeplock.ErrNotHeld when it freed nothing, or only one of
// the two locks (callers may ignore it: nothing of another turn was
// touched), and other errors for bad input or a store that failed. turnRef
// must be a turn's ref (see KindOf).
func (t *Turns) Release(ctx context.Context, chat, user, turnRef string) error {
	names, err := t.both(chat, user)
	if err != nil {
		return err
	}
	if err := wantKind(turnRef, KindTurn); err != nil {
		return err
	}
	return t.release(ctx, turnRef, names)
}

// ReleaseStale releases the locks of turnRef only while the chat's lock is
// still its and older than ttl on the store's clock: what is left of a turn
// lost with its node. It reports true when this call released them, so of
// two callers at most one does; the user's lock goes too, if turnRef still
// holds it. turnRef must be a turn's ref (see KindOf).
func (t *Turns) ReleaseStale(ctx context.Context, chat, user, turnRef string, ttl time.Duration) (bool, error) {
	names, err := t.both(chat, user)
	if err != nil {
		return false, err
	}
	if ttl <= 0 {
		return false, invalid(sleeplock.ErrInvalidTTL, ttl.String(), "a TTL must be positive")
	}
	if err := wantKind(turnRef, KindTurn); err != nil {
		return false, err
	}
	return t.locks.ReleaseStale(ctx, turnRef, names, ttl)
}

// ReleaseUser releases the user's lock if ref still holds it (a click's
// ref, or a turn's). It returns an error matching sleeplock.ErrNotHeld when
// ref did not hold it (callers may ignore it).
func (t *Turns) ReleaseUser(ctx context.Context, user, ref string) error {
	name, err := t.lockName("user", user)
	if err != nil {
		return err
	}
	return t.release(ctx, ref, []string{name})
}

// release frees what ref holds of names, by ref: a lock that ref no longer
// holds is left to its holder, and the error then matches ErrNotHeld.
func (t *Turns) release(ctx context.Context, ref string, names []string) error {
	if _, err := KindOf(ref); err != nil {
		return err
	}
	lease, err := t.locks.LeaseOf(ref, names)
	if err != nil {
		return err
	}
	return lease.Release(ctx)
}

// turnLease is a handle on what turnRef holds of names.
func (t *Turns) turnLease(turnRef string, names ...string) (sleeplock.Lease, error) {
	if err := wantKind(turnRef, KindTurn); err != nil {
		return sleeplock.Lease{}, err
	}
	return t.locks.LeaseOf(turnRef, names)
}

// refusal maps a refused acquisition to the reference's errors; chat is the
// chat's lock name ("" for a user's lock alone).
func (t *Turns) refusal(err error, chat string) error {
	var busy *sleeplock.BusyError
	if !errors.As(err, &busy) {
		return err
	}
	switch {
	case chat != "" && busy.Lock == chat:
		return fmt.Errorf("%w: %w", ErrConversationBusy, err)
	case busy.Kind == KindClick:
		return fmt.Errorf("%w: %w", ErrClickInFlight, err)
	default:
		return fmt.Errorf("%w: %w", ErrTurnInFlight, err)
	}
}

func (t *Turns) both(chat, user string) ([]string, error) {
	c, err := t.lockName("chat", chat)
	if err != nil {
		return nil, err
	}
	u, err := t.lockName("user", user)
	if err != nil {
		return nil, err
	}
	return []string{c, u}, nil
}

// lockName returns the lock of the chat or user id (what: "chat" or
// "user"), or why t or id cannot name one.
func (t *Turns) lockName(what, id string) (string, error) {
	switch {
	case t == nil:
		return "", errNoTurns
	case t.err != nil:
		return "", t.err
	case id == "":
		return "", invalid(sleeplock.ErrInvalidName, `""`, "a "+what+" id must not be empty")
	case what == "chat":
		return t.ChatLock(id), nil
	}
	return t.UserLock(id), nil
}

func wantKind(ref, kind string) error {
	k, err := KindOf(ref)
	if err != nil {
		return err
	}
	if k != kind {
		if kind == KindTurn {
			return invalid(sleeplock.ErrInvalidRef, strconv.Quote(ref), "a click's ref cannot take a turn's locks")
		}
		return invalid(sleeplock.ErrInvalidRef, strconv.Quote(ref), "the user's lock alone is taken by a click: use a ref from ClickRef")
	}
	return nil
}

func checkHold(ttl, hold time.Duration) error {
	switch {
	case ttl <= 0:
		return invalid(sleeplock.ErrInvalidTTL, ttl.String(), "a TTL must be positive")
	case hold <= 0:
		return invalid(sleeplock.ErrInvalidHold, hold.String(), "a hold must be positive")
	case hold > ttl:
		return invalid(sleeplock.ErrInvalidHold, hold.String(), "a hold must not be longer than the TTL ("+ttl.String()+")")
	}
	return nil
}

// errNoTurns is the error of every call on a nil *Turns.
var errNoTurns = invalid(sleeplock.ErrInvalidConfig, "nil", "a *Turns must come from turns.New")

func invalid(kind error, value, rule string) error {
	return &sleeplock.InvalidError{Kind: kind, Value: value, Rule: rule}
}
