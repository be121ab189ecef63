package cli

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The demo prints "Queued [i]" once task i has joined the queue, so the
// Lock lines (FIFO) come in the Queued order, each after its Queued line.
func TestDemoLockOrderIsQueuedOrder(t *testing.T) {
	for _, tc := range []struct{ tasks, slots int }{{6, 2}, {12, 3}, {5, 1}} {
		out, errOut, code := run(t, "demo", "-tasks", strconv.Itoa(tc.tasks), "-slots", strconv.Itoa(tc.slots), "-work", "2ms", "-jitter", "1ms")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		line := regexp.MustCompile(`^(Queued|Lock|Release) +\[(\d+)\] at: `)
		var queued, locked []int
		var want []int
		for i := 1; i <= tc.tasks; i++ {
			want = append(want, i)
		}
		for _, l := range strings.Split(out, "\n") {
			m := line.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			idx, _ := strconv.Atoi(m[2])
			switch m[1] {
			case "Queued":
				queued = append(queued, idx)
			case "Lock":
				if !slices.Contains(queued, idx) {
					t.Errorf("Lock [%d] before Queued [%d]:\n%s", idx, idx, out)
				}
				locked = append(locked, idx)
			}
		}
		if !slices.Equal(queued, want) || !slices.Equal(locked, queued) {
			t.Errorf("%d tasks, %d slots: Queued %v, Lock %v; want both %v\n%s", tc.tasks, tc.slots, queued, locked, want, out)
		}
		if !strings.Contains(out, fmt.Sprint(want)+"\n") {
			t.Errorf("results not %v:\n%s", want, out)
		}
	}
}
