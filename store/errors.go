package store

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors. Package sleeplock re-exports each of them under the same
// name, so errors.Is works whichever package the caller names.
var (
	// ErrNotFound: the lock has no definition and no family covers it (the
	// seed's :lock_not_found).
	ErrNotFound = errors.New("sleeplock: lock not found")
	// ErrUnavailable: a try (or an all-or-nothing acquisition that was told
	// not to wait) was refused. The error is a *BusyError that says which lock
	// and what holds it.
	ErrUnavailable = errors.New("sleeplock: lock unavailable")
	// ErrNotHeld: the lease is not (or no longer) held by its ref. Reported
	// by a release or renewal that changed nothing.
	ErrNotHeld = errors.New("sleeplock: lease not held")
	// ErrInUse: a Delete of a lock that is held or has waiters. The error
	// is an *InUseError that counts them.
	ErrInUse = errors.New("sleeplock: lock in use")
	// ErrAlreadyDefined: a lock of that name exists with other slots.
	ErrAlreadyDefined = errors.New("sleeplock: lock already defined")
	// ErrClosed: the store (or the Locks) was closed.
	ErrClosed = errors.New("sleeplock: closed")
	// ErrLeaseLost is the cause of a lease's context when the lease was lost:
	// taken over after its TTL, released by someone else, or not renewed in time.
	ErrLeaseLost = errors.New("sleeplock: lease lost")
	// ErrReleased is the cause of a lease's context after the lease was
	// released by its holder.
	ErrReleased = errors.New("sleeplock: lease released")
	// ErrUnsupported: the store cannot do what was asked (for example
	// Lease.Guard on a store without transactions, or a call spanning the
	// shards of a Sharder: a *ShardError).
	ErrUnsupported = errors.New("sleeplock: not supported by this store")

	// ErrInvalid matches every *InvalidError.
	ErrInvalid = errors.New("sleeplock: invalid input")
	// ErrInvalidName: a lock name is empty, longer than MaxNameBytes, not
	// UTF-8 or has a control character.
	ErrInvalidName = errors.New("sleeplock: invalid lock name")
	// ErrInvalidSlots: slots is not between 1 and MaxSlots.
	ErrInvalidSlots = errors.New("sleeplock: invalid slots")
	// ErrInvalidTTL: a TTL that is not positive.
	ErrInvalidTTL = errors.New("sleeplock: invalid ttl")
	// ErrInvalidHold: a hold that is not positive or longer than the TTL.
	ErrInvalidHold = errors.New("sleeplock: invalid hold")
	// ErrInvalidLocks: an all-or-nothing request with no locks or the same
	// lock twice.
	ErrInvalidLocks = errors.New("sleeplock: invalid lock list")
	// ErrInvalidWeight: a weight that is not between 1 and MaxSlots.
	ErrInvalidWeight = errors.New("sleeplock: invalid weight")
	// ErrTooHeavy: a weight larger than the lock's slots, which could
	// never be granted. The error is a *WeightError.
	ErrTooHeavy = errors.New("sleeplock: weight larger than the lock's slots")
	// ErrInvalidRef: a holder ref or kind that is too long or has control
	// characters.
	ErrInvalidRef = errors.New("sleeplock: invalid ref")
	// ErrInvalidConfig: a configuration (file, DSN or option) that cannot be used.
	ErrInvalidConfig = errors.New("sleeplock: invalid configuration")
)

// NotFound returns the error of a name that no definition covers, matching
// ErrNotFound, with a hint of the family that would cover it. Every store
// uses it, so the text is the same whichever store answers.
func NotFound(name string) error {
	hint := name + FamilySuffix
	if i := strings.LastIndexByte(name, '/'); i > 0 {
		hint = name[:i] + FamilySuffix
	}
	return fmt.Errorf("%w: %q (Define it, or define a family such as %q)", ErrNotFound, name, hint)
}

// NotResizable returns the error of a Resize of a name that is not a
// defined lock or family, matching ErrNotFound.
func NotResizable(name string) error {
	return fmt.Errorf("%w: %q (only a defined lock or family can be resized)", ErrNotFound, name)
}

// NotDeletable returns the error of a Delete of a name that is not a
// defined lock or family, matching ErrNotFound.
func NotDeletable(name string) error {
	return fmt.Errorf("%w: %q (only a defined lock or family can be deleted; a family member goes with its family)", ErrNotFound, name)
}

// DeletedWhileWaiting returns the error of a caller that waited for lock
// name when a forced Delete deleted it, matching ErrNotFound. A store
// whose waiters learn it by looking the name up again returns NotFound's
// error instead, which matches ErrNotFound too.
func DeletedWhileWaiting(name string) error {
	return fmt.Errorf("%w: %q was deleted while the caller waited", ErrNotFound, name)
}

// DeletedHold returns the reason a hold of lock name ended when a forced
// Delete deleted the lock: released by another, matching ErrLeaseLost.
func DeletedHold(name string) error {
	return fmt.Errorf("%w: released by another caller: lock %q was deleted", ErrLeaseLost, name)
}

// GuardLost returns the error of a Guard whose handle's ref no longer
// holds lock name with token (released, or taken over), matching
// ErrLeaseLost. Every store that implements Guarder uses it, so the text is
// the same whichever store answers.
func GuardLost(name string, token int64) error {
	return fmt.Errorf("%w: %q is no longer held by its ref (token %d)", ErrLeaseLost, name, token)
}

