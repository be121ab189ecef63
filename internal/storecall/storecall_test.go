package storecall_test

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/sleeplock/sleeplock/internal/storecall"
	"github.com/sleeplock/sleeplock/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Check reports the store before the context, and nothing for a usable
// store and a context.
func TestCheck(t *testing.T) {
	noStore := errors.New("no store")
	var nilCtx context.Context
	if err := storecall.Check(nilCtx, false, noStore); err != noStore { //nolint:errorlint // the value itself
		t.Errorf("unusable store, nil ctx: %v, want the store's error", err)
	}
	if err := storecall.Check(nilCtx, true, noStore); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("nil ctx: %v, want ErrInvalid", err)
	}
	if err := storecall.Check(context.Background(), true, noStore); err != nil {
		t.Errorf("usable: %v", err)
	}
}

// reconciler records the entries it is given and creates those it is told to.
type reconciler struct {
	got    []store.Definition
	opts   store.ReconcileOptions
	create bool
	err    error
}

func (r *reconciler) Reconcile(_ context.Context, defs []store.Definition, opts store.ReconcileOptions, _ store.Emitter) (store.Reconciled, error) {
	r.got, r.opts = defs, opts
	var out store.Reconciled
	if r.create {
		out.Created = []string{defs[0].Name}
	}
	return out, r.err
}

// Define is a Reconcile of one entry (no pruning, no resizing) that
// reports whether the definition was created, and Reconcile's error.
func TestDefine(t *testing.T) {
	ctx := context.Background()
	r := &reconciler{create: true}
	created, err := storecall.Define(ctx, r, "a", 2, nil)
	if !created || err != nil || len(r.got) != 1 || r.got[0] != (store.Definition{Name: "a", Slots: 2}) ||
		r.opts != (store.ReconcileOptions{}) {
		t.Fatalf("Define = %v, %v; Reconcile got %+v", created, err, r.got)
	}
	boom := errors.New("boom")
	r = &reconciler{err: boom}
	if created, err := storecall.Define(ctx, r, "a", 2, nil); created || !errors.Is(err, boom) {
		t.Fatalf("Define of an existing one, failing = %v, %v", created, err)
	}
}
