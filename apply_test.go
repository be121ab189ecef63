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
	_, err = l.Apply(ctx, cfg)
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
	if _, err := l.Apply(ctx, cfg); !errors.As(err, &ce) || ce.File != "" || ce.Entry != 0 {
		t.Fatalf("Apply of a read config = %v (%+v)", err, ce)
	}
}

// Issue 29 C11: with AllowResize a file with changed slots is applied in
// one step; a pruned lock in use is an error naming the lock and the file
// (it has no line), and nothing changes.
func TestApplyResizeAndPruneNameTheFile(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	for name, slots := range map[string]int{"payments": 4, "old": 1} {
		if err := l.Define(ctx, name, slots); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "locks.yaml")
	if err := os.WriteFile(path, []byte("locks:\n  - name: reports\n    slots: 1\n  - name: payments\n    slots: 6\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := sleeplock.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	held, err := l.TryAcquire(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Apply(ctx, cfg, sleeplock.AllowResize(), sleeplock.Prune())
	var ce *sleeplock.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, sleeplock.ErrInUse) || ce.File != path || ce.Name != "old" ||
		!strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"old"`) {
		t.Fatalf("Apply pruning a lock in use = %v (%+v), want an error naming old and %s", err, ce, path)
	}
	if st, err := l.State(ctx, "payments"); err != nil || st.Slots != 4 {
		t.Fatalf("a refused Apply resized payments: %+v %v", st, err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := l.Apply(ctx, cfg, sleeplock.AllowResize(), sleeplock.Prune())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Created) != 1 || got.Created[0] != "reports" || len(got.Resized) != 1 || got.Resized[0] != "payments" ||
		len(got.Deleted) != 1 || got.Deleted[0] != "old" {
		t.Fatalf("Apply = %+v", got)
	}
}
