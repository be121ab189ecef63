package election

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/store"
)

// errNoTerm is the error of a nil or zero *Term.
var errNoTerm = store.Invalid(store.ErrInvalidConfig, "a nil or zero *election.Term", "a Term comes from Campaign")

// Term is one candidate's leadership, from the grant to its end: resigned,
// lost (its lease was not renewed in time), or taken over. Its methods are
// safe for concurrent use.
type Term struct {
	e     *Election
	lease sleeplock.Lease
	id    string

	mu        sync.Mutex // serialises Proclaim and Resign
	value     string
	proclaims int64 // Proclaims made: orders the announcements of the term
	resigned  bool
}

// Token returns the term's fencing token: larger than every earlier
// term's of the election, never reused. Pass it with every write the
// leader makes, or fence the write with Guard.
func (t *Term) Token() int64 {
	if t == nil {
		return 0
	}
	return t.lease.Token()
}

// ID returns the leader's candidate ID.
func (t *Term) ID() string {
	if t == nil {
		return ""
	}
	return t.id
}

// Value returns the value the term advertises now.
func (t *Term) Value() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.value
}

// Since returns when the term began, on the store's clock (zero when the
// store did not read its clock).
func (t *Term) Since() time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.lease.Acquired()
}

// Done returns a channel closed when the term ends: resigned, taken over,
// or not renewed before its lease's local deadline. It closes no later
// than the moment the store could elect another candidate, by this
// process's monotonic clock measured from before the last renewal that
// succeeded: a leader that stops at Done never overlaps the next one.
func (t *Term) Done() <-chan struct{} { return t.Lease().Done() }

// Context returns a context cancelled when the term ends (Done), with the
// reason as its cause (Err).
func (t *Term) Context() context.Context { return t.Lease().Context() }

// Err returns nil while the term lasts, and why it ended otherwise:
// sleeplock.ErrReleased after Resign, an error matching
// sleeplock.ErrLeaseLost when it was lost.
func (t *Term) Err() error { return t.Lease().Err() }

// Lease returns the lease that holds the term (for Guard, Deadline, …).
// The zero Lease (ended, ErrNotHeld) for a nil Term.
func (t *Term) Lease() sleeplock.Lease {
	if t == nil {
		return sleeplock.Lease{}
	}
	return t.lease
}

// Guard fences a write made in tx, the caller's own transaction on the
// store's database: it verifies that the term still holds, and no
// takeover can commit before tx does. tx is what sleeplock.Lease.Guard
// takes on the store: a pgx.Tx or *sql.Tx on PostgreSQL, a *sql.Tx on
// SQLite, a *redisstore.Tx on Redis; on the memory store Guard is refused
// (sleeplock.ErrUnsupported).
func (t *Term) Guard(ctx context.Context, tx any) error { return t.Lease().Guard(ctx, tx) }

// Proclaim changes the value the term advertises, keeping the term and
// its token; observers see a Changed event. ErrNotLeader once the term has
// ended; a *sleeplock.InvalidError for a value that is too long or has
// control characters.
func (t *Term) Proclaim(ctx context.Context, v string) error {
	if err := checkValue(v); err != nil {
		return err
	}
	if t == nil || t.e == nil {
		return errNoTerm
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.ended(); err != nil {
		return err
	}
	r, ok := t.e.locks.Store().(store.Relabeler)
	if !ok {
		return fmt.Errorf("%w: Proclaim needs a store.Relabeler", store.ErrUnsupported)
	}
	h := store.Handle{Lock: store.Lock{Name: t.e.name, Token: t.Token()}, Ref: store.RefOf(t.lease.Ref())}
	if err := r.Relabel(ctx, h, v); err != nil {
		if errors.Is(err, store.ErrNotHeld) {
			return fmt.Errorf("%w: %w", ErrNotLeader, err)
		}
		return err
	}
	t.value = v
	t.proclaims++
	t.e.announce(ctx, t.snapshotLocked())
	return nil
}

// ended returns ErrNotLeader when the term has ended (t.mu held).
func (t *Term) ended() error {
	if t.resigned {
		return fmt.Errorf("%w: resigned", ErrNotLeader)
	}
	if err := t.lease.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return nil
}

// Resign ends the term and hands leadership to the next candidate at
// once, without waiting for the TTL. It is idempotent: after the term
// ended (resigned, lost, taken over) it returns nil. When the store cannot
// be reached it returns the error and the term stays held there until its
// lease expires (Done closes by then): Resign may be called again.
func (t *Term) Resign(ctx context.Context) error {
	if t == nil || t.e == nil {
		return errNoTerm
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.resigned {
		return nil
	}
	err := t.lease.Release(ctx)
	if err != nil && !errors.Is(err, store.ErrNotHeld) {
		return err
	}
	t.resigned = true
	if err == nil {
		// What follows: the next candidate, granted by the release, or
		// nobody. One read by the leader, so observers need none.
		msg := ""
		if v, rerr := t.e.read(ctx); rerr == nil {
			msg = encode(v, t.Token())
		}
		t.e.announceMsg(ctx, msg)
	}
	return nil
}

// snapshot returns the term as a view of the election.
func (t *Term) snapshot() view {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.snapshotLocked()
}

func (t *Term) snapshotLocked() view {
	v := view{leads: true, seq: t.proclaims,
		leader: Leader{ID: t.id, Value: t.value, Token: t.Token(), Since: t.lease.Acquired(), Expires: t.lease.Expires()}}
	if !v.leader.Expires.IsZero() && !v.leader.Since.IsZero() {
		v.left = v.leader.Expires.Sub(v.leader.Since)
	} else {
		v.left = t.e.ttl
	}
	return v
}
