package web

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sleeplock/sleeplock"
)

// clientBuffer is how many messages a stream may fall behind before
// messages are dropped for it (and it is sent a "lagged" marker).
const clientBuffer = 256

// recentEvents is how many past events a new stream is sent first.
const recentEvents = 100

// Hub is a sleeplock.Notifier that fans events out to the Server's event
// streams. Notify never blocks: a stream that falls behind loses messages
// and is told so. Give the Hub to sleeplock.WithNotifier and to Config.
type Hub struct {
	mu      sync.Mutex
	clients map[*client]struct{}
	recent  []item // ring of the last recentEvents events
	next    int
	own     owned               // this process's recent events, which the poll must not tell again
	dirty   map[string]struct{} // locks changed since the last refresh
	wake    chan struct{}       // a lock became dirty (capacity 1)
	dropped atomic.Int64
}

// NewHub returns a Hub with no streams.
func NewHub() *Hub {
	return &Hub{clients: map[*client]struct{}{}, dirty: map[string]struct{}{}, wake: make(chan struct{}, 1)}
}

// Dropped reports how many messages were dropped for streams that fell
// behind.
func (h *Hub) Dropped() int64 { return h.dropped.Load() }

// client is one event stream.
type client struct {
	prefix string
	ch     chan []byte
	lagged atomic.Int64
}

// item is one entry of the feed: an event of this process, an event of
// another process that the poll derived from the store's data, or a count
// of other processes' grants and releases the poll saw only in the
// counters.
type item struct {
	e      sleeplock.Event
	polled bool    // derived by the poll (e.Waited is known only when waited)
	waited bool    // polled acquired: e.Waited is known
	missed *missed // a count, not an event
}

// json is the item's stream message.
func (it item) json() []byte {
	if it.missed != nil {
		return message("missed", it.missed.json())
	}
	return message("event", eventJSON(it))
}

// Notify implements sleeplock.Notifier.
func (h *Hub) Notify(e sleeplock.Event) {
	h.mu.Lock()
	h.own.add(e)
	h.addLocked(item{e: e})
	if len(h.clients) > 0 && e.Type != sleeplock.EventRefused && e.Type != sleeplock.EventLost {
		h.dirty[e.Lock] = struct{}{}
	}
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// addLocked keeps it among the recent items and sends it to the streams
// that watch its lock.
func (h *Hub) addLocked(it item) {
	if len(h.recent) < recentEvents {
		h.recent = append(h.recent, it)
	} else {
		h.recent[h.next] = it
		h.next = (h.next + 1) % recentEvents
	}
	if len(h.clients) > 0 {
		h.sendLocked(it.e.Lock, it.json())
	}
}

// publish adds the items the poll derived, in order.
func (h *Hub) publish(items []item) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, it := range items {
		h.addLocked(it)
	}
}

// send gives msg, about lock, to the streams that watch lock.
func (h *Hub) send(lock string, msg []byte) {
	h.mu.Lock()
	h.sendLocked(lock, msg)
	h.mu.Unlock()
}

func (h *Hub) sendLocked(lock string, msg []byte) {
	for c := range h.clients {
		if !strings.HasPrefix(lock, c.prefix) {
			continue
		}
		select {
		case c.ch <- msg:
		default:
			c.lagged.Add(1)
			h.dropped.Add(1)
		}
	}
}

// subscribe adds a stream and returns it with the recent events it
// watches, oldest first.
func (h *Hub) subscribe(prefix string) (*client, [][]byte) {
	c := &client{prefix: prefix, ch: make(chan []byte, clientBuffer)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clients[c] = struct{}{}
	var past [][]byte
	for i := range h.recent {
		it := h.recent[(h.next+i)%len(h.recent)]
		if strings.HasPrefix(it.e.Lock, prefix) {
			past = append(past, it.json())
		}
	}
	return c, past
}

func (h *Hub) unsubscribe(c *client) {
	h.mu.Lock()
	delete(h.clients, c)
	h.mu.Unlock()
}

// takeDirty returns the locks changed since the last call.
func (h *Hub) takeDirty() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.dirty) == 0 {
		return nil
	}
	names := make([]string, 0, len(h.dirty))
	for n := range h.dirty {
		names = append(names, n)
	}
	clear(h.dirty)
	return names
}

func (h *Hub) streams() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// eventView is the JSON of an event on the stream.
type eventView struct {
	Type     string `json:"type"`
	Lock     string `json:"lock"`
	Slots    int    `json:"slots"`
	Running  int    `json:"running"`
	Waiting  int    `json:"waiting"`
	Ref      string `json:"ref,omitempty"`
	Kind     string `json:"kind,omitempty"`
	Token    int64  `json:"token,omitempty"`
	WaitedMS *int64 `json:"waited_ms,omitempty"`
	HeldMS   *int64 `json:"held_ms,omitempty"`
	Holder   string `json:"holder,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Time     string `json:"time"`
	Seq      uint64 `json:"seq,omitempty"`
	// Seen is "poll" for another process's event, derived by the poll
	// from the store's holders and queues: its time is the store's time of
	// a grant or a wait, and the time of the poll that saw a hold end
	// (held_ms is then the most it lasted).
	Seen string `json:"seen,omitempty"`
}

func eventJSON(it item) []byte {
	e := it.e
	v := eventView{Type: e.Type.String(), Lock: e.Lock, Slots: e.Slots, Running: e.Running, Waiting: e.Waiting,
		Ref: e.Ref, Kind: e.Kind, Token: e.Token, Holder: e.Holder, Seq: e.Seq}
	if it.polled {
		v.Seen = "poll"
	}
	if e.Type == sleeplock.EventAcquired && (!it.polled || it.waited) {
		ms := e.Waited.Milliseconds()
		v.WaitedMS = &ms
	}
	if e.Held != 0 {
		ms := e.Held.Milliseconds()
		v.HeldMS = &ms
	}
	if e.Reason != nil {
		v.Reason = e.Reason.Error()
	}
	t := e.Time
	if t.IsZero() {
		t = time.Now()
	}
	v.Time = t.UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(v) // plain fields: cannot fail
	return b
}

// message is one Server-Sent Event.
func message(event string, data []byte) []byte {
	b := make([]byte, 0, len(event)+len(data)+16)
	b = append(b, "event: "...)
	b = append(b, event...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}
