package sleeplock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/store"
)

// flakyStore fails Keep while failing is set and reports every Keep call.
type flakyStore struct {
	store.Store
	mu      sync.Mutex
	failing bool
	keeps   chan error
}

var errFlaky = errors.New("connection reset (injected)")

func (f *flakyStore) Keep(ctx context.Context, h store.Handle, ttl, hold time.Duration) (time.Time, error) {
	f.mu.Lock()
	failing := f.failing
	f.mu.Unlock()
	var err error
	var exp time.Time
	if failing {
		err = errFlaky
	} else {
		exp, err = f.Store.Keep(ctx, h, ttl, hold)
	}
	select {
	case f.keeps <- err:
	default:
	}
	return exp, err
}

func (f *flakyStore) setFailing(v bool) {
	f.mu.Lock()
	f.failing = v
	f.mu.Unlock()
}

// newFlaky returns Locks on a flakyStore with the lock "k" of one slot,
// closed when the test ends. The store is not a Watcher: losses are learnt
// by the keep-alive alone, as with a database store on another node.
func newFlaky(t *testing.T) (*sleeplock.Locks, *flakyStore) {
	f := &flakyStore{Store: memstore.New(), keeps: make(chan error, 100)}
	l := sleeplock.New(f)
	t.Cleanup(func() { _ = l.Close() })
	if err := l.Define(context.Background(), "k", 1); err != nil {
		t.Fatal(err)
	}
	return l, f
}

// A renewal that keeps failing until the lease expires loses the lease.
func TestKeepAliveFailingUntilExpiryLosesLease(t *testing.T) {
	ctx := context.Background()
	l, f := newFlaky(t)
	f.setFailing(true)
	lease, err := l.TryAcquire(ctx, "k", sleeplock.TTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	<-lease.Done()
	if !errors.Is(lease.Err(), sleeplock.ErrLeaseLost) {
		t.Fatalf("Err = %v, want ErrLeaseLost", lease.Err())
	}
	if err := <-f.keeps; !errors.Is(err, errFlaky) {
		t.Fatalf("the keep-alive did not try to renew: %v", err)
	}
}

// A renewal that fails once and then succeeds keeps the lease.
func TestKeepAliveRetriesPassingFaults(t *testing.T) {
	ctx := context.Background()
	l, f := newFlaky(t)
	f.setFailing(true)
	lease, err := l.TryAcquire(ctx, "k", sleeplock.TTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-f.keeps; !errors.Is(err, errFlaky) {
		t.Fatalf("first renewal: %v", err)
	}
	f.setFailing(false)
	for err := range f.keeps {
		if err == nil {
			break // renewed after the fault
		}
	}
	if lease.Err() != nil {
		t.Fatalf("a lease renewed after a passing fault reports %v", lease.Err())
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A renewal that finds the lease gone loses it at once.
func TestKeepAliveNotHeldLosesLease(t *testing.T) {
	ctx := context.Background()
	l, _ := newFlaky(t)
	lease, err := l.TryAcquire(ctx, "k", sleeplock.TTL(300*time.Millisecond), sleeplock.Ref("r"))
	if err != nil {
		t.Fatal(err)
	}
	byRef, _ := l.LeaseOf("r", []string{"k"})
	if err := byRef.Release(ctx); err != nil {
		t.Fatal(err)
	}
	<-lease.Done()
	if !errors.Is(lease.Err(), sleeplock.ErrLeaseLost) {
		t.Fatalf("Err = %v", lease.Err())
	}
}
