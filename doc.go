// Package sleeplock provides named concurrency locks: a lock has a name and
// a number of slots; callers take a slot, do their work and give it back.
// When all slots are taken, callers wait in FIFO order (Acquire, bounded by
// their context) or are refused at once (TryAcquire, NoWait).
//
// The same API works in one process (package memstore, the default),
// across the processes of one host (package sqlitestore: a SQLite file)
// and across many nodes (package pgstore: PostgreSQL, with leases judged
// on the database's clock). Every store passes the conformance suite in
// package storetest. Leases have no TTL by default on the memory store
// and DefaultTTL on the others (see New).
//
// # Locks and families
//
// Define creates a lock with a number of slots; a name ending in "/*"
// defines a family whose members ("chat/42") are created on first use. A
// name that no definition covers is ErrNotFound.
//
// # Leases
//
// Acquire, TryAcquire and AcquireAll return a Lease: the held slot(s), the
// holder's ref and kind, a fencing token per lock, and, with a TTL, an
// expiry. Release gives the slot back; a release that finds nothing to free
// reports ErrNotHeld and never frees another holder's slot. A lease with a
// TTL is renewed automatically every third of its TTL while held; if it is
// lost (taken over after expiry, released by someone naming its ref, or not
// renewable before it expired) its Done channel closes, its Context is
// cancelled with a cause matching ErrLeaseLost, and an EventLost is sent.
//
// # Re-entrancy
//
// A caller whose ref (Ref) holds a lock already gets its lease back at
// once, with no new slot and no event, even when all slots are taken; one
// release frees it unless the acquisitions were Counted.
//
// # All or nothing
//
// AcquireAll takes one slot of each of several locks in one atomic step, or
// none; refused, it reports the first lock in the caller's order that could
// not be taken and the kind of its holder (a *BusyError). Callers naming the
// same locks in different orders never deadlock. On Redis Cluster the locks
// must share a root, the name up to its first "/" (a *ShardError otherwise).
//
// # Events
//
// A Notifier receives created, acquired, released and waiting events, each
// with the lock's state after the change, plus refused, expired, lost,
// resized and deleted, with durations. Given to WithNotifier it runs on a goroutine of
// the package's, off the lock path; given to WithInlineNotifier it runs on
// the lock path, for cheap notifiers such as metric counters. A notifier
// that panics is recovered and counted (Locks.NotifierPanics).
//
// # Errors
//
// Input that breaks a rule is an *InvalidError matching ErrInvalid and one
// of ErrInvalidName, ErrInvalidSlots, ErrInvalidTTL, ErrInvalidHold,
// ErrInvalidLocks and ErrInvalidRef; nothing changes. No input makes the
// package panic.
package sleeplock
