package sleeplock

// ReenterAll makes AcquireAll re-enter only as a whole: a ref that holds
// some of the locks but not all of them is refused at once, in the same
// atomic step as the acquisition, with a *BusyError naming the first lock
// of names that it holds (and that hold's kind). A ref that holds them all
// gets its lease back (re-entrancy); one that holds none acquires as usual.
func ReenterAll() AcquireOption { return func(c *acquireConfig) { c.reenterAll = true } }
