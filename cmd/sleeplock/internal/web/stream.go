package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sleeplock/sleeplock/cmd/sleeplock/internal/lockview"
	"github.com/sleeplock/sleeplock/store"
)

// writeTimeout bounds one write to a stream: a client that reads nothing
// for that long is disconnected.
const writeTimeout = 10 * time.Second

// events serves GET /api/events[?prefix=P]: a Server-Sent Events stream.
// Messages: "hello" (server settings: allow_release; poll_ms, how often
// other processes' changes are read, 0 when none can share the store;
// counters, whether the store counts what no poll sees), "event" (an
// event: of these Locks, or of another process with "seen":"poll"; the
// recent ones first), "missed" (grants and ended holds of other processes
// that only the store's counters showed: holds shorter than the poll),
// "lock" (a lock's new state, the JSON of GET /api/locks/{name}), "gone" (a
// lock no longer listed: a family member no longer in use) and "lagged"
// (the stream fell behind and lost messages: reload the locks).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "prefix" {
			fail(w, http.StatusBadRequest, fmt.Sprintf("unknown query parameter %q: want prefix", k))
			return
		}
	}
	prefix := q.Get("prefix")
	if len(prefix) > store.MaxNameBytes {
		fail(w, http.StatusBadRequest, fmt.Sprintf("prefix is %d bytes: at most %d", len(prefix), store.MaxNameBytes))
		return
	}
	select {
	case <-s.done:
		fail(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	default:
	}
	rc := http.NewResponseController(w)
	c, past := s.cfg.Hub.subscribe(prefix)
	defer s.cfg.Hub.unsubscribe(c)
	if s.cfg.Poll > 0 {
		s.pollOnce(true) // what the page loads after hello is what the next poll compares with
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	hello, _ := json.Marshal(map[string]any{"allow_release": s.cfg.AllowRelease, "poll_ms": s.cfg.Poll.Milliseconds(),
		"counters": s.counters})
	write := func(msgs ...[]byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		for _, m := range msgs {
			if _, err := w.Write(m); err != nil {
				return false
			}
		}
		return rc.Flush() == nil
	}
	if !write(append([]byte("retry: 1000\n\n"), message("hello", hello)...)) || !write(past...) {
		return
	}
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-keepAlive.C:
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
		case m := <-c.ch:
			batch := [][]byte{m}
			for more := true; more && len(batch) < 64; {
				select {
				case m := <-c.ch:
					batch = append(batch, m)
				default:
					more = false
				}
			}
			if n := c.lagged.Swap(0); n > 0 {
				batch = append(batch, message("lagged", []byte(`{"dropped":`+strconv.FormatInt(n, 10)+`}`)))
			}
			if !write(batch...) {
				return
			}
		}
	}
}

// refresh sends the new state of each lock changed by an event of these
// Locks, gathering changes for cfg.Refresh.
func (s *Server) refresh() {
	defer s.wg.Done()
	for {
		select {
		case <-s.done:
			return
		case <-s.cfg.Hub.wake:
		}
		select {
		case <-s.done:
			return
		case <-time.After(s.cfg.Refresh):
		}
		s.refreshLocks(s.cfg.Hub.takeDirty())
	}
}

// manyDirty is how many changed locks are read with one List rather than
// one State each.
const manyDirty = 32

func (s *Server) refreshLocks(names []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if len(names) > manyDirty {
		states, err := s.cfg.Locks.List(ctx)
		if err == nil {
			dirty := make(map[string]struct{}, len(names))
			for _, n := range names {
				dirty[n] = struct{}{}
			}
			for _, st := range states {
				if _, ok := dirty[st.Name]; ok {
					delete(dirty, st.Name)
					s.sendState(st, true)
				}
			}
			names = names[:0]
			for n := range dirty { // not listed: family members no longer in use
				names = append(names, n)
			}
		}
	}
	for _, name := range names {
		st, err := s.cfg.Locks.StateDetail(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			s.gone([]string{name}) // deleted (Locks.Delete), or a member no longer in use
			continue
		}
		if err != nil {
			continue // the store is down: the next poll or event tells
		}
		s.sendState(st, true)
	}
}

