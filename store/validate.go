package store

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits on input.
const (
	MaxNameBytes = 200       // longest lock name, in bytes
	MaxSlots     = 1_000_000 // most slots a lock may have
	MaxRefBytes  = 200       // longest holder ref or kind, in bytes
	// FamilySuffix ends the name of a family definition: "chat/*" covers
	// "chat/42", "chat/43/x", …
	FamilySuffix = "/*"
)

const nameRule = "a lock name must be 1 to 200 bytes of UTF-8 with no control characters"

// CheckName validates a lock name as used in an acquisition or a state
// query: family patterns ("chat/*") are not lock names.
func CheckName(name string) error {
	if err := checkText(name, MaxNameBytes); err != "" {
		return Invalid(ErrInvalidName, strconv.Quote(clip(name)), nameRule+" ("+err+")")
	}
	if strings.HasSuffix(name, FamilySuffix) {
		return Invalid(ErrInvalidName, strconv.Quote(clip(name)), "a name ending in \"/*\" is a family pattern: give it to Define, acquire a member such as \"chat/42\"")
	}
	return nil
}

// CheckDefinition validates a name given to Define (a lock, or a family
// pattern "prefix/*") and its slots.
func CheckDefinition(name string, slots int) error {
	if err := checkText(name, MaxNameBytes); err != "" {
		return Invalid(ErrInvalidName, strconv.Quote(clip(name)), nameRule+" ("+err+")")
	}
	if name == FamilySuffix || (strings.HasSuffix(name, FamilySuffix) && strings.HasSuffix(strings.TrimSuffix(name, FamilySuffix), "/")) {
		return Invalid(ErrInvalidName, strconv.Quote(name), "a family pattern is a non-empty prefix followed by \"/*\"")
	}
	return CheckSlots(slots)
}

// CheckDefinitions validates every entry of defs (CheckDefinition) and
// refuses a name given twice with other slots: a *ConflictError naming
// the later entry's slots as Requested. It returns each name's slots.
func CheckDefinitions(defs []Definition) (map[string]int, error) {
	seen := make(map[string]int, len(defs))
	for _, d := range defs {
		if err := CheckDefinition(d.Name, d.Slots); err != nil {
			return nil, err
		}
		if have, ok := seen[d.Name]; ok && have != d.Slots {
			return nil, &ConflictError{Name: d.Name, Slots: have, Requested: d.Slots}
		}
		seen[d.Name] = d.Slots
	}
	return seen, nil
}

// CheckSlots validates a number of slots.
func CheckSlots(slots int) error {
	if slots < 1 || slots > MaxSlots {
		return Invalid(ErrInvalidSlots, strconv.Itoa(slots), "slots must be a positive integer no larger than 1000000")
	}
	return nil
}

// CheckWeight validates a weight: 1 to MaxSlots, or WeightAll (0 is taken
// as 1 by AcquireRequest.WeightOf, but a caller's Weight(0) is refused).
func CheckWeight(weight int) error {
	if weight == WeightAll || (weight >= 1 && weight <= MaxSlots) {
		return nil
	}
	return Invalid(ErrInvalidWeight, strconv.Itoa(weight), "a weight must be a positive integer no larger than 1000000")
}

// CheckRef validates a caller-given holder ref or kind (what says which).
func CheckRef(what, s string) error {
	if s == "" {
		return nil
	}
	if err := checkText(s, MaxRefBytes); err != "" {
		return Invalid(ErrInvalidRef, strconv.Quote(clip(s)), "a "+what+" must be at most 200 bytes of UTF-8 with no control characters ("+err+")")
	}
	return nil
}

// CheckTTL validates a TTL and a hold: ttl > 0 (or 0 where allowZero says
// "never expires" is allowed) and 0 < hold <= ttl (hold 0 means "the TTL").
func CheckTTL(ttl, hold time.Duration, allowZero bool) error {
	if ttl < 0 || (ttl == 0 && !allowZero) {
		return Invalid(ErrInvalidTTL, ttl.String(), "a TTL must be positive")
	}
	if hold < 0 {
		return Invalid(ErrInvalidHold, hold.String(), "a hold must be positive")
	}
	if hold > 0 && ttl == 0 {
		return Invalid(ErrInvalidHold, hold.String(), "a hold needs a TTL to be shorter than")
	}
	if hold > ttl {
		return Invalid(ErrInvalidHold, hold.String(), "a hold must not be longer than the TTL ("+ttl.String()+")")
	}
	return nil
}

// CheckNames validates the lock list of an all-or-nothing request: at least
// one lock, each a valid name, none twice.
func CheckNames(names []string) error {
	if len(names) == 0 {
		return Invalid(ErrInvalidLocks, "[]", "name at least one lock")
	}
	for i, n := range names {
		if err := CheckName(n); err != nil {
			return err
		}
		for _, m := range names[:i] {
			if m == n {
				return Invalid(ErrInvalidLocks, strconv.Quote(n), "a lock may appear only once in a request")
			}
		}
	}
	return nil
}

func checkText(s string, max int) string {
	if s != "" && len(s) <= max {
		ascii := true
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c >= 0x7f {
				ascii = false
				break
			}
		}
		if ascii {
			return ""
		}
	}
	switch {
	case s == "":
		return "empty"
	case len(s) > max:
		return strconv.Itoa(len(s)) + " bytes"
	case !utf8.ValidString(s):
		return "not UTF-8"
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return "control character " + strconv.QuoteRune(r)
		}
	}
	return ""
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// FamilyOf returns the family patterns that could cover name, most specific
// first: "a/b/c" → "a/b/*", "a/*".
func FamilyOf(name string, yield func(pattern string) bool) {
	if yield == nil {
		return
	}
	for i := len(name) - 1; i > 0; i-- {
		if name[i] == '/' && i < len(name)-1 {
			if !yield(name[:i] + FamilySuffix) {
				return
			}
		}
	}
}
