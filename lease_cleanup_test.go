package sleeplock_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/store"
)

// ctxStore is a memory store whose Release honours its context, as a
// database store's round trip does: an ended context releases nothing.
type ctxStore struct{ *memstore.Store }

func (s ctxStore) Release(ctx context.Context, h store.Handle, ev store.Emitter) error {
	if ctx == nil {
		return fmt.Errorf("nil context reached the store")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Store.Release(ctx, h, ev)
}

// Release is cleanup: a lease taken by a caller whose context has since
// ended, or released with a nil context, is released under a context of
// its own, on a store whose Release honours its context.
func TestReleaseRunsUnderAContextOfItsOwn(t *testing.T) {
	l := sleeplock.New(ctxStore{memstore.New()})
	defer l.Close()
	bg := context.Background()
	must(t, l.Define(bg, "r", 2))
	ctx, cancel := context.WithCancel(bg)
	a, err := l.Acquire(ctx, "r", sleeplock.Ref("a"))
	must(t, err)
	b, err := l.Acquire(ctx, "r", sleeplock.Ref("b"))
	must(t, err)
	cancel()
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release with the ended context = %v, want nil", err)
	}
	var nilCtx context.Context
	if err := b.Release(nilCtx); err != nil {
		t.Fatalf("Release(nil ctx) = %v, want nil", err)
	}
	wantUse(t, l, "r", 0, 0, 0)
}

// A lease of three or more locks names each lock and its token, in the
// order they were asked for.
func TestLeaseOfManyLocksNamesEach(t *testing.T) {
	l := sleeplock.New(memstore.New())
	defer l.Close()
	ctx := context.Background()
	names := []string{"n3", "n1", "n4", "n2"}
	want := map[string]int64{}
	for _, n := range names {
		must(t, l.Define(ctx, n, 1))
		// Each lock's tokens count its own grants: make them differ.
		for range len(n) + int(n[1]-'0') {
			x, err := l.Acquire(ctx, n)
			must(t, err)
			must(t, x.Release(ctx))
		}
	}
	x, err := l.AcquireAll(ctx, names, sleeplock.Ref("all"))
	must(t, err)
	defer func() { must(t, x.Release(ctx)) }()
	for _, n := range names {
		st, err := l.StateDetail(ctx, n)
		must(t, err)
		want[n] = st.Holders[0].Token
	}
	if got := x.Names(); fmt.Sprint(got) != fmt.Sprint(names) {
		t.Fatalf("Names = %v, want %v", got, names)
	}
	toks := x.Tokens()
	if len(toks) != len(names) {
		t.Fatalf("Tokens = %v, want one per lock of %v", toks, names)
	}
	for i, n := range names {
		if toks[i] != want[n] {
			t.Fatalf("Tokens = %v: token %d of %s, want %d (its holder's)", toks, toks[i], n, want[n])
		}
	}
}
