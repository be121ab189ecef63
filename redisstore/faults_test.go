package redisstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/redisstore"
	"github.com/sleeplock/sleeplock/redisstore/redistest"
)

// child is a process of its own holding or waiting for lock "k" on the
// server of SLEEPLOCK_REDIS_URL, until it is killed: "holder" takes it
// with a 2s TTL kept alive, "waiter" queues for it (a 2s TTL, "longwaiter"
// a minute's), "pairwaiter" for "p/1" and "p/2" at once (a minute's). It
// prints "ready" once it holds or is queued, and a waiter "acquired TOKEN"
// or "error: ..." when its Acquire returns.
func child(role string) {
	ctx := context.Background()
	s, err := redisstore.Open(ctx, os.Getenv("SLEEPLOCK_REDIS_URL"), redisstore.WithPrefix("f:"), redisstore.WithoutSafetyChecks())
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	l := sleeplock.New(s)
	switch role {
	case "holder":
		if _, err := l.TryAcquire(ctx, "k", sleeplock.TTL(2*time.Second)); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("ready")
	case "waiter", "longwaiter", "pairwaiter":
		ttl, names := 2*time.Second, []string{"k"}
		if role != "waiter" {
			ttl = time.Minute
		}
		if role == "pairwaiter" {
			names = []string{"p/1", "p/2"}
		}
		before, _ := l.State(ctx, names[0])
		go func() {
			x, err := l.AcquireAll(ctx, names, sleeplock.TTL(ttl), sleeplock.Ref(role))
			if err != nil {
				fmt.Println("error:", err)
				return
			}
			fmt.Println("acquired", x.Token())
		}()
		for {
			st, err := l.State(ctx, names[0])
			if err == nil && st.Waiting > before.Waiting {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		fmt.Println("ready")
	}
	select {}
}

// startChild starts a child process of role on srv and waits for it to be
// ready; it is killed after the test.
func startChild(t *testing.T, srv *redistest.Server, role string) *exec.Cmd {
	t.Helper()
	cmd, _ := startChildOut(t, srv, role)
	return cmd
}

// startChildOut is startChild, with the child's output after "ready".
func startChildOut(t *testing.T, srv *redistest.Server, role string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SLEEPLOCK_REDIS_CHILD="+role, "SLEEPLOCK_REDIS_URL="+srv.URL())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("%s child: %q %v", role, line, err)
	}
	return cmd, r
}

// TestKill9HolderAndWaiter: a holder and the waiter at the head of the
// queue are killed with SIGKILL; the waiter behind them gets the slot
// within the holder's TTL + the waiter TTL (1s) of the kill.
func TestKill9HolderAndWaiter(t *testing.T) {
	srv := startServer(t)
	c := srv.Client()
	defer func() { _ = c.Close() }()
	s := open(t, c, "f:")
	l := sleeplock.New(s)
	defer func() { _ = l.Close() }()
	ctx := context.Background()
	if err := l.Define(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	holder := startChild(t, srv, "holder")
	waiter := startChild(t, srv, "waiter")
	got := make(chan time.Time, 1)
	go func() {
		x, err := l.Acquire(ctx, "k", sleeplock.TTL(time.Minute))
		if err != nil {
			t.Error(err)
		}
		got <- time.Now()
		_ = x.Release(ctx)
	}()
	waitUntil(t, "two waiters", func() bool {
		st, err := l.State(ctx, "k")
		return err == nil && st.Waiting == 2
	})
	_ = holder.Process.Kill()
	_ = waiter.Process.Kill()
	killed := time.Now()
	at := <-got
	// The bound is the guarantee itself (TTL 2s + waiter TTL 1s), with a
	// second of slack for a loaded machine.
	if d := at.Sub(killed); d > 4*time.Second {
		t.Fatalf("the slot came back %v after the kill, want within TTL + 1s", d)
	}
	t.Logf("slot back %v after the kill (holder TTL 2s)", at.Sub(killed).Round(time.Millisecond))
}

// TestStoppedWaiterGrantGoesBack: the head waiter, a process of its own,
// is stopped (SIGSTOP), and the holder releases once it has stopped (see
// stop), so that the slot is granted to it while it cannot claim the
// grant. The grant goes back once its node stops beating (waiter TTL,
// 1s), not at its lease's TTL (a minute): the next waiter gets the slot
// within its 50 s deadline. The stopped process, resumed while the next
// waiter holds, learns that its grant went back: it queues again, and
// acquires only after that holder released, with a greater token.
func TestStoppedWaiterGrantGoesBack(t *testing.T) {
	srv := startServer(t)
	c := srv.Client()
	defer func() { _ = c.Close() }()
	s := open(t, c, "f:")
	l := sleeplock.New(s)
	defer func() { _ = l.Close() }()
	ctx := context.Background()
	if err := l.Define(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	a, err := l.TryAcquire(ctx, "k", sleeplock.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	b, out := startChildOut(t, srv, "longwaiter")
	got := make(chan result, 1)
	// Below the stopped waiter's TTL (a minute), so that only a grant taken
	// back, not one that expired, lets the next waiter in; the setup below
	// (a child process started on a loaded machine) counts against it too.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Second)
	defer cancel()
	go func() {
		x, err := l.Acquire(cctx, "k", sleeplock.TTL(time.Minute), sleeplock.Ref("c"))
		got <- result{x, err}
	}()
	waitUntil(t, "two waiters", func() bool {
		st, err := l.State(ctx, "k")
		return err == nil && st.Waiting == 2
	})
	stop(t, b)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	r := <-got
	if r.err != nil {
		t.Fatalf("the waiter behind the stopped one: %v, want the slot long before the stopped one's TTL", r.err)
	}
	t.Logf("the next waiter got the slot %v after the release", time.Since(released).Round(time.Millisecond))
	defer func() { _ = r.x.Release(ctx) }()
	if err := b.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the resumed waiter to queue again", func() bool {
		st, err := l.StateDetail(ctx, "k")
		return err == nil && st.Waiting == 1 && len(st.Holders) == 1 && st.Holders[0].Ref == "c"
	})
	if err := r.x.Release(ctx); err != nil {
		t.Fatal(err)
	}
	line, err := out.ReadString('\n')
	var token int64
	if _, serr := fmt.Sscanf(line, "acquired %d", &token); serr != nil {
		t.Fatalf("the resumed waiter: %q %v, want it granted after the next holder's release", line, err)
	}
	if token <= r.x.Token() {
		t.Fatalf("the resumed waiter's token %d, not above the next holder's %d", token, r.x.Token())
	}
}

// TestStoppedWaiterPartGrantGoesBackWhole: a waiter for two locks, in a
// process stopped (SIGSTOP) before it claims the grant of both, loses one
// of them to the waiter behind it once its node stops beating. Resumed, its
// check gives the other back too (lua/fast.lua's claim: a grant goes back
// whole) and queues again: the lock it kept is free, with it waiting, until
// the next holder releases the lock it lost; then it acquires both.
func TestStoppedWaiterPartGrantGoesBackWhole(t *testing.T) {
	srv := startServer(t)
	c := srv.Client()
	defer func() { _ = c.Close() }()
	l := sleeplock.New(open(t, c, "f:"))
	defer func() { _ = l.Close() }()
	ctx := context.Background()
	for _, name := range []string{"p/1", "p/2"} {
		if err := l.Define(ctx, name, 1); err != nil {
			t.Fatal(err)
		}
	}
	a, err := l.AcquireAll(ctx, []string{"p/1", "p/2"}, sleeplock.TTL(time.Minute), sleeplock.NoWait())
	if err != nil {
		t.Fatal(err)
	}
	b, out := startChildOut(t, srv, "pairwaiter")
	got := make(chan result, 1)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Second) // below the stopped waiter's TTL
	defer cancel()
	go func() {
		x, err := l.Acquire(cctx, "p/2", sleeplock.TTL(time.Minute), sleeplock.Ref("c"))
		got <- result{x, err}
	}()
	waitUntil(t, "two waiters", func() bool {
		st, err := l.State(ctx, "p/2")
		return err == nil && st.Waiting == 2
	})
	stop(t, b)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("the waiter behind the stopped one: %v, want p/2 before the stopped one's TTL", r.err)
	}
	defer func() { _ = r.x.Release(ctx) }()
	if err := b.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the resumed waiter to give p/1 back and queue again", func() bool {
		one, err1 := l.StateDetail(ctx, "p/1")
		two, err2 := l.StateDetail(ctx, "p/2")
		return err1 == nil && err2 == nil && len(one.Holders) == 0 && one.Waiting == 1 &&
			len(two.Holders) == 1 && two.Holders[0].Ref == "c" && two.Waiting == 1
	})
	if err := r.x.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if line, err := out.ReadString('\n'); !strings.HasPrefix(line, "acquired ") {
		t.Fatalf("the resumed waiter: %q %v, want both locks once the next holder released", line, err)
	}
}

