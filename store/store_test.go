package store_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRef(t *testing.T) {
	a, b := store.NewRef(), store.NewRef()
	if sa := a.String(); sa == b.String() || len(sa) != 32 || sa != a.String() {
		t.Fatalf("refs %q %q", a, b)
	}
	if !a.Equal(store.RefOf(a.String())) || !store.RefOf(a.String()).Equal(a) || a.Equal(b) {
		t.Fatal("a generated ref must equal its text and nothing else")
	}
	if store.RefOf("x").Equal(store.RefOf("y")) || !store.RefOf("x").Equal(store.RefOf("x")) {
		t.Fatal("named refs compare by name")
	}
	if !(store.Ref{}).IsZero() || store.RefOf("").Equal(store.Ref{}) {
		t.Fatal("the zero ref names nobody and equals nothing")
	}
	if !a.Generated() || store.RefOf("x").Generated() {
		t.Fatal("Generated")
	}
}

// RefSources draw refs in blocks: across several blocks, from several
// sources and NewRef in turn, no ref (nor its text) repeats, and every ref
// is generated.
func TestRefSourceNeverRepeats(t *testing.T) {
	var a, b store.RefSource
	var nilSource *store.RefSource
	seen := map[string]bool{}
	for i := range 3 * 256 {
		for _, r := range []store.Ref{a.New(), b.New(), store.NewRef(), nilSource.New()} {
			txt := r.String()
			if !r.Generated() || len(txt) != 32 || seen[txt] {
				t.Fatalf("draw %d: ref %q generated %v, seen before %v", i, txt, r.Generated(), seen[txt])
			}
			seen[txt] = true
		}
	}
}

func TestCheckName(t *testing.T) {
	good := []string{"a", "payments", "chat/42", "ünï/名前", strings.Repeat("x", 200), "a b", "*"}
	for _, n := range good {
		if err := store.CheckName(n); err != nil {
			t.Errorf("CheckName(%q) = %v", n, err)
		}
	}
	bad := []string{"", strings.Repeat("x", 201), "a\tb", "\x00", "\xff\xfe", "chat/*", "a\u0085b"}
	for _, n := range bad {
		err := store.CheckName(n)
		var inv *store.InvalidError
		if !errors.Is(err, store.ErrInvalidName) || !errors.Is(err, store.ErrInvalid) || !errors.As(err, &inv) || inv.Rule == "" {
			t.Errorf("CheckName(%q) = %v", n, err)
		}
	}
}

func TestCheckDefinition(t *testing.T) {
	for _, n := range []string{"chat/*", "a/b/*", "x"} {
		if err := store.CheckDefinition(n, 1); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	for _, n := range []string{"/*", "a//*", ""} {
		if err := store.CheckDefinition(n, 1); !errors.Is(err, store.ErrInvalidName) {
			t.Errorf("%q: %v", n, err)
		}
	}
	for _, s := range []int{0, -1, store.MaxSlots + 1} {
		if err := store.CheckDefinition("x", s); !errors.Is(err, store.ErrInvalidSlots) {
			t.Errorf("slots %d: %v", s, err)
		}
	}
}

func TestCheckTTL(t *testing.T) {
	ok := []struct {
		ttl, hold time.Duration
		zero      bool
	}{{time.Second, 0, false}, {time.Second, time.Second, false}, {time.Second, time.Millisecond, false}, {0, 0, true}}
	for _, c := range ok {
		if err := store.CheckTTL(c.ttl, c.hold, c.zero); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if err := store.CheckTTL(0, 0, false); !errors.Is(err, store.ErrInvalidTTL) {
		t.Error(err)
	}
	if err := store.CheckTTL(-time.Second, 0, true); !errors.Is(err, store.ErrInvalidTTL) {
		t.Error(err)
	}
	if err := store.CheckTTL(time.Second, 2*time.Second, false); !errors.Is(err, store.ErrInvalidHold) {
		t.Error(err)
	}
	if err := store.CheckTTL(0, time.Second, true); !errors.Is(err, store.ErrInvalidHold) {
		t.Error(err)
	}
}

func TestCheckNames(t *testing.T) {
	if err := store.CheckNames([]string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	for _, names := range [][]string{nil, {}, {"a", "a"}, {"a", ""}} {
		if err := store.CheckNames(names); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%q: %v", names, err)
		}
	}
}

func TestFamilyOf(t *testing.T) {
	var got []string
	store.FamilyOf("a/b/c", func(p string) bool { got = append(got, p); return true })
	if !slices.Equal(got, []string{"a/b/*", "a/*"}) {
		t.Fatalf("FamilyOf = %q", got)
	}
	got = nil
	store.FamilyOf("a/b/c", func(p string) bool { got = append(got, p); return false })
	if len(got) != 1 {
		t.Fatal("FamilyOf must stop when told")
	}
	got = nil
	store.FamilyOf("plain", func(p string) bool { got = append(got, p); return true })
	store.FamilyOf("trailing/", func(p string) bool { got = append(got, p); return true })
	if len(got) != 0 {
		t.Fatalf("no family: %q", got)
	}
}

func TestErrorsMatch(t *testing.T) {
	b := &store.BusyError{Lock: "x", Kind: "turn"}
	if !errors.Is(b, store.ErrUnavailable) || !strings.Contains(b.Error(), "turn") {
		t.Fatal(b)
	}
	q := &store.BusyError{Lock: "x", Queued: true}
	if !strings.Contains(q.Error(), "waiting") {
		t.Fatal(q)
	}
	c := &store.ConflictError{Name: "x", Slots: 2, Requested: 3}
	if !errors.Is(c, store.ErrAlreadyDefined) {
		t.Fatal(c)
	}
	if store.EventLost.String() != "lost" || store.EventType(99).String() != "unknown" {
		t.Fatal("event names")
	}
}
