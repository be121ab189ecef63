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

// waitClock returns the time to date a wait by (read as waitNano when a
// caller queues and when it is granted, only to measure the wait between
// (Stats; an event's Waited) and, in State, how long it has waited), and
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

// waitNano is waitClock as the time since monoBase: the reading a queued
// caller keeps (waiter.queued), without the time.Time that waitClock
// makes of it (Time.Add costs about as much again as the clock read).
// Never 0 (0 is "not read", see waiter.queued); a reading d and
// waitTime(d) are the same instant.
func (s *Store) waitNano() time.Duration {
	if s.sysClock {
		return time.Since(monoBase)
	}
	if d := s.clock.Now().Sub(monoBase); d != 0 {
		return d
	}
	return 1
}

// waitTime is the time of a waitNano reading (the zero time for 0).
func waitTime(d time.Duration) time.Time {
	if d == 0 {
		return time.Time{}
	}
	return monoBase.Add(d)
}