// stop stops child process cmd (SIGSTOP) and returns once it has
// stopped. kill(2) only starts a stop: the child's threads run on until
// each takes the signal, on a loaded machine long enough to take a grant
// made meanwhile; the parent is told (wait4, WUNTRACED) when the last
// thread stopped.
func stop(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(cmd.Process.Pid, &ws, syscall.WUNTRACED, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	if !ws.Stopped() {
		t.Fatalf("child after SIGSTOP: status %#x, want it stopped", uint32(ws))
	}
}

// result is an acquisition's outcome.
type result struct {
	x   sleeplock.Lease
	err error
}

// grants takes and releases lock name n times on l and returns the tokens.
func grants(t *testing.T, l *sleeplock.Locks, name string, n int) []int64 {
	t.Helper()
	var out []int64
	for range n {
		x, err := l.TryAcquire(context.Background(), name, sleeplock.TTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, x.Token())
		if err := x.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestRestartAOFAlways: with appendfsync always, a server killed with
// SIGKILL and restarted has every acknowledged grant, and tokens go on
// growing.
func TestRestartAOFAlways(t *testing.T) {
	srv := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	c := srv.Client()
	defer func() { _ = c.Close() }()
	s := open(t, c, "r:")
	l := sleeplock.New(s)
	defer func() { _ = l.Close() }()
	ctx := context.Background()
	if err := l.Define(ctx, "k", 3); err != nil {
		t.Fatal(err)
	}
	before := grants(t, l, "k", 50)
	var held []sleeplock.Lease
	for range 2 {
		x, err := l.TryAcquire(ctx, "k", sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, x)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the store to reach the restarted server", func() bool {
		_, err := l.State(ctx, "k")
		return err == nil
	})
	for _, x := range held {
		if ok, err := x.Held(ctx); !ok || err != nil {
			t.Fatalf("a grant acknowledged before the crash is lost: %v %v", ok, err)
		}
	}
	after := grants(t, l, "k", 10)
	last := max(before[len(before)-1], held[1].Token())
	if after[0] <= last {
		t.Fatalf("token %d after the restart, %d before", after[0], last)
	}
}

// TestRestartNoPersistence: a server that keeps nothing on disk forgets
// every definition and lease when it restarts (documented); tokens still
// grow.
func TestRestartNoPersistence(t *testing.T) {
	srv := startServer(t)
	c := srv.Client()
	defer func() { _ = c.Close() }()
	s := open(t, c, "n:")
	l := sleeplock.New(s)
	defer func() { _ = l.Close() }()
	ctx := context.Background()
	if err := l.Define(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	before := grants(t, l, "k", 20)
	x, err := l.TryAcquire(ctx, "k", sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the store to reach the restarted server", func() bool {
		_, err := l.List(ctx)
		return err == nil
	})
	if _, err := l.State(ctx, "k"); !errors.Is(err, sleeplock.ErrNotFound) {
		t.Fatalf("State after a restart without persistence = %v, want ErrNotFound", err)
	}
	if err := l.Define(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	if ok, _ := x.Held(ctx); ok {
		t.Fatal("a lease survived a restart without persistence")
	}
	after := grants(t, l, "k", 5)
	if last := max(before[len(before)-1], x.Token()); after[0] <= last {
		t.Fatalf("token %d after the restart, %d before", after[0], last)
	}
}

// TestClientPause: a server paused (CLIENT PAUSE ALL) for longer than the
// waiter TTL loses no waiter: once it resumes, a release hands the slot on
// and every waiter, on either node, is granted in turn.
func TestClientPause(t *testing.T) {
	srv := startServer(t)
	c1, c2 := srv.Client(), srv.Client()
	defer func() { _ = c1.Close(); _ = c2.Close() }()
	l1, l2 := sleeplock.New(open(t, c1, "p:")), sleeplock.New(open(t, c2, "p:"))
	defer func() { _ = l1.Close(); _ = l2.Close() }()
	ctx := context.Background()
	if err := l1.Define(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	a, err := l1.TryAcquire(ctx, "k", sleeplock.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	for _, l := range []*sleeplock.Locks{l1, l2} {
		go func() {
			x, err := l.Acquire(ctx, "k", sleeplock.TTL(time.Minute))
			if err == nil {
				err = x.Release(ctx)
			}
			done <- err
		}()
	}
	waitUntil(t, "two waiters", func() bool {
		st, err := l1.State(ctx, "k")
		return err == nil && st.Waiting == 2
	})
	admin := srv.Client()
	defer func() { _ = admin.Close() }()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "2500", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil { // waits for the pause to end
		t.Fatal(err)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestFailoverToLaggingReplica: a replica that missed the primary's last
// writes is promoted (REPLICAOF NO ONE) while the primary is stopped. The
// grants it missed are lost (counted), but no token goes down and none is
// given twice.
func TestFailoverToLaggingReplica(t *testing.T) {
	primary := startServer(t)
	replica := startServer(t, "--replicaof", "127.0.0.1", fmt.Sprint(primary.Port()))
	ctx := context.Background()
	pc, rc := primary.Client(), replica.Client()
	defer func() { _ = pc.Close(); _ = rc.Close() }()
	lp := sleeplock.New(open(t, pc, "fo:"))
	defer func() { _ = lp.Close() }()
	names := []string{"a", "b", "c"}
	for _, n := range names {
		if err := lp.Define(ctx, n, 2); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the replica to catch up", func() bool {
		return rc.Exists(ctx, "fo:{a}:d").Val() == 1 && rc.Exists(ctx, "fo:{c}:d").Val() == 1
	})
	tokens := map[string][]int64{}
	held := map[string][]int64{} // grants still held at the failover
	grant := func(l *sleeplock.Locks, keep bool) {
		for _, n := range names {
			x, err := l.TryAcquire(ctx, n, sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive())
			if err != nil {
				t.Fatal(err)
			}
			tokens[n] = append(tokens[n], x.Token())
			if keep {
				held[n] = append(held[n], x.Token())
				continue
			}
			if err := x.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 20 {
		grant(lp, false)
	}
	grant(lp, true) // replicated
	if err := pc.Do(ctx, "WAIT", 1, 5000).Err(); err != nil {
		t.Fatal(err)
	}
	// The link breaks: the replica misses what follows (it points at a
	// port where nobody answers, keeping its data).
	if err := rc.Do(ctx, "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		grant(lp, false)
	}
	grant(lp, true) // acknowledged, never replicated
	primary.Stop()
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	lr := sleeplock.New(open(t, rc, "fo:"))
	defer func() { _ = lr.Close() }()
	lost := 0
	for _, n := range names {
		st, err := lr.StateDetail(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		have := map[int64]bool{}
		for _, h := range st.Holders {
			have[h.Token] = true
		}
		for _, tk := range held[n] {
			if !have[tk] {
				lost++
			}
		}
		for range st.Slots - st.Running {
			x, err := lr.TryAcquire(ctx, n, sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive())
			if err != nil {
				t.Fatal(err)
			}
			tokens[n] = append(tokens[n], x.Token())
		}
	}
	decreases, twice := 0, 0
	for _, n := range names {
		seen := map[int64]bool{}
		for i, tk := range tokens[n] {
			if i > 0 && tk <= tokens[n][i-1] {
				decreases++
			}
			if seen[tk] {
				twice++
			}
			seen[tk] = true
		}
	}
	t.Logf("failover: %d held grants lost, %d token decreases, %d tokens given twice", lost, decreases, twice)
	if lost == 0 {
		t.Fatal("the replica missed no grant: the test did not make it lag")
	}
	if decreases != 0 || twice != 0 {
		t.Fatalf("%d token decreases, %d tokens given twice", decreases, twice)
	}
}
