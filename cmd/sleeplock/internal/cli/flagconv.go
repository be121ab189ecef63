package cli

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// parseDuration is the one parser of every duration flag: a Go duration
// ("10m", "1.5s") or, as flock -w, a number of seconds ("5", ".5").
// Negative values parse; each flag says what it allows.
func parseDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) || math.Abs(secs) > math.MaxInt64/float64(time.Second) {
		return 0, fmt.Errorf("want a duration (10m, 1.5s) or seconds (5, 0.5), got %q", s)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// durationValue is a duration flag parsed by parseDuration.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// durationVar defines a duration flag that takes seconds as well as Go
// durations (parseDuration).
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationValue{p}, name, usage)
}

// duration is durationVar that returns the variable.
func duration(fs *flag.FlagSet, name string, value time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	durationVar(fs, p, name, value, usage)
	return p
}

// MinTTL is the shortest --ttl that run and elect take. The lease is
// renewed every third of it, and the command is ended --grace (at most
// half of it) before it expires: below a second, one slow round trip to
// the store loses the lease.
const MinTTL = time.Second

// checkTTL refuses a --ttl that is not positive or is below MinTTL,
// naming the floor.
func checkTTL(ttl time.Duration) error {
	if ttl < MinTTL {
		return usagef("--ttl %v: a TTL is at least %v (the lease is renewed every third of it)", ttl, MinTTL)
	}
	return nil
}

// commandAliases are names users reach for that mean another command.
var commandAliases = map[string]string{
	"status": "state", "list": "state", "ls": "state", "show": "state", "ps": "state",
	"lock": "run", "exec": "run", "flock": "run",
	"rm": "delete", "remove": "delete", "unlock": "release",
	"leaders": "leader", "campaign": "elect",
}

// suggest returns the command that name most likely meant ("" if none):
// a known alias, else the command nearest by edit distance, at most 2
// edits away (and fewer than half of name's letters).
func suggest(name string) string {
	if c, ok := commandAliases[strings.ToLower(name)]; ok {
		return c
	}
	best, bestD := "", 3
	for c := range commands {
		if d := editDistance(strings.ToLower(name), c); d < bestD || d == bestD && c < best {
			best, bestD = c, d
		}
	}
	if best == "" || 2*bestD >= len(name) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// didYouMean is ": did you mean X?" for the command X that name likely
// meant, or "".
func didYouMean(name string) string {
	if c := suggest(name); c != "" {
		return fmt.Sprintf("; did you mean %s?", c)
	}
	return ""
}
