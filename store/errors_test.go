package store_test

import (
	"strings"
	"testing"

	"github.com/sleeplock/sleeplock/store"
)

// The errors that count say one thing in the singular and others in the
// plural (issue 42: "has 1 slots"), in the library's own words: the
// command line no longer corrects them.
func TestErrorCountsSingularAndPlural(t *testing.T) {
	for _, c := range []struct {
		err       error
		want, not string
	}{
		{&store.WeightError{Lock: "a", Weight: 2, Slots: 1}, `lock "a" has 1 slot, fewer than the 2 asked`, "1 slots"},
		{&store.WeightError{Lock: "a", Weight: 3, Slots: 2}, `lock "a" has 2 slots, fewer than the 3 asked`, ""},
		{&store.ConflictError{Name: "a", Slots: 1, Requested: 2}, `lock "a" already defined with 1 slot (asked for 2;`, "1 slots"},
		{&store.ConflictError{Name: "a", Slots: 3, Requested: 1}, `lock "a" already defined with 3 slots (asked for 1;`, ""},
		{&store.InUseError{Lock: "a", Holders: 1, Waiters: 1}, "in use: 1 holder, 1 waiter (", "1 holders"},
		{&store.InUseError{Lock: "a", Holders: 2, Waiters: 0}, "in use: 2 holders, 0 waiters (", ""},
	} {
		got := c.err.Error()
		if !strings.Contains(got, c.want) || (c.not != "" && strings.Contains(got, c.not)) {
			t.Errorf("%T: %q, want it to say %q", c.err, got, c.want)
		}
	}
}
