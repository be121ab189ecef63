package storetest

import "time"

// deadlineSoon is a deadline for a wait that must end by its deadline; how
// soon does not matter to the test.
func deadlineSoon() time.Time { return time.Now().Add(50 * time.Millisecond) }