// sendState sends st to the streams when it differs from what was last
// seen of it (always when force).
func (s *Server) sendState(st store.State, force bool) {
	fp := fingerprint(st)
	s.mu.Lock()
	same := s.seen[st.Name] == fp
	s.seen[st.Name] = fp
	s.mu.Unlock()
	if same && !force || s.cfg.Hub.streams() == 0 {
		return
	}
	b, err := json.Marshal(lockview.Of(st))
	if err != nil {
		return
	}
	s.cfg.Hub.send(st.Name, message("lock", b))
}

// poll reads the store every cfg.Poll while a stream is open, to show
// what other processes change.
func (s *Server) poll() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		s.pollOnce(false)
	}
}

// pollOnce reads the store's locks (and counters) and sends what changed
// since the last poll: the locks' new states and the events they imply.
// The first poll after no stream was open (prime) only records what it
// read. With no stream open it reads nothing and forgets.
func (s *Server) pollOnce(prime bool) {
	s.pollMu.Lock()
	defer s.pollMu.Unlock()
	if s.cfg.Hub.streams() == 0 {
		s.watch = watch{}
		return
	}
	if prime && s.watch.primed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var stats []store.Stats
	if s.counters {
		// Before List: a change between the two reads is seen in the
		// list before it is counted, never counted before it is seen.
		var err error
		if stats, err = s.cfg.Locks.Stats(ctx); err != nil {
			return
		}
	}
	states, err := s.cfg.Locks.List(ctx)
	if err != nil {
		return
	}
	primed := s.watch.primed
	s.sendStates(states, primed)
	if !primed {
		s.watch = watch{primed: true, locks: make(map[string]snapshot, len(states)), stats: make(map[string]store.Stats, len(stats))}
		for _, st := range states {
			if !st.Family {
				s.watch.locks[st.Name] = snapshotOf(st)
			}
		}
		for _, st := range stats {
			s.watch.stats[st.Name] = st
		}
		return
	}
	s.cfg.Hub.publish(s.derive(states, stats))
}

// sendStates sends the states that changed since last seen, and "gone"
// for the locks no longer listed; unless send is false, when it only
// records them.
func (s *Server) sendStates(states []store.State, send bool) {
	live := make(map[string]struct{}, len(states))
	for _, st := range states {
		live[st.Name] = struct{}{}
		if send {
			s.sendState(st, false)
		} else {
			s.mu.Lock()
			s.seen[st.Name] = fingerprint(st)
			s.mu.Unlock()
		}
	}
	var gone []string
	s.mu.Lock()
	for name := range s.seen {
		if _, ok := live[name]; !ok {
			gone = append(gone, name)
		}
	}
	s.mu.Unlock()
	if send {
		s.gone(gone)
		return
	}
	s.mu.Lock()
	for _, name := range gone {
		delete(s.seen, name)
	}
	s.mu.Unlock()
}

// gone forgets the locks of names and sends "gone" for each that was seen.
func (s *Server) gone(names []string) {
	for _, name := range names {
		s.mu.Lock()
		_, seen := s.seen[name]
		delete(s.seen, name)
		s.mu.Unlock()
		if seen {
			b, _ := json.Marshal(map[string]string{"name": name})
			s.cfg.Hub.send(name, message("gone", b))
		}
	}
}

// fingerprint is what of a state shows on the page, clocks apart.
func fingerprint(st store.State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d %d", st.Slots, st.Running, st.Waiting)
	for _, h := range st.Holders {
		fmt.Fprintf(&b, "|h %q %q %d %d %d", h.Ref, h.Kind, h.Token, h.Count, h.Expires.UnixNano())
	}
	for _, q := range st.Queue {
		fmt.Fprintf(&b, "|q %q %q", q.Ref, q.Kind)
	}
	return b.String()
}
