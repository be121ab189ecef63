package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/redisstore"
)

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	if _, err := redisstore.New(ctx, nil); !errors.Is(err, sleeplock.ErrInvalidConfig) {
		t.Fatalf("New(nil client) = %v", err)
	}
	if _, err := redisstore.Open(ctx, "http://x"); !errors.Is(err, sleeplock.ErrInvalidConfig) {
		t.Fatalf("Open(http://) = %v", err)
	}
	c := client(t)
	for _, o := range []redisstore.Option{
		nil, redisstore.WithPrefix(""), redisstore.WithPrefix("a{b"), redisstore.WithPrefix("a\nb"),
		redisstore.WithWaiterTTL(time.Millisecond),
	} {
		if _, err := redisstore.New(ctx, c, o); !errors.Is(err, sleeplock.ErrInvalidConfig) {
			t.Fatalf("New with a bad option = %v, want ErrInvalidConfig", err)
		}
	}
}

// crc16 is Redis Cluster's key hash (CRC-16/XMODEM).
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slot is the Cluster slot of key, with its hash tag.
func slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16([]byte(key)) % 16384
}

// evalKeys records the keys of every script or function call a client
// makes.
type evalKeys struct {
	mu    sync.Mutex
	calls [][]string
}

func (h *evalKeys) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *evalKeys) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.record(cmd)
		return next(ctx, cmd)
	}
}

func (h *evalKeys) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.record(c)
		}
		return next(ctx, cmds)
	}
}

