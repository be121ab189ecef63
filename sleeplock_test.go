package sleeplock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestReadConfigNamesEntryAndLine(t *testing.T) {
	cases := []struct {
		yaml string
		line int
		want error
		text string
	}{
		{"locks:\n  - name: a\n    slots: 2\n  - name: b\n    slots: 0\n", 4, sleeplock.ErrInvalidSlots, `locks[1] ("b")`},
		{"locks:\n  - name: a\n    slots: 2\n  - slots: 3\n", 4, sleeplock.ErrInvalidName, "locks[1]"},
		{"locks:\n  - name: a\n    slots: 1\n  - name: a\n    slots: 1\n", 4, sleeplock.ErrAlreadyDefined, "declared again"},
		{"locks:\n  - name: a\n    slot: 2\n", 3, nil, `unknown field "slot"`},
		{"locks:\n  - name: a\n    slots: two\n", 3, nil, "int"},
		{"locks: [\n", 0, nil, ""},
		{"lock:\n  - name: a\n", 1, nil, `unknown field "lock"`},
	}
	for _, c := range cases {
		cfg, err := sleeplock.ReadConfig(strings.NewReader(c.yaml))
		var ce *sleeplock.ConfigError
		if cfg != nil || !errors.As(err, &ce) || !errors.Is(err, sleeplock.ErrInvalidConfig) {
			t.Errorf("%q: got %v, %v; want a *ConfigError", c.yaml, cfg, err)
			continue
		}
		if c.line != 0 && ce.Line != c.line {
			t.Errorf("%q: line %d, want %d (%v)", c.yaml, ce.Line, c.line, err)
		}
		if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%q: %v does not match %v", c.yaml, err, c.want)
		}
		if !strings.Contains(err.Error(), c.text) {
			t.Errorf("%q: %q does not say %q", c.yaml, err, c.text)
		}
	}
}

func TestReadConfigGood(t *testing.T) {
	cfg, err := sleeplock.ReadConfig(strings.NewReader("# locks of the app\nlocks:\n  - name: test1\n    slots: 2\n  - name: chat/*\n    slots: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Locks) != 2 || cfg.Locks[0] != (sleeplock.LockConfig{Name: "test1", Slots: 2, Line: 3}) || cfg.Locks[1].Line != 5 {
		t.Fatalf("config %+v", cfg.Locks)
	}
	empty, err := sleeplock.ReadConfig(strings.NewReader(""))
	if err != nil || len(empty.Locks) != 0 {
		t.Fatalf("empty config: %+v %v", empty, err)
	}
	if _, err := sleeplock.LoadConfig("/nonexistent/locks.yaml"); !errors.Is(err, sleeplock.ErrInvalidConfig) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestBadOptionFailsEveryCall(t *testing.T) {
	l := sleeplock.New(nil, sleeplock.WithTTL(0))
	defer l.Close()
	if err := l.Define(context.Background(), "x", 1); !errors.Is(err, sleeplock.ErrInvalidTTL) {
		t.Fatalf("Define with a bad WithTTL = %v", err)
	}
	if _, err := l.TryAcquire(context.Background(), "x"); !errors.Is(err, sleeplock.ErrInvalidTTL) {
		t.Fatalf("TryAcquire with a bad WithTTL = %v", err)
	}
}

// The uncontended path of the memory store allocates nothing.
func TestTryAcquireReleaseAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	if err := l.Define(ctx, "payments", 3); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		lease, err := l.TryAcquire(ctx, "payments")
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("TryAcquire+Release allocates %.1f times", allocs)
	}
}

func TestZeroLease(t *testing.T) {
	var z sleeplock.Lease
	ctx := context.Background()
	if err := z.Keep(ctx); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatal(err)
	}
	if _, err := z.Held(ctx); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatal(err)
	}
	select {
	case <-z.Done():
	default:
		t.Fatal("the zero lease's Done is open")
	}
	if err := z.Guard(ctx, nil); !errors.Is(err, sleeplock.ErrNotHeld) {
		t.Fatal(err)
	}
}

