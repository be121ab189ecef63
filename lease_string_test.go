package sleeplock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sleeplock/sleeplock"
)

// fmt prints a lease as its locks, ref, kind, tokens and weight (issue 29
// E18), for every kind of lease: plain, with options, weighted, of
// several locks, LeaseOf's and the zero one.
func TestLeaseString(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	for _, n := range []string{"payments", "a", "b"} {
		if err := l.Define(ctx, n, 4); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := l.TryAcquire(ctx, "payments")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Release(ctx)
	withRef, err := l.TryAcquire(ctx, "payments", sleeplock.Ref("job-1"), sleeplock.Kind("batch"), sleeplock.Weight(2))
	if err != nil {
		t.Fatal(err)
	}
	defer withRef.Release(ctx)
	both, err := l.AcquireAll(ctx, []string{"a", "b"}, sleeplock.Ref("turn-81"))
	if err != nil {
		t.Fatal(err)
	}
	defer both.Release(ctx)
	of, err := l.LeaseOf("turn-81", []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		lease sleeplock.Lease
		want  string
	}{
		{plain, fmt.Sprintf(`lease of "payments" (ref %q, token %d, weight 1)`, plain.Ref(), plain.Token())},
		{withRef, fmt.Sprintf(`lease of "payments" (ref "job-1", kind "batch", token %d, weight 2)`, withRef.Token())},
		{both, fmt.Sprintf(`lease of "a", "b" (ref "turn-81", tokens %d, %d, weight 1)`, both.Tokens()[0], both.Tokens()[1])},
		{of, `lease of "a" (ref "turn-81", token 0, weight 0)`},
		{sleeplock.Lease{}, "lease of nothing"},
	} {
		if got := fmt.Sprint(c.lease); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
		if got := fmt.Sprintf("%v", &c.lease); !strings.HasPrefix(got, "lease of") {
			t.Errorf("a *Lease prints %s", got)
		}
	}
}

// A lease prints as what it holds.
func ExampleLease_String() {
	ctx := context.Background()
	locks := sleeplock.New(nil)
	defer locks.Close()
	_ = locks.Define(ctx, "payments", 3)
	lease, err := locks.Acquire(ctx, "payments", sleeplock.Ref("job-1"), sleeplock.Kind("batch"))
	if err != nil {
		panic(err)
	}
	defer lease.Release(ctx)
	fmt.Println(lease)
	// Output:
	// lease of "payments" (ref "job-1", kind "batch", token 1, weight 1)
}
