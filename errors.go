package sleeplock

import "github.com/sleeplock/sleeplock/store"

// Errors. Each matches with errors.Is; the typed ones with errors.As.
var (
	ErrNotFound       = store.ErrNotFound       // no definition or family covers the name
	ErrUnavailable    = store.ErrUnavailable    // a try or no-wait acquisition was refused (a *BusyError)
	ErrNotHeld        = store.ErrNotHeld        // release or renewal of a lease its ref no longer holds
	ErrAlreadyDefined = store.ErrAlreadyDefined // Define of an existing name with other slots (a *ConflictError)
	ErrInUse          = store.ErrInUse          // Delete of a lock that is held or waited for (an *InUseError)
	ErrClosed         = store.ErrClosed         // the Locks or its store was closed
	ErrLeaseLost      = store.ErrLeaseLost      // cause of a lease's context when the lease was lost
	ErrReleased       = store.ErrReleased       // cause of a lease's context after its release
	ErrUnsupported    = store.ErrUnsupported    // the store cannot do what was asked
	ErrTooHeavy       = store.ErrTooHeavy       // a weight larger than the lock's slots (a *WeightError)

	ErrInvalid       = store.ErrInvalid       // matches every *InvalidError
	ErrInvalidName   = store.ErrInvalidName   // empty, too long, not UTF-8, control characters
	ErrInvalidSlots  = store.ErrInvalidSlots  // slots not in 1..1,000,000
	ErrInvalidTTL    = store.ErrInvalidTTL    // a TTL that is not positive
	ErrInvalidHold   = store.ErrInvalidHold   // a hold not positive or longer than the TTL
	ErrInvalidLocks  = store.ErrInvalidLocks  // AcquireAll with no locks or a lock twice
	ErrInvalidWeight = store.ErrInvalidWeight // a weight not in 1..1,000,000
	ErrInvalidRef    = store.ErrInvalidRef    // a ref or kind too long or with control characters
	ErrInvalidConfig = store.ErrInvalidConfig // a config file, DSN or option that cannot be used
)

// BusyError is the error of a refused acquisition: the first refused lock
// in the caller's order and what holds it (Kind, Ref).
type BusyError = store.BusyError

// InvalidError is the error of refused input: what kind of input, the value
// and the rule it breaks. Nothing changed.
type InvalidError = store.InvalidError

// WeightError is the error of a weight larger than the lock's slots:
// refused at once, or ending a waiter that a Resize left too heavy.
type WeightError = store.WeightError

// InUseError is the error of a Delete refused because the lock (or a
// member of the family) is held or waited for: it counts them. Nothing
// changed.
type InUseError = store.InUseError

// ConflictError is the error of a Define whose name exists with other slots.
type ConflictError = store.ConflictError

// ShardError is the error of a call that a store keeping locks on several
// servers (Redis Cluster) refused because it would span them: an
// AcquireAll, a lease of several locks or an Apply naming locks of
// several shards, or an Apply with Prune. Nothing changed. It matches
// ErrUnsupported.
type ShardError = store.ShardError
