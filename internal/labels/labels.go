// Package labels turns lock names into metric labels of bounded
// cardinality, for the Prometheus and OpenTelemetry adapters.
package labels

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sleeplock/sleeplock/store"
)

// Other is the label of the locks that came after a Set was full.
const Other = "(other)"

// Family is the default mapper: a name with a "/" is reported under its
// top-level family ("chat/42" and "chat/7/x" → "chat/*", which is also the
// label of the family definition "chat/*"); a name without one is its own
// label ("payments").
func Family(name string) string {
	if i := strings.IndexByte(name, '/'); i >= 0 {
		return name[:i+1] + "*"
	}
	return name
}

// familyKey is Family's cache key: the name up to its first "/" included,
// a substring of name (no allocation).
func familyKey(name string) string {
	if i := strings.IndexByte(name, '/'); i >= 0 {
		return name[:i+1]
	}
	return name
}

// Set keeps one *T per label, at most max labels; names whose label comes
// after the Set is full share the label Other. It is safe for concurrent
// use and does not allocate for a label it has seen.
type Set[T any] struct {
	mapper func(string) string // nil: Family
	max    int
	make   func(label string) *T

	m     sync.Map // key (familyKey(name) or mapper(name)) → *T
	mu    sync.Mutex
	n     atomic.Int64
	other atomic.Pointer[T]
}

// NewSet returns a Set that maps names with mapper (nil: Family), keeps at
// most max labels (≤ 0: 1000) and makes a label's value with mk.
func NewSet[T any](mapper func(string) string, max int, mk func(label string) *T) *Set[T] {
	if max <= 0 {
		max = 1000
	}
	return &Set[T]{mapper: mapper, max: max, make: mk}
}

// Get returns the value of name's label, making it on first use.
func (s *Set[T]) Get(name string) *T {
	var key string
	if s.mapper == nil {
		key = familyKey(name)
	} else {
		key = s.mapper(name)
	}
	if v, ok := s.m.Load(key); ok {
		return v.(*T)
	}
	return s.slow(name, key)
}

func (s *Set[T]) slow(name, key string) *T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m.Load(key); ok {
		return v.(*T)
	}
	if s.n.Load() >= int64(s.max) {
		if o := s.other.Load(); o != nil {
			return o
		}
		o := s.make(Other)
		s.other.Store(o)
		return o
	}
	label := key
	if s.mapper == nil {
		label = Family(name)
	}
	v := s.make(label)
	s.m.Store(strings.Clone(key), v)
	s.n.Add(1)
	return v
}

// Len reports how many labels the Set holds, Other included.
func (s *Set[T]) Len() int {
	n := int(s.n.Load())
	if s.other.Load() != nil {
		n++
	}
	return n
}

// Sum is the stats of the locks under one label.
type Sum[T any] struct {
	Label *T
	Stats store.Stats
}

// Sums adds up all (one Locks.Stats) by label, in the order the labels
// first appear.
func (s *Set[T]) Sums(all []store.Stats) []Sum[T] {
	at := make(map[*T]int)
	var sums []Sum[T]
	for i := range all {
		l := s.Get(all[i].Name)
		j, ok := at[l]
		if !ok {
			j = len(sums)
			at[l] = j
			sums = append(sums, Sum[T]{Label: l})
		}
		sums[j].Stats.Add(&all[i])
	}
	return sums
}

// Election is the counts of one election (package election): its lock's
// Stats read as terms and takeovers.
type Election struct {
	Name string
	// Terms counts the terms begun: the grants of the election's lock
	// (Stats.Acquisitions). Each is a change of leader, since a campaign
	// is a candidate of its own: a candidate that campaigns again after
	// its term ended (election.Run, sleeplock elect --again) begins a new
	// term, with a new token, and counts again.
	Terms uint64
	// Takeovers counts the terms that ended without their leader
	// resigning, taken over after their TTL (Stats.Expiries): the changes
	// forced on a leader that stopped renewing (died, paused, cut off).
	Takeovers uint64
}

// Elections returns the counts of the elections names, in that order,
// from all (one Locks.Stats): 0 for an election whose lock is not
// defined yet (nobody campaigned).
func Elections(all []store.Stats, names []string) []Election {
	out := make([]Election, len(names))
	for i, n := range names {
		out[i].Name = n
		// all is sorted by name (store.StatsReader).
		j, ok := slices.BinarySearchFunc(all, n, func(s store.Stats, name string) int { return strings.Compare(s.Name, name) })
		if ok && !all[j].Family {
			out[i].Terms, out[i].Takeovers = all[j].Acquisitions, all[j].Expiries
		}
	}
	return out
}

// Distinct returns names sorted, each once.
func Distinct(names []string) []string {
	names = slices.Clone(names)
	slices.Sort(names)
	return slices.Compact(names)
}
