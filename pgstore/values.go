package pgstore

import (
	"strconv"
	"strings"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// The values the SQL takes and gives: times in microseconds (µs since the
// epoch for instants), arrays as their text.

func micros(d time.Duration) int64 { return d.Microseconds() }

// lease returns how long a grant or renewal lasts (the hold when shorter
// than the TTL) and how far its renewal time is dated back.
func lease(ttl, hold time.Duration) (length, back int64) {
	l := ttl
	if hold > 0 && hold < ttl {
		l = hold
	}
	return micros(l), micros(ttl - l)
}

// patterns returns name and the families that could cover it, most
// specific first, as an array literal.
func patterns(name string) string {
	ps := []string{name}
	store.FamilyOf(name, func(p string) bool {
		ps = append(ps, p)
		return true
	})
	return textArray(ps)
}

func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// textArray formats ss as a PostgreSQL array literal.
func textArray(ss []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for j := 0; j < len(s); j++ {
			if s[j] == '"' || s[j] == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(s[j])
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

func intArray(ns []int64) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range ns {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(n, 10))
	}
	b.WriteByte('}')
	return b.String()
}