func (h *evalKeys) record(cmd redis.Cmder) {
	a := cmd.Args()
	if name := strings.ToLower(cmd.Name()); len(a) < 3 || !strings.HasPrefix(name, "eval") && name != "fcall" {
		return
	}
	n, _ := strconv.Atoi(toString(a[2]))
	keys := make([]string, 0, n)
	for _, k := range a[3 : 3+n] {
		keys = append(keys, toString(k))
	}
	h.mu.Lock()
	h.calls = append(h.calls, keys)
	h.mu.Unlock()
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// TestKeyLayout checks that every script's keys share one Cluster slot,
// and that every key of a lock carries its root's hash tag.
func TestKeyLayout(t *testing.T) {
	if got := crc16([]byte("123456789")); got != 0x31C3 {
		t.Fatalf("crc16 = %x", got)
	}
	c := client(t)
	rec := &evalKeys{}
	c.AddHook(rec)
	p := newPrefix(t, c)
	s := open(t, c, p)
	l := sleeplock.New(s)
	defer func() { _ = l.Close() }()
	ctx := context.Background()
	for _, d := range []struct {
		Name  string
		Slots int
	}{{"chat/*", 1}, {"chat/a/*", 2}, {"jobs", 2}, {"{odd}/*", 1}} {
		if err := l.Define(ctx, d.Name, d.Slots); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"chat/1", "chat/a/b", "jobs", "{odd}/x"} {
		a, err := l.TryAcquire(ctx, name, sleeplock.TTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, _ = l.Acquire(wctx, name, sleeplock.Weight(1), sleeplock.TTL(time.Minute))
		cancel()
		if _, err := a.Held(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Keep(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := l.StateDetail(ctx, name); err != nil {
			t.Fatal(err)
		}
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Resize(ctx, "chat/*", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := l.List(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Stats(ctx); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.calls) < 20 {
		t.Fatalf("%d script calls recorded", len(rec.calls))
	}
	for _, keys := range rec.calls {
		for _, k := range keys {
			if !strings.HasPrefix(k, p+"{") || slot(k) != slot(keys[0]) {
				t.Fatalf("script keys %q: not one slot", keys)
			}
		}
	}
	iter := c.Scan(ctx, 0, p+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if k == p+"roots" {
			continue
		}
		if !strings.HasPrefix(k, p+"{") {
			t.Fatalf("key %q has no hash tag", k)
		}
		for _, kind := range []string{":l:", ":w:", ":b:"} { // holders, queue, requests
			if i := strings.Index(k, "}"+kind); i >= 0 {
				name := k[i+4:]
				if want := p + redisstore.KeyTag(name) + kind + name; k != want {
					t.Fatalf("key %q, want %q", k, want)
				}
			}
		}
	}
}

// TestRefusedTryWritesNothing: on a server with the AOF on, refused tries
// (busy slots, or others queued) change no key and append nothing.
func TestRefusedTryWritesNothing(t *testing.T) {
	srv := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	c := srv.Client()
	defer func() { _ = c.Close() }()
	s := open(t, c, "w:", redisstore.WithWaiterTTL(time.Hour)) // no heartbeat during the test
	l := sleeplock.New(s)
	defer func() { _ = l.Close() }()
	ctx := context.Background()
	if err := l.Define(ctx, "w", 1); err != nil {
		t.Fatal(err)
	}
	a, err := l.TryAcquire(ctx, "w", sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	// No queue: lua/fast.lua answers, with and without the caller's events.
	var refused atomic.Int64
	le := sleeplock.New(s, sleeplock.WithInlineNotifier(sleeplock.NotifierFunc(func(e sleeplock.Event) {
		if e.Type == sleeplock.EventRefused {
			refused.Add(1)
		}
	})))
	defer func() { _ = le.Close() }()
	before := persistence(t, c)
	for _, x := range []*sleeplock.Locks{l, le} {
		for range 100 {
			if _, err := x.TryAcquire(ctx, "w"); !errors.Is(err, sleeplock.ErrUnavailable) {
				t.Fatalf("TryAcquire = %v", err)
			}
		}
	}
	if after := persistence(t, c); before != after {
		t.Fatalf("refused tries with no queue wrote: before %v, after %v", before, after)
	}
	if refused.Load() != 100 {
		t.Fatalf("%d refused events, want 100", refused.Load())
	}
	// A queue: the general path answers.
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := l.Acquire(wctx, "w", sleeplock.TTL(time.Minute))
		done <- err
	}()
	waitUntil(t, "a waiter", func() bool {
		st, err := l.State(ctx, "w")
		return err == nil && st.Waiting == 1
	})
	before = persistence(t, c)
	for range 100 {
		if _, err := l.TryAcquire(ctx, "w"); !errors.Is(err, sleeplock.ErrUnavailable) {
			t.Fatalf("TryAcquire = %v", err)
		}
	}
	after := persistence(t, c)
	if before != after {
		t.Fatalf("refused tries wrote: before %v, after %v", before, after)
	}
	cancel()
	<-done
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// persistence returns the AOF size and the changes since the last save.
func persistence(t *testing.T, c *redis.Client) [2]string {
	t.Helper()
	info, err := c.Info(context.Background(), "persistence").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out [2]string
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "aof_current_size:"); ok {
			out[0] = v
		}
		if v, ok := strings.CutPrefix(line, "rdb_changes_since_last_save:"); ok {
			out[1] = v
		}
	}
	if out[0] == "" || out[1] == "" {
		t.Fatalf("INFO persistence: %s", info)
	}
	return out
}

// waitUntil polls cond until it holds (a state reached); fails after 20s.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestWaitersDoNotPoll: a waiter runs its acquire script once, then waits
// for the push, while its node's heartbeats go on.
func TestWaitersDoNotPoll(t *testing.T) {
	c := client(t)
	p := newPrefix(t, c)
	holder := open(t, c, p)
	o, _ := redis.ParseURL(testURL())
	wc := redis.NewClient(o)
	defer func() { _ = wc.Close() }()
	rec := &evalKeys{}
	wc.AddHook(rec)
	waiting := open(t, wc, p)
	lh, lw := sleeplock.New(holder), sleeplock.New(waiting)
	defer func() { _ = lh.Close(); _ = lw.Close() }()
	ctx := context.Background()
	if err := lh.Define(ctx, "np", 1); err != nil {
		t.Fatal(err)
	}
	a, err := lh.TryAcquire(ctx, "np", sleeplock.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		x, err := lw.Acquire(ctx, "np", sleeplock.TTL(time.Minute))
		if err == nil {
			err = x.Release(ctx)
		}
		got <- err
	}()
	calls := func() (acquire, heartbeat int) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, keys := range rec.calls {
			// A call on the lock: by its key, or by its root's (fastKeys: s, d).
			if len(keys) > 0 && (strings.HasSuffix(keys[0], ":l:np") || len(keys) == 2 && strings.HasSuffix(keys[0], "{np}:s")) {
				acquire++
			} else if len(keys) == 1 && strings.HasSuffix(keys[0], "}:d") {
				heartbeat++
			}
		}
		return
	}
	waitUntil(t, "four heartbeats of the waiting node", func() bool {
		_, hb := calls()
		return hb >= 4
	})
	if acq, _ := calls(); acq != 1 {
		t.Fatalf("the waiter ran %d lock scripts while waiting, want 1", acq)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// TestGuardWritesOnlyWhileHeld: a Tx's writes run with the check, and
// not at all once the lease was taken over.
func TestGuardWritesOnlyWhileHeld(t *testing.T) {
	c := client(t)
	p := newPrefix(t, c)
	s := open(t, c, p)
	l := sleeplock.New(s)
	defer func() { _ = l.Close() }()
	ctx := context.Background()
	if err := l.Define(ctx, "g", 1); err != nil {
		t.Fatal(err)
	}
	key := p + "out" + redisstore.KeyTag("g")
	a, err := l.TryAcquire(ctx, "g", sleeplock.TTL(time.Minute), sleeplock.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	var tx redisstore.Tx
	tx.Set(key, "first", 0)
	if err := a.Guard(ctx, &tx); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Get(ctx, key).Result(); v != "first" || len(tx.Results) != 1 {
		t.Fatalf("after a guarded write: %q, results %v", v, tx.Results)
	}
	if err := s.Advance(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	b, err := l.TryAcquire(ctx, "g", sleeplock.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var late redisstore.Tx
	late.Set(key, "late", 0)
	late.Del(key)
	if err := a.Guard(ctx, &late); !errors.Is(err, sleeplock.ErrLeaseLost) {
		t.Fatalf("Guard after a takeover = %v, want ErrLeaseLost", err)
	}
	if v, _ := c.Get(ctx, key).Result(); v != "first" {
		t.Fatalf("a lost lease wrote: %q", v)
	}
	if err := a.Guard(ctx, nil); !errors.Is(err, sleeplock.ErrUnsupported) {
		t.Fatalf("Guard(nil) = %v, want ErrUnsupported", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