func TestGuardUnsupportedOnMemory(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	_ = l.Define(ctx, "g", 1)
	lease, err := l.TryAcquire(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Guard(ctx, nil); !errors.Is(err, sleeplock.ErrUnsupported) {
		t.Fatalf("Guard on memory = %v", err)
	}
	_ = lease.Release(ctx)
}

func TestRefsAreRandomAndDistinct(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	_ = l.Define(ctx, "r", 1000)
	seen := map[string]bool{}
	for range 1000 {
		lease, err := l.TryAcquire(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		ref := lease.Ref()
		if len(ref) != 32 || seen[ref] {
			t.Fatalf("ref %q (seen: %v)", ref, seen[ref])
		}
		seen[ref] = true
	}
	// A generated ref can be named by its text.
	st, _ := l.StateDetail(ctx, "r")
	byText, err := l.LeaseOf(st.Holders[0].Ref, []string{"r"})
	if err != nil {
		t.Fatal(err)
	}
	if err := byText.Release(ctx); err != nil {
		t.Fatalf("release by the ref's text: %v", err)
	}
}

func FuzzDefineName(f *testing.F) {
	for _, s := range []string{"a", "chat/*", "", "/*", "a\x00", "\xff", strings.Repeat("x", 201), "chat//*", "ü/*"} {
		f.Add(s, 1)
	}
	f.Fuzz(func(t *testing.T, name string, slots int) {
		ctx := context.Background()
		l := sleeplock.New(nil)
		defer l.Close()
		err := l.Define(ctx, name, slots)
		if err != nil {
			if !errors.Is(err, sleeplock.ErrInvalid) {
				t.Fatalf("Define(%q, %d) = %v: not a typed input error", name, slots, err)
			}
			if list, _ := l.List(ctx); len(list) != 0 {
				t.Fatalf("a refused Define changed state: %+v", list)
			}
			return
		}
		if !strings.HasSuffix(name, "/*") {
			lease, err := l.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire of a defined lock %q: %v", name, err)
			}
			_ = lease.Release(ctx)
		}
	})
}

func FuzzReadConfig(f *testing.F) {
	f.Add("locks:\n  - name: a\n    slots: 2\n")
	f.Add("locks: [{name: b, slots: 0}]")
	f.Add("locks:\n  - name: \"\\x01\"\n    slots: 1\n")
	f.Add("- - -")
	f.Fuzz(func(t *testing.T, text string) {
		cfg, err := sleeplock.ReadConfig(strings.NewReader(text))
		if err != nil {
			if !errors.Is(err, sleeplock.ErrInvalidConfig) {
				t.Fatalf("ReadConfig error %v is not ErrInvalidConfig", err)
			}
			return
		}
		ctx := context.Background()
		l := sleeplock.New(nil)
		defer l.Close()
		if err := l.Apply(ctx, cfg); err != nil {
			t.Fatalf("a config that parsed does not apply: %v", err)
		}
	})
}

func TestLogEvents(t *testing.T) {
	var buf strings.Builder
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx := context.Background()
	l := sleeplock.New(nil, sleeplock.WithNotifier(sleeplock.LogEvents(logger)))
	_ = l.Define(ctx, "db", 1)
	lease, err := l.TryAcquire(ctx, "db", sleeplock.WithKind("job"), sleeplock.WithRef("r1"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = l.TryAcquire(ctx, "db")
	_ = lease.Release(ctx)
	_ = l.Close()
	out := buf.String()
	for _, want := range []string{
		`msg="sleeplock created" lock=db slots=1`,
		`msg="sleeplock acquired" lock=db slots=1 running=1 waiting=0 ref=r1 kind=job token=`,
		`msg="sleeplock refused"`, `holder=job`,
		`msg="sleeplock released" lock=db slots=1 running=0`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
