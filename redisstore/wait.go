package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock/store"
)

// A waiter is a caller of Acquire waiting in the queues. Its grant is
// pushed: the script that frees a slot grants it to the head waiter and
// publishes a "g" message to the waiter's node channel, whose listener
// hands it to the waiter; the waiter's check then claims the grant (see
// lua/common.lua's grant). A waiter checks again by itself only when told to (a "c"
// message: the channel was subscribed again after a reconnect), when a
// holder ahead of it becomes takeable (the check's answer says when, and
// so does the "c" message that tells a waiter it became the head of a
// queue), or when the heartbeat found its node taken for dead.
type waiter struct {
	id    string
	roots []string
	ch    chan string // messages, newest kept when full
}

func (s *Store) addWaiter(req *store.AcquireRequest) *waiter {
	var b [8]byte
	_, _ = rand.Read(b[:])
	w := &waiter{id: hex.EncodeToString(b[:]), ch: make(chan string, 4)}
	seen := map[string]bool{}
	for _, n := range req.Names() {
		if r := root(n); !seen[r] {
			seen[r] = true
			w.roots = append(w.roots, r)
		}
	}
	s.mu.Lock()
	if s.shut {
		s.mu.Unlock()
		return nil
	}
	s.waits.Add(1)
	s.waiters[w.id] = w
	for _, r := range w.roots {
		s.roots[r]++
	}
	s.mu.Unlock()
	return w
}

func (s *Store) removeWaiter(w *waiter) {
	if w == nil {
		return
	}
	defer s.waits.Done()
	s.mu.Lock()
	delete(s.waiters, w.id)
	for _, r := range w.roots {
		if s.roots[r]--; s.roots[r] <= 0 {
			delete(s.roots, r)
		}
	}
	s.mu.Unlock()
}

// tell hands message m to waiter id, if it still waits.
func (s *Store) tell(id, m string) {
	s.mu.Lock()
	w := s.waiters[id]
	s.mu.Unlock()
	if w == nil {
		return
	}
	select {
	case w.ch <- m:
	default:
		// Full: a check is pending anyway; a grant must get through.
		if strings.HasPrefix(m, "g\t") || strings.HasPrefix(m, "h\t") {
			select {
			case <-w.ch:
			default:
			}
			select {
			case w.ch <- m:
			default:
			}
		}
	}
}

// tellAll asks every waiter (under roots, when given) to check again.
func (s *Store) tellAll(roots map[string]bool) {
	s.mu.Lock()
	var ids []string
	for id, w := range s.waiters {
		for _, r := range w.roots {
			if roots == nil || roots[r] {
				ids = append(ids, id)
				break
			}
		}
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.tell(id, "c\t"+id)
	}
}

// listen delivers the node channel's messages to the waiters. After a
// reconnect (go-redis subscribes again and reports it) every waiter checks
// again: a grant published meanwhile was lost.
func (s *Store) listen() {
	defer s.bg.Done()
	first := true
	for {
		v, err := s.ps.Receive(context.Background())
		if err != nil {
			if s.closed.Load() || errors.Is(err, redis.ErrClosed) {
				return
			}
			s.reroute(err) // the subscription's node may have died
			select {
			case <-s.closing:
				if s.closed.Load() {
					return
				}
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		switch m := v.(type) {
		case *redis.Subscription:
			if !first {
				s.tellAll(nil)
				s.ann.SendAll("") // what was announced meanwhile is lost
			}
			first = false
		case *redis.Message:
			if m.Channel == s.announceChannel() {
				s.announced(m.Payload)
				continue
			}
			for _, line := range strings.Split(m.Payload, "\n") {
				s.deliver(line)
			}
		}
	}
}

// deliver hands a message of a script to its waiter or watchers: "g"
// (a grant), "h" (too heavy after a resize), "c" (check again), "a"
// (every waiter checks again), "e" (a hold of this node ended).
func (s *Store) deliver(line string) {
	f := strings.Split(line, "\t")
	switch {
	case len(f) < 2:
	case f[0] == "a":
		s.tellAll(nil)
	case f[0] == "e":
		if len(f) == 6 {
			reason := store.ErrReleased
			if f[5] != "" {
				reason = lostBecause(f[5])
			}
			s.w.Ended(f[2], "", atoi64(f[4]), reason) // a hold is its lock and token (see Watch)
		}
	default:
		s.tell(f[1], line)
	}
}

// heartbeat keeps this node's waiters alive in the queues, four times per
// waiter TTL, and takes dead nodes' waiters out on the way.
func (s *Store) heartbeat() {
	defer s.bg.Done()
	t := time.NewTicker(s.cfg.waiterTTL / 4)
	defer t.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
		}
		s.mu.Lock()
		calls := make([]call, 0, len(s.roots))
		for r := range s.roots {
			calls = append(calls, call{keys: []string{s.rootKey(r, "d")}, args: []any{micros(s.cfg.waiterTTL), r}})
		}
		s.mu.Unlock()
		if len(calls) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.waiterTTL)
		replies, err := s.runEach(ctx, fnHeartbeat, calls)
		cancel()
		if err != nil {
			continue
		}
		lapsed := map[string]bool{}
		for _, r := range replies {
			for _, x := range list(r.arg(0)) {
				lapsed[str(x)] = true
			}
		}
		if len(lapsed) > 0 {
			s.tellAll(lapsed)
		}
	}
}

