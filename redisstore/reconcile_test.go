package redisstore_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/store"
)

// afterRead is a client hook that runs fn once, right after the first
// read of a Reconcile (lua/reconcile.lua called with no guard), before
// its plan is carried out; it counts the reads.
type afterRead struct {
	fn    func()
	armed atomic.Bool
	reads atomic.Int32
}

func (h *afterRead) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *afterRead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *afterRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		a := cmd.Args()
		if len(a) < 3 || a[0] != "fcall" || !strings.HasSuffix(a[1].(string), "_reconcile") {
			return err
		}
		if guard := a[3+a[2].(int)+2]; guard == "" {
			h.reads.Add(1)
			if h.armed.CompareAndSwap(true, false) {
				h.fn()
			}
		}
		return err
	}
}

// racedReconcile returns a store whose next Reconcile has fn run between
// its read and its plan, and a Locks of another client on the same keys
// for fn to change them with.
func racedReconcile(t *testing.T) (*afterRead, store.Store, *sleeplock.Locks) {
	c := client(t)
	prefix := newPrefix(t, c)
	h := &afterRead{}
	c.AddHook(h)
	return h, open(t, c, prefix), sleeplock.New(open(t, client(t), prefix))
}

func defs(ds ...store.Definition) []store.Definition { return ds }

// A definition made between a Reconcile's read and its plan's script is
// seen: the script finds the definitions changed and writes nothing, and
// the Reconcile reads again and plans from what is there.
func TestReconcileReadsAgainWhenDefinitionsChanged(t *testing.T) {
	ctx := context.Background()
	h, s, other := racedReconcile(t)
	h.fn = func() {
		if err := other.Define(ctx, "x", 3); err != nil {
			t.Error(err)
		}
	}
	h.armed.Store(true)
	_, err := s.Reconcile(ctx, defs(store.Definition{Name: "x", Slots: 2}, store.Definition{Name: "y", Slots: 1}), store.ReconcileOptions{}, nil)
	var conflict *store.ConflictError
	if !errors.As(err, &conflict) || *conflict != (store.ConflictError{Name: "x", Slots: 3, Requested: 2}) {
		t.Fatalf("Reconcile after x was defined with 3 slots = %v, want a conflict with 3 slots", err)
	}
	if n := h.reads.Load(); n != 2 {
		t.Fatalf("Reconcile read %d times, want 2", n)
	}
	if st, err := other.State(ctx, "x"); err != nil || st.Slots != 3 {
		t.Fatalf("x = %+v, %v; want the other caller's 3 slots", st, err)
	}
	if _, err := other.State(ctx, "y"); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("a refused Reconcile defined y: %v", err)
	}

	// Resized instead, with Resize.
	h.fn = func() {
		if err := other.Resize(ctx, "x", 5); err != nil {
			t.Error(err)
		}
	}
	h.armed.Store(true)
	r, err := s.Reconcile(ctx, defs(store.Definition{Name: "x", Slots: 2}), store.ReconcileOptions{Resize: true}, nil)
	if err != nil || len(r.Resized) != 1 {
		t.Fatalf("Reconcile with Resize = %+v, %v", r, err)
	}
	if st, err := other.State(ctx, "x"); err != nil || st.Slots != 2 {
		t.Fatalf("x = %+v, %v; want 2 slots", st, err)
	}
}

// A definition to prune that was free when read but is held when the
// plan's script runs refuses the Reconcile (without Force), which prunes
// nothing.
func TestReconcilePruneSeesLockTakenAfterRead(t *testing.T) {
	ctx := context.Background()
	h, s, other := racedReconcile(t)
	for _, n := range []string{"keep", "busy", "free"} {
		if err := other.Define(ctx, n, 1); err != nil {
			t.Fatal(err)
		}
	}
	h.fn = func() {
		if _, err := other.TryAcquire(ctx, "busy", sleeplock.Ref("late"), sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive()); err != nil {
			t.Error(err)
		}
	}
	h.armed.Store(true)
	_, err := s.Reconcile(ctx, defs(store.Definition{Name: "keep", Slots: 1}), store.ReconcileOptions{Prune: true}, nil)
	var inUse *store.InUseError
	if !errors.As(err, &inUse) || *inUse != (store.InUseError{Lock: "busy", Holders: 1}) {
		t.Fatalf("Reconcile with Prune after busy was taken = %v, want busy in use by 1 holder", err)
	}
	for _, n := range []string{"busy", "free"} {
		if _, err := other.State(ctx, n); err != nil {
			t.Fatalf("a refused prune deleted %s: %v", n, err)
		}
	}
}
