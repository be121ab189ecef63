package sleeplock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

// FuzzAcquireInput: whatever name, ref, kind, TTL and hold a caller gives,
// TryAcquire either refuses with a typed input error and changes nothing,
// or grants a lease that releases.
func FuzzAcquireInput(f *testing.F) {
	f.Add("a", "worker-1", "job", int64(time.Second), int64(0))
	f.Add("a", "", "", int64(0), int64(0))
	f.Add("chat/*", "r", "k", int64(-1), int64(1))
	f.Add("a", "r\x00", "k\n", int64(time.Second), int64(2*time.Second))
	f.Add("\xff", "\xff", "\xff", int64(1), int64(1))
	f.Fuzz(func(t *testing.T, name, ref, kind string, ttl, hold int64) {
		ctx := context.Background()
		l := sleeplock.New(nil)
		defer l.Close()
		if err := l.Define(ctx, "a", 2); err != nil {
			t.Fatal(err)
		}
		opts := []sleeplock.AcquireOption{sleeplock.Kind(kind)}
		if ref != "" {
			opts = append(opts, sleeplock.Ref(ref))
		}
		if ttl != 0 {
			opts = append(opts, sleeplock.TTL(time.Duration(ttl)), sleeplock.NoKeepAlive())
		}
		if hold != 0 {
			opts = append(opts, sleeplock.Hold(time.Duration(hold)))
		}
		lease, err := l.TryAcquire(ctx, name, opts...)
		if err != nil {
			if !errors.Is(err, sleeplock.ErrInvalid) && !errors.Is(err, sleeplock.ErrNotFound) {
				t.Fatalf("TryAcquire(%q, ref %q, kind %q, ttl %d, hold %d) = %v: not a typed input error", name, ref, kind, ttl, hold, err)
			}
			if st, err := l.State(ctx, "a"); err != nil || st.Running != 0 || st.Waiting != 0 {
				t.Fatalf("a refused acquisition changed the lock: %+v %v", st, err)
			}
			return
		}
		if name != "a" {
			t.Fatalf("TryAcquire of undefined %q succeeded", name)
		}
		if err := lease.Release(ctx); err != nil && !errors.Is(err, sleeplock.ErrNotHeld) {
			t.Fatalf("Release: %v", err)
		}
	})
}
