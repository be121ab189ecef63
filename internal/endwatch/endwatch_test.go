package endwatch

import (
	"errors"
	"fmt"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errGone = errors.New("gone")

func TestWatchBeforeAndAfterTheEnd(t *testing.T) {
	var s Set
	var got []error
	s.Watch("a", "r", 1, func(err error) { got = append(got, err) })
	s.Watch("a", "r", 2, func(err error) { t.Error("another token's watcher was called") })
	if len(got) != 0 {
		t.Fatal("called before the end")
	}
	s.Ended("a", "r", 1, errGone)
	s.Watch("a", "r", 1, func(err error) { got = append(got, err) }) // after the end: at once
	if len(got) != 2 || !errors.Is(got[0], errGone) || !errors.Is(got[1], errGone) {
		t.Fatalf("got %v", got)
	}
	s.Ended("a", "r", 1, errGone) // the watchers were forgotten: not called again
	if len(got) != 2 {
		t.Fatalf("called again: %v", got)
	}
}

func TestRemembersTheLastKeepEnds(t *testing.T) {
	var s Set
	for i := range Keep + 1 {
		s.Ended(fmt.Sprint("l", i), "r", 1, errGone)
	}
	called := false
	s.Watch("l0", "r", 1, func(error) { called = true })
	if called {
		t.Fatal("the oldest end was not forgotten")
	}
	s.Watch(fmt.Sprint("l", Keep), "r", 1, func(error) { called = true })
	if !called || len(s.ring) != Keep {
		t.Fatalf("called %v, remembered %d", called, len(s.ring))
	}
}

func TestLenCountsWatchedHoldsNotEnded(t *testing.T) {
	var s Set
	s.Watch("a", "r", 1, func(error) {})
	s.Watch("a", "r", 1, func(error) {})
	s.Watch("b", "r", 1, func(error) {})
	s.Ended("c", "r", 1, errGone) // never watched
	if n := s.Len(); n != 2 {
		t.Fatalf("Len %d, want 2", n)
	}
	s.Ended("a", "r", 1, errGone)
	s.Ended("a", "r", 1, errGone)
	s.Watch("c", "r", 1, func(error) {}) // ended already: called at once
	if n := s.Len(); n != 1 {
		t.Fatalf("Len %d, want 1", n)
	}
}

// BenchmarkWatchEnded: a lease's hold watched then ended, as a store's
// uncontended pair does, with Keep ends remembered already.
func BenchmarkWatchEnded(b *testing.B) {
	var s Set
	f := func(error) {}
	for i := range Keep {
		s.Ended("warm", "", int64(i), errGone)
	}
	var tok int64 = Keep
	for b.Loop() {
		tok++
		s.Watch("p/x", "", tok, f)
		s.Ended("p/x", "", tok, errGone)
	}
}
