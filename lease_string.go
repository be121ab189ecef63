package sleeplock

import (
	"strconv"
	"strings"
)

// String describes the lease for logs and debugging: its lock(s), ref,
// kind (when given), fencing token(s) and weight, as in
//
//	lease of "payments" (ref "job-1", kind "batch", token 42, weight 1)
//	lease of "chat/42", "user/7" (ref "turn-81", tokens 17, 9, weight 1)
//
// The zero Lease is "lease of nothing". String reads no store.
func (x Lease) String() string {
	if x.x == nil && x.plk == nil {
		return "lease of nothing"
	}
	names := x.Names()
	var b strings.Builder
	b.WriteString("lease of ")
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(n))
	}
	b.WriteString(" (ref " + strconv.Quote(x.Ref()))
	if k := x.Kind(); k != "" {
		b.WriteString(", kind " + strconv.Quote(k))
	}
	if len(names) > 1 {
		b.WriteString(", tokens ")
		for i, t := range x.Tokens() {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.FormatInt(t, 10))
		}
	} else {
		b.WriteString(", token " + strconv.FormatInt(x.Token(), 10))
	}
	b.WriteString(", weight " + strconv.Itoa(x.Weight()) + ")")
	return b.String()
}
