package sleeplock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/internal/zerocall"
)

// Every exported function and method, called with zero values (nil
// contexts, a nil or zero *Locks, the zero Lease, nil options, notifiers and
// readers), returns — with a typed error where it has nothing to work with —
// and never panics (issue 7 item 9).
func TestZeroValuesDoNotPanic(t *testing.T) {
	zerocall.Run(t, zerocall.Suite{
		Dir: ".",
		Funcs: map[string]any{
			"New": sleeplock.New, "WithTTL": sleeplock.WithTTL, "WithNotifier": sleeplock.WithNotifier, "WithInlineNotifier": sleeplock.WithInlineNotifier,
			"LogEvents": sleeplock.LogEvents, "Execute": sleeplock.Execute[int],
			"BindTo": sleeplock.BindTo, "Counted": sleeplock.Counted, "Hold": sleeplock.Hold,
			"NoKeepAlive": sleeplock.NoKeepAlive, "NoWait": sleeplock.NoWait, "Weight": sleeplock.Weight, "WeightFor": sleeplock.WeightFor,
			"Exclusive": sleeplock.Exclusive, "Shared": sleeplock.Shared, "TTL": sleeplock.TTL,
			"Kind": sleeplock.Kind, "Ref": sleeplock.Ref, "StaleAfter": sleeplock.StaleAfter,
			"ReenterAll": sleeplock.ReenterAll, "Force": sleeplock.Force,
			"AllowResize": sleeplock.AllowResize, "Prune": sleeplock.Prune, "PruneInUse": sleeplock.PruneInUse,
			"ReadConfig": sleeplock.ReadConfig, "LoadConfig": sleeplock.LoadConfig,
		},
		Receivers: []func() any{
			func() any { return (*sleeplock.Locks)(nil) },
			func() any { return &sleeplock.Locks{} },
			func() any { return sleeplock.New(nil) },
			func() any { return sleeplock.Lease{} },
			func() any { return (*sleeplock.ConfigError)(nil) },
			func() any { return &sleeplock.ConfigError{} },
			func() any { return sleeplock.NotifierFunc(nil) },
			func() any { return (*sleeplock.Lock)(nil) },
			func() any { return &sleeplock.Lock{} },
			func() any { return sleeplock.New(nil).Lock("a") },
		},
	})
}

// A nil notifier, a typed nil one and a nil option are bad options, which
// every call reports; a nil context is refused before anything changes.
func TestNilOptionsAndContext(t *testing.T) {
	var nilFunc sleeplock.NotifierFunc
	var nilPtr *recorder
	for name, opt := range map[string]sleeplock.Option{
		"WithNotifier(nil)":           sleeplock.WithNotifier(nil),
		"WithNotifier(nil func)":      sleeplock.WithNotifier(nilFunc),
		"WithNotifier(nil *recorder)": sleeplock.WithNotifier(nilPtr),
		"nil Option":                  nil,
	} {
		l := sleeplock.New(nil, opt)
		if err := l.Define(context.Background(), "a", 1); !errors.Is(err, sleeplock.ErrInvalidConfig) {
			t.Errorf("%s: Define = %v, want ErrInvalidConfig", name, err)
		}
		_ = l.Close()
	}
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	if err := l.Define(ctx, "a", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(ctx, "a", nil); !errors.Is(err, sleeplock.ErrInvalidConfig) {
		t.Fatalf("TryAcquire with a nil AcquireOption = %v", err)
	}
	var nilCtx context.Context
	if _, err := l.TryAcquire(nilCtx, "a"); !errors.Is(err, sleeplock.ErrInvalid) {
		t.Fatalf("TryAcquire(nil ctx) = %v", err)
	}
	lease, err := l.TryAcquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Held(nilCtx); !errors.Is(err, sleeplock.ErrInvalid) {
		t.Fatalf("Held(nil ctx) = %v", err)
	}
	if err := lease.Keep(nilCtx); !errors.Is(err, sleeplock.ErrInvalid) {
		t.Fatalf("Keep(nil ctx) = %v", err)
	}
	// Release is cleanup: it runs under a context of its own.
	if err := lease.Release(nilCtx); err != nil {
		t.Fatalf("Release(nil ctx) = %v", err)
	}
	if _, err := sleeplock.Execute[int](ctx, l, "a", nil); !errors.Is(err, sleeplock.ErrInvalidConfig) {
		t.Fatalf("Execute with a nil fn = %v", err)
	}
	if st, _ := l.State(ctx, "a"); st.Running != 0 {
		t.Fatalf("Execute with a nil fn took the lock: %+v", st)
	}
}

type recorder struct{ n int }

func (r *recorder) Notify(sleeplock.Event) { r.n++ }
