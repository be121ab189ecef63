package announce

import (
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A listener gets the messages of its name, sent after it listens and
// before it stops, and the messages sent to all.
func TestListenSendStop(t *testing.T) {
	var s Set
	var got, other []string
	stop := s.Listen("a", func(m string) { got = append(got, m) })
	stopOther := s.Listen("b", func(m string) { other = append(other, m) })
	s.Send("a", "1")
	s.Send("b", "x")
	s.SendAll("")
	if s.Len() != 2 {
		t.Fatalf("Len = %d, want 2", s.Len())
	}
	stop()
	stop()
	s.Send("a", "2")
	stopOther()
	if !slices.Equal(got, []string{"1", ""}) || !slices.Equal(other, []string{"x", ""}) {
		t.Fatalf("got %q and %q", got, other)
	}
	if s.Len() != 0 {
		t.Fatalf("Len = %d after stop, want 0", s.Len())
	}
	var nilSet *Set
	nilSet.Listen("a", nil)()
	nilSet.Send("a", "")
	nilSet.SendAll("")
}