// wait waits for w's grant: pushed by a release, or found by a check.
// wake is when (server µs) a holder ahead becomes takeable (0: never).
func (s *Store) wait(ctx context.Context, req *store.AcquireRequest, w *waiter, now, wake int64) (store.Grant, error) {
	check := s.acquireArgs(req, "check", w.id)
	for {
		var timer <-chan time.Time
		if wake > 0 {
			t := time.NewTimer(max(0, durMicros(wake-now)) + time.Millisecond)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-ctx.Done():
			return store.Grant{}, s.leave(ctx, req, w)
		case <-s.closing:
			return store.Grant{}, store.ErrClosed
		case m := <-w.ch:
			switch {
			case strings.HasPrefix(m, "g\t"):
				// Granted: the check below claims the grant and reads it.
				// Until then it is the node's, and goes back if the node
				// stops beating; a grant that went back (this process
				// was taken for dead) is not found, and w queues again.
			case strings.HasPrefix(m, "c\t"):
				// "c", waiter, wake, now: it became the head of a queue.
				if f := strings.Split(m, "\t"); len(f) == 4 {
					if at := atoi64(f[2]); at > 0 && (wake == 0 || at < wake) {
						wake = at
					}
					now = atoi64(f[3])
					continue
				}
			case strings.HasPrefix(m, "h\t"):
				f := strings.Split(m, "\t")
				if len(f) == 5 {
					wt, _ := strconv.Atoi(f[3])
					sl, _ := strconv.Atoi(f[4])
					return store.Grant{}, &store.WeightError{Lock: f[2], Weight: wt, Slots: sl, Resized: true}
				}
			}
		case <-timer:
		}
		r, err := s.runCall(context.WithoutCancel(ctx), req.Events, check)
		if err != nil {
			if errors.Is(err, store.ErrClosed) {
				return store.Grant{}, err
			}
			if ctx.Err() != nil {
				return store.Grant{}, s.leave(ctx, req, w)
			}
			_ = s.leave(context.WithoutCancel(ctx), req, w)
			return store.Grant{}, err
		}
		g, queued, err := s.outcome(req, &r)
		if err != nil {
			return store.Grant{}, err
		}
		if !queued {
			if ctx.Err() != nil {
				return store.Grant{}, s.leave(ctx, req, w)
			}
			return g, nil
		}
		now, wake = r.now, integer(r.arg(0))
	}
}

// leave takes a waiter whose caller gave up out of the queues (and gives
// back a grant made meanwhile), and returns the caller's error.
func (s *Store) leave(ctx context.Context, req *store.AcquireRequest, w *waiter) error {
	names := req.Names()
	keys := make([]string, len(names))
	args := []any{w.id, len(names)}
	for i, n := range names {
		keys[i] = s.lockKey(n)
		args = append(args, n)
	}
	_, err := s.run(context.WithoutCancel(ctx), fnLeave, req.Events, keys, args...)
	if errors.Is(err, store.ErrClosed) {
		return store.ErrClosed
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
