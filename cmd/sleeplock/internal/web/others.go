package web

// The events of other processes sharing a database store. They reach no
// notifier of this process, so the poll derives them from what the store
// publishes anyway: its holders and queues (List), which name who took,
// waited for and ended each hold, and its counters (Stats), which count
// the holds too short for any poll to see and time every wait. Nothing is
// added to the lock path: the store's NOTIFY (pgstore) carries wake-up
// hints for waiters only, and a notification per grant would serialise
// every committing grant on PostgreSQL's notification queue.

import (
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/store"
)

// ownEvents is how many of this process's recent events the poll
// recognises as its own (and does not tell again).
const ownEvents = 1024

// owned remembers this process's recent grants, ended holds and waits.
type owned struct {
	on   bool // the poll runs: remember
	keys map[string]struct{}
	ring []string
	next int
}

func (o *owned) add(e sleeplock.Event) {
	if !o.on {
		return
	}
	k, ok := ownKey(e)
	if !ok {
		return
	}
	if o.keys == nil {
		o.keys = make(map[string]struct{}, ownEvents)
	}
	if len(o.ring) < ownEvents {
		o.ring = append(o.ring, k)
	} else {
		delete(o.keys, o.ring[o.next])
		o.ring[o.next] = k
		o.next = (o.next + 1) % ownEvents
	}
	o.keys[k] = struct{}{}
}

// ownKey names the change e reports as the poll sees it: a grant or an
// end by lock and token, a wait by lock and ref.
func ownKey(e sleeplock.Event) (string, bool) {
	switch e.Type {
	case sleeplock.EventAcquired:
		return grantKey(e.Lock, e.Token), true
	case sleeplock.EventReleased, sleeplock.EventExpired, sleeplock.EventLost:
		return endKey(e.Lock, e.Token), true
	case sleeplock.EventWaiting:
		return waitKey(e.Lock, e.Ref), true
	}
	return "", false
}

func grantKey(lock string, token int64) string {
	return "+" + strconv.FormatInt(token, 10) + " " + lock
}
func endKey(lock string, token int64) string { return "-" + strconv.FormatInt(token, 10) + " " + lock }
func waitKey(lock, ref string) string        { return "w" + strconv.Itoa(len(ref)) + " " + ref + lock }

// isOwn reports whether this process reported the change of key.
func (h *Hub) isOwn(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.own.keys[key]
	return ok
}

// track makes the Hub remember its events for the poll.
func (h *Hub) track() {
	h.mu.Lock()
	h.own.on = true
	h.mu.Unlock()
}

// missed counts, for one lock or family, the grants and ended holds of
// other processes that the store's counters report and no poll saw (holds
// shorter than the poll), and the time those grants waited.
type missed struct {
	Lock     string  `json:"lock"`
	Acquired int64   `json:"acquired"`
	Ended    int64   `json:"ended"`
	WaitedMS float64 `json:"waited_ms"`
	Time     string  `json:"time"`
}

func (m *missed) json() []byte {
	b, _ := json.Marshal(m) // plain fields: cannot fail
	return b
}

// snapshot is what a poll saw of one lock.
type snapshot struct {
	now     time.Time
	holders map[int64]store.Holder // by fencing token
	queue   map[string]store.Waiter
}

func snapshotOf(st store.State) snapshot {
	s := snapshot{now: st.Now, holders: make(map[int64]store.Holder, len(st.Holders)), queue: make(map[string]store.Waiter, len(st.Queue))}
	for _, h := range st.Holders {
		s.holders[h.Token] = h
	}
	for _, q := range st.Queue {
		s.queue[q.Ref] = q
	}
	return s
}

// watch is what the poll remembers between two polls.
type watch struct {
	primed bool
	locks  map[string]snapshot
	stats  map[string]store.Stats
	// ahead counts, per Stats name, the grants and ends a poll saw before
	// the counters it read had them (they changed between the two reads):
	// the next poll's counters include them.
	ahead map[string][2]int64
}

// tally is one poll's account of one Stats name.
type tally struct {
	grants, ends int64 // seen: new holders, holders gone
	own          bool  // one of them was this process's
	unknown      []int // items of grants with no known wait
	known        time.Duration
}

// derive compares the states and counters read by a poll with the last
// ones and returns the items they imply: other processes' grants, waits
// and ended holds, then the counts of those the lists did not show.
func (s *Server) derive(states []store.State, stats []store.Stats) []item {
	w := &s.watch
	cur := make(map[string]snapshot, len(states))
	statsName := statsNames(stats)
	tallies := map[string]*tally{}
	var items []item
	for _, st := range states {
		if st.Family {
			continue
		}
		snap := snapshotOf(st)
		cur[st.Name] = snap
		prev, ok := w.locks[st.Name]
		if !ok {
			prev = snapshot{now: st.Now}
		}
		items = s.diffLock(items, st, prev, snap, tallyOf(tallies, statsName(st.Name)))
	}
	for name, prev := range w.locks { // no longer listed: a family member no longer in use
		if _, ok := cur[name]; !ok {
			st := store.State{Name: name, Now: prev.now}
			items = s.diffLock(items, st, prev, snapshot{now: prev.now}, tallyOf(tallies, statsName(name)))
		}
	}
	w.locks = cur
	if s.counters {
		items = w.account(items, stats, tallies)
	}
	return items
}

