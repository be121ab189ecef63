package redispeer_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock"
)

// serverTime returns the calls and the µs the server spent in command
// cmd ("fcall", "evalsha") so far, from INFO commandstats.
func serverTime(b *testing.B, c *redis.Client, cmd string) (calls, usec float64) {
	b.Helper()
	f := infoFieldOr(b, c, "commandstats", "cmdstat_"+cmd)
	for kv := range strings.SplitSeq(f, ",") {
		k, v, _ := strings.Cut(kv, "=")
		n, _ := strconv.ParseFloat(v, 64)
		switch k {
		case "calls":
			calls = n
		case "usec":
			usec = n
		}
	}
	return calls, usec
}

// infoFieldOr is infoField, "" when the section lacks the field (a
// command not run yet).
func infoFieldOr(b *testing.B, c *redis.Client, section, field string) string {
	b.Helper()
	s, err := c.Info(context.Background(), section).Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(s) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// perCall runs op n times and reports as name-µs/call the server's µs
// per call of cmd while it ran (a server nobody else calls cmd on), and
// as name-cpu-µs/call the server's CPU µs per call (INFO cpu: the whole
// of each call, reading and answering it included; unlike the first, not
// lengthened when the server waits for a core, so steadier on a loaded
// machine).
func perCall(b *testing.B, c *redis.Client, cmd, name string, n int, op func() error) {
	b.Helper()
	c0, u0 := serverTime(b, c, cmd)
	t0 := serverCPU(b, c)
	for range n {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	t1 := serverCPU(b, c)
	c1, u1 := serverTime(b, c, cmd)
	if c1 == c0 {
		b.Fatalf("no %s call counted", cmd)
	}
	b.ReportMetric((u1-u0)/(c1-c0), name+"-µs/call")
	b.ReportMetric(1e6*(t1-t0)/(c1-c0), name+"-cpu-µs/call")
}

// BenchmarkServerTime: the server's time per call (INFO commandstats), one
// client, one call at a time: sleeplock's functions (fcall) and
// redislock's scripts (evalsha) for a TryAcquire+Release pair and for a
// refused try. Unlike the throughput rows, it leaves out the client and
// the round trip: it is what 8 clients on one Redis core share. The
// -cpu- figures are the server's CPU time per call, reading the command
// and writing the answer included (INFO cpu).
func BenchmarkServerTime(b *testing.B) {
	const n = 2000
	ctx := context.Background()
	c := newClient(b)
	p := newPrefix(b, c)
	l := newLocks(b, c, p)
	if err := l.Define(ctx, "p/*", 1); err != nil {
		b.Fatal(err)
	}
	rl := redislock.New(c)
	holder, err := l.TryAcquire(ctx, "p/held", sleeplock.NoKeepAlive())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = holder.Release(ctx) }()
	held, err := rl.Obtain(ctx, p+"rl:held", ttl, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = held.Release(ctx) }()
	for b.Loop() {
		perCall(b, c, "fcall", "sleeplock-pair", n, func() error {
			lease, err := l.TryAcquire(ctx, "p/x")
			if err != nil {
				return err
			}
			return lease.Release(ctx)
		})
		perCall(b, c, "evalsha", "redislock-pair", n, func() error {
			lk, err := rl.Obtain(ctx, p+"rl:x", ttl, nil)
			if err != nil {
				return err
			}
			return lk.Release(ctx)
		})
		perCall(b, c, "fcall", "sleeplock-refused", n, func() error {
			if _, err := l.TryAcquire(ctx, "p/held"); !errors.Is(err, sleeplock.ErrUnavailable) {
				return err
			}
			return nil
		})
		perCall(b, c, "evalsha", "redislock-refused", n, func() error {
			if _, err := rl.Obtain(ctx, p+"rl:held", ttl, nil); !errors.Is(err, redislock.ErrNotObtained) {
				return err
			}
			return nil
		})
	}
}
