package sleeplock_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sleeplock/sleeplock"
)

// Issue 20 item 9: Apply of a file whose second entry conflicts changes
// nothing, and its error names the file, the entry and its line.
func TestApplyFileAllOrNothingNamesFile(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	if err := l.Define(ctx, "payments", 4); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "locks.yaml")
	if err := os.WriteFile(path, []byte("locks:\n  - name: reports\n    slots: 1\n  - name: payments\n    slots: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := sleeplock.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	err = l.Apply(ctx, cfg)
	var ce *sleeplock.ConfigError
	if !errors.As(err, &ce) || ce.File != path || ce.Entry != 1 || ce.Line != 4 || ce.Name != "payments" ||
		!errors.Is(err, sleeplock.ErrAlreadyDefined) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Apply = %v (%+v), want an error naming %s, locks[1] at line 4", err, ce, path)
	}
	if _, err := l.State(ctx, "reports"); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("the first entry of a file that failed was defined: State = %v", err)
	}
	// A config read from no file names none.
	cfg, err = sleeplock.ReadConfig(strings.NewReader("locks:\n  - name: payments\n    slots: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(ctx, cfg); !errors.As(err, &ce) || ce.File != "" || ce.Entry != 0 {
		t.Fatalf("Apply of a read config = %v (%+v)", err, ce)
	}
}
