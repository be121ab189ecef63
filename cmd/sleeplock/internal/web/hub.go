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
	recent  []sleeplock.Event // ring of the last recentEvents events
	next    int
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

// Notify implements sleeplock.Notifier.
func (h *Hub) Notify(e sleeplock.Event) {
	h.mu.Lock()
	if len(h.recent) < recentEvents {
		h.recent = append(h.recent, e)
	} else {
		h.recent[h.next] = e
		h.next = (h.next + 1) % recentEvents
	}
	if len(h.clients) > 0 {
		if e.Type != sleeplock.EventRefused && e.Type != sleeplock.EventLost {
			h.dirty[e.Lock] = struct{}{}
		}
		h.sendLocked(e.Lock, message("event", eventJSON(e)))
	}
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
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
		e := h.recent[(h.next+i)%len(h.recent)]
		if strings.HasPrefix(e.Lock, prefix) {
			past = append(past, message("event", eventJSON(e)))
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
}

func eventJSON(e sleeplock.Event) []byte {
	v := eventView{Type: e.Type.String(), Lock: e.Lock, Slots: e.Slots, Running: e.Running, Waiting: e.Waiting,
		Ref: e.Ref, Kind: e.Kind, Token: e.Token, Holder: e.Holder, Seq: e.Seq}
	if e.Type == sleeplock.EventAcquired {
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