func tallyOf(m map[string]*tally, name string) *tally {
	t := m[name]
	if t == nil {
		t = &tally{}
		m[name] = t
	}
	return t
}

// statsNames returns the function that gives the Stats name a lock is
// counted under: its own, or its family's.
func statsNames(stats []store.Stats) func(string) string {
	families := map[string]bool{}
	for _, st := range stats {
		if st.Family {
			families[st.Name] = true
		}
	}
	return func(lock string) string {
		name := lock
		store.FamilyOf(lock, func(p string) bool {
			if families[p] {
				name = p
				return false
			}
			return true
		})
		return name
	}
}

// diffLock appends the items of one lock's change from prev to cur: ended
// holds first, then new waits, then grants in the order they were made.
func (s *Server) diffLock(items []item, st store.State, prev, cur snapshot, t *tally) []item {
	base := sleeplock.Event{Lock: st.Name, Slots: st.Slots, Running: st.Running, Waiting: st.Waiting}
	var ends, grants []store.Holder
	for tok, h := range prev.holders {
		if _, ok := cur.holders[tok]; !ok {
			ends = append(ends, h)
		}
	}
	for tok, h := range cur.holders {
		if _, ok := prev.holders[tok]; !ok {
			grants = append(grants, h)
		}
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].Token < ends[j].Token })
	sort.Slice(grants, func(i, j int) bool { return grants[i].Token < grants[j].Token })
	for _, h := range ends {
		t.ends++
		if s.cfg.Hub.isOwn(endKey(st.Name, h.Token)) {
			t.own = true
			continue
		}
		e := base
		e.Type, e.Ref, e.Kind, e.Token, e.Weight, e.Time = sleeplock.EventReleased, h.Ref, h.Kind, h.Token, h.Weight, cur.now
		if !h.Expires.IsZero() && !h.Expires.After(cur.now) {
			e.Type = sleeplock.EventExpired
		}
		if !h.Acquired.IsZero() {
			e.Held = cur.now.Sub(h.Acquired)
		}
		items = append(items, item{e: e, polled: true})
	}
	for _, q := range st.Queue { // queue order
		if _, ok := prev.queue[q.Ref]; ok || s.cfg.Hub.isOwn(waitKey(st.Name, q.Ref)) {
			continue
		}
		e := base
		e.Type, e.Ref, e.Kind, e.Weight, e.Time = sleeplock.EventWaiting, q.Ref, q.Kind, q.Weight, q.Since
		items = append(items, item{e: e, polled: true})
	}
	for _, h := range grants {
		t.grants++
		if s.cfg.Hub.isOwn(grantKey(st.Name, h.Token)) {
			t.own = true
			continue
		}
		e := base
		e.Type, e.Ref, e.Kind, e.Token, e.Weight, e.Time = sleeplock.EventAcquired, h.Ref, h.Kind, h.Token, h.Weight, h.Acquired
		it := item{e: e, polled: true}
		if q, ok := prev.queue[h.Ref]; ok && !q.Since.IsZero() && !h.Acquired.IsZero() {
			it.e.Waited, it.waited = max(0, h.Acquired.Sub(q.Since)), true
			t.known += it.e.Waited
		} else {
			t.unknown = append(t.unknown, len(items))
		}
		items = append(items, it)
	}
	return items
}

// account compares the grants and ends the lists showed with the
// counters: a grant whose wait alone is unknown gets it from the counters,
// and the grants and ends no list showed are counted in a missed item.
func (w *watch) account(items []item, stats []store.Stats, tallies map[string]*tally) []item {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	cur := make(map[string]store.Stats, len(stats))
	ahead := make(map[string][2]int64)
	for _, st := range stats {
		cur[st.Name] = st
		prev := w.stats[st.Name] // zero: new since the last poll
		t := tallyOf(tallies, st.Name)
		was := w.ahead[st.Name]
		grants := int64(st.Acquisitions-prev.Acquisitions) - was[0] - t.grants
		ends := int64(st.Releases+st.Expiries-prev.Releases-prev.Expiries) - was[1] - t.ends
		waited := st.Waits.Sum - prev.Waits.Sum - t.known
		if grants == 0 && was[0] == 0 && !t.own && len(t.unknown) == 1 {
			// Every grant counted was seen, one without its wait: the
			// counters have it.
			it := &items[t.unknown[0]]
			it.e.Waited, it.waited = max(0, waited), true
			waited = 0
		}
		if grants > 0 || ends > 0 {
			m := &missed{Lock: st.Name, Acquired: max(0, grants), Ended: max(0, ends), Time: now}
			if grants > 0 && len(t.unknown) == 0 {
				m.WaitedMS = float64(max(0, waited).Microseconds()) / 1000
			}
			items = append(items, item{e: sleeplock.Event{Lock: st.Name}, missed: m})
		}
		if grants < 0 || ends < 0 {
			ahead[st.Name] = [2]int64{-min(0, grants), -min(0, ends)}
		}
	}
	w.stats, w.ahead = cur, ahead
	return items
}
