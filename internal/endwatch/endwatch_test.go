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
	if !called || len(s.gone) != Keep {
		t.Fatalf("called %v, remembered %d", called, len(s.gone))
	}
}
