package memstore

import "time"

// Clock is the memory store's time source. The default is the system clock;
// tests give a fake one to make time pass without sleeping.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f on its own goroutine once d has passed, unless the
	// returned stop function is called first (stop reports whether it
	// prevented the call).
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// monoBase is a reading of the system clock taken as the package starts
// (see waitClock).
var monoBase = time.Now()

// waitClock returns the time to date a wait by, read once when a caller
// queues and once when it is granted, only to measure the wait between
// (Stats; an event's Waited) and, in State, how long it has waited; and
// the ends of a sampled hold (see HoldSampling), only to measure it: on
// the system clock, monoBase moved on by the monotonic clock alone, one
// read where time.Now makes two (the wall clock's too; on some machines
// each costs more than a grant). Durations between such times, and
// between them and time.Now's, are the monotonic clock's, as time.Now's
// are; only their wall reading may drift from the wall clock (if it was
// set since monoBase), which State corrects (see state).
func (s *Store) waitClock() time.Time {
	if s.sysClock {
		return monoBase.Add(time.Since(monoBase))
	}
	return s.clock.Now()
}
