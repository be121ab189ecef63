package pgstore

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sleeplock/sleeplock/store"
)

// The values the SQL takes and gives: times in microseconds (µs since the
// epoch for instants), arrays as their text.

func micros(d time.Duration) int64 { return d.Microseconds() }

// usTime scans a timestamptz as µs since the epoch, 0 for NULL, as micros()
// of sql/common.sql gives it: the bare statements of queries/ return their
// instants as they are, since micros() would cost each a numeric function
// call on the server. It is a pgtype.TimestamptzScanner for pgx (no
// allocation) and an sql.Scanner for database/sql, whose PostgreSQL
// drivers give a timestamptz as a time.Time.
type usTime int64

// ScanTimestamptz implements pgtype.TimestamptzScanner.
func (u *usTime) ScanTimestamptz(v pgtype.Timestamptz) error {
	switch {
	case !v.Valid:
		*u = 0
	case v.InfinityModifier != pgtype.Finite:
		return fmt.Errorf("pgstore: an infinite timestamp (%v) where an instant was expected", v.InfinityModifier)
	default:
		*u = usTime(v.Time.UnixMicro())
	}
	return nil
}

// Scan implements sql.Scanner.
func (u *usTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*u = 0
	case time.Time:
		*u = usTime(v.UnixMicro())
	default:
		return fmt.Errorf("pgstore: a %T where a timestamptz was expected", src)
	}
	return nil
}

// asTime is p as a *usTime, to scan a timestamptz into an int64 field.
func asTime(p *int64) *usTime { return (*usTime)(p) }

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
