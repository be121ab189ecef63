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
