package main

import (
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The walk-through runs on the memory store: turn-2 runs once the click
// is done, and what it prints reads as prose: no raw click refs, no
// library error text.
func TestWalkThrough(t *testing.T) {
	a, b, closeAll, err := nodes(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	var out strings.Builder
	if err := run(t.Context(), &out, a, b); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{"turn-2 in chat 43: started", "turn-2 done", "refused: a click of the user is in flight", "turn-4 started"} {
		if !strings.Contains(text, want) {
			t.Errorf("the walk-through does not say %q:\n%s", want, text)
		}
	}
	if regexp.MustCompile(`click:[0-9a-f]{9,}|sleeplock: |turns: `).MatchString(text) {
		t.Errorf("raw refs or error texts:\n%s", text)
	}
}