// InUseError reports a Delete refused because the lock (or a member of
// the family) is in use; nothing changed. It matches ErrInUse.
type InUseError struct {
	Lock    string // the lock in use (for a family, the first member in use, by name)
	Holders int    // holds of the lock (of every member, for a family), live or past their expiry
	Waiters int    // callers waiting for it (for every member, for a family)
}

func (e *InUseError) Error() string {
	if e == nil {
		return ErrInUse.Error()
	}
	return fmt.Sprintf("sleeplock: lock %q is in use: %d %s, %d %s (release them, or delete with force)",
		e.Lock, e.Holders, plural(e.Holders, "holder", "holders"), e.Waiters, plural(e.Waiters, "waiter", "waiters"))
}

// Unwrap returns ErrInUse.
func (e *InUseError) Unwrap() error { return ErrInUse }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// InvalidError reports input that was refused before anything changed. It
// matches ErrInvalid and its Kind (one of the ErrInvalid* sentinels) with
// errors.Is.
type InvalidError struct {
	Kind  error  // ErrInvalidName, ErrInvalidSlots, …
	Value string // the offending value, quoted as given
	Rule  string // the rule it breaks, in words
}

func (e *InvalidError) Error() string {
	if e == nil || e.Kind == nil {
		return ErrInvalid.Error()
	}
	return e.Kind.Error() + " " + e.Value + ": " + e.Rule
}

// Unwrap returns the kind and ErrInvalid.
func (e *InvalidError) Unwrap() []error {
	if e == nil || e.Kind == nil {
		return []error{ErrInvalid}
	}
	return []error{e.Kind, ErrInvalid}
}

// Invalid builds an *InvalidError.
func Invalid(kind error, value, rule string) error {
	return &InvalidError{Kind: kind, Value: value, Rule: rule}
}

// ConflictError reports a Define of an existing name with other slots. It
// matches ErrAlreadyDefined.
type ConflictError struct {
	Name      string
	Slots     int // the existing definition
	Requested int
}

func (e *ConflictError) Error() string {
	if e == nil {
		return ErrAlreadyDefined.Error()
	}
	return fmt.Sprintf("sleeplock: lock %q already defined with %d %s (asked for %d; use Resize to change it)",
		e.Name, e.Slots, plural(e.Slots, "slot", "slots"), e.Requested)
}

// Unwrap returns ErrAlreadyDefined.
func (e *ConflictError) Unwrap() error { return ErrAlreadyDefined }

// BusyError reports a refused acquisition: the first lock, in the caller's
// order, that could not be taken and what holds it. It matches
// ErrUnavailable.
type BusyError struct {
	Lock    string    // the refused lock
	Kind    string    // kind of (one of) its holders; "" when none was given or when only the queue refused
	Ref     string    // ref of that holder, "" when only the queue refused
	Expires time.Time // when that holder's lease expires on the store's clock; zero: never
	Queued  bool      // refused because others wait in the queue, not because slots are full
	// Weight is the slots the refused request asked of Lock (the lock's
	// slots for an exclusive request), Free the slots of Lock that no live
	// lease held when it was refused, and Slots the slots Lock has. A
	// weighted request may be refused with slots free: fewer than it asks.
	// All three are 0 when the refusal is not about slots (ReenterAll).
	Weight, Free, Slots int
}

func (e *BusyError) Error() string {
	if e == nil {
		return ErrUnavailable.Error()
	}
	s := "sleeplock: lock " + strconv.Quote(e.Lock) + " unavailable"
	numbers := ""
	if e.Slots > 0 && (e.Free > 0 || e.Weight > 1) {
		numbers = fmt.Sprintf("%d asked, %d of %d free", e.Weight, e.Free, e.Slots)
	}
	switch {
	case e.Queued && e.Ref == "":
		s += ": others are waiting"
		if numbers != "" {
			s += " (" + numbers + ")"
		}
		return s
	case numbers != "":
		s += ": " + numbers
		if e.Kind != "" {
			s += ", held by a " + e.Kind
		}
	case e.Kind != "":
		s += ": held by a " + e.Kind
	default:
		s += ": all slots are held"
	}
	return s
}

// Busy returns the refusal of a request of weight (WeightAll: every slot)
// for a lock of slots slots of which used are taken by live leases: a
// *BusyError with Lock, Weight, Free and Slots set. Every store uses it,
// so that the numbers mean the same whichever store answers.
func Busy(lock string, weight, slots, used int) *BusyError {
	return &BusyError{Lock: lock, Weight: Need(weight, slots), Free: max(slots-used, 0), Slots: slots}
}

// Unwrap returns ErrUnavailable.
func (e *BusyError) Unwrap() error { return ErrUnavailable }

// WeightError reports a request for more slots than a lock has: refused
// at once (it could never be granted), or, for a caller waiting in the
// queue, ended when a Resize left the lock with fewer slots than it asks.
// It matches ErrTooHeavy.
type WeightError struct {
	Lock    string // the lock
	Weight  int    // the slots asked
	Slots   int    // the slots the lock has
	Resized bool   // the caller was waiting and a Resize made the lock too small
}

func (e *WeightError) Error() string {
	if e == nil {
		return ErrTooHeavy.Error()
	}
	s := fmt.Sprintf("sleeplock: lock %q has %d %s, fewer than the %d asked", e.Lock, e.Slots, plural(e.Slots, "slot", "slots"), e.Weight)
	if e.Resized {
		s += " (resized while waiting)"
	}
	return s
}

// Unwrap returns ErrTooHeavy.
func (e *WeightError) Unwrap() error { return ErrTooHeavy }
