package sleeplock

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/sleeplock/sleeplock/store"
)

// Event is one change of a lock, delivered to a Notifier. Lock and Slots are
// the metadata ({name, slots}); Running and Waiting are the state after the
// change; Waited (acquired) and Held (released, expired, lost) are
// durations; Holder (refused) is the kind of what holds the lock; Reason
// (lost) says why.
type Event = store.Event

// EventType names an event.
type EventType = store.EventType

// The events: a lock created, a slot acquired, released or waited for, an
// acquisition refused, a lease expired or lost, a lock resized or deleted. No event is sent for a
// re-entrant acquire, a release that freed nothing or a failed renewal that
// is retried.
const (
	EventCreated  = store.EventCreated
	EventAcquired = store.EventAcquired
	EventReleased = store.EventReleased
	EventWaiting  = store.EventWaiting
	EventRefused  = store.EventRefused
	EventExpired  = store.EventExpired
	EventLost     = store.EventLost
	EventResized  = store.EventResized
	EventDeleted  = store.EventDeleted
)

// Notifier receives events. Given to WithNotifier, Notify is called on a
// goroutine of sleeplock's, one event at a time, never on the lock path, so
// a slow notifier delays only later events (they queue in memory), its own
// and those of the other notifiers of WithNotifier. Given to
// WithInlineNotifier, it is called on the lock path itself, by the caller
// whose call made the change (see there). Events arrive in the order the
// store made them, except that on a database store two changes of one lock
// made at once by different goroutines may arrive swapped: Event.Seq orders
// the events of a lock as the store made them, across every process that
// shares the store, and Running and Waiting are the state right after each
// change.
//
// A Notify that panics does not take the process down, nor the lock that
// sent the event: the panic is recovered, that notifier misses that event,
// the panic is counted (Locks.NotifierPanics), and the first panic of each
// notifier is logged with its stack through slog.Default. The other
// notifiers still get that event, and the one that panicked gets the next.
type Notifier interface {
	Notify(Event)
}

// NotifierFunc adapts a function to a Notifier.
type NotifierFunc func(Event)

// Notify calls f(e); a nil f does nothing.
func (f NotifierFunc) Notify(e Event) {
	if f != nil {
		f(e)
	}
}

// LogEvents returns a Notifier that logs each event to logger (slog.Default()
// when logger is nil): expired and lost at level Warn; created, resized, deleted and
// refused at Info; acquired, released and waiting — one or more per
// acquisition — at Debug, so a logger at its default level (Info, as
// slog.Default) shows the changes and refusals without a line per grant. Set
// the handler's level to Debug to see every event.
func LogEvents(logger *slog.Logger) Notifier {
	if logger == nil {
		logger = slog.Default()
	}
	return NotifierFunc(func(e Event) {
		level := slog.LevelDebug
		switch e.Type {
		case EventExpired, EventLost:
			level = slog.LevelWarn
		case EventCreated, EventResized, EventRefused, EventDeleted:
			level = slog.LevelInfo
		}
		attrs := []slog.Attr{
			slog.String("lock", e.Lock), slog.Int("slots", e.Slots),
			slog.Int("running", e.Running), slog.Int("waiting", e.Waiting),
		}
		if e.Ref != "" {
			attrs = append(attrs, slog.String("ref", e.Ref))
		}
		if e.Kind != "" {
			attrs = append(attrs, slog.String("kind", e.Kind))
		}
		if e.Token != 0 {
			attrs = append(attrs, slog.Int64("token", e.Token))
		}
		if e.Waited != 0 {
			attrs = append(attrs, slog.Duration("waited", e.Waited))
		}
		if e.Held != 0 {
			attrs = append(attrs, slog.Duration("held", e.Held))
		}
		if e.Holder != "" {
			attrs = append(attrs, slog.String("holder", e.Holder))
		}
		if e.Seq != 0 {
			attrs = append(attrs, slog.Uint64("seq", e.Seq))
		}
		if e.Reason != nil {
			attrs = append(attrs, slog.String("reason", e.Reason.Error()))
		}
		logger.LogAttrs(context.Background(), level, "sleeplock "+e.Type.String(), attrs...)
	})
}

// guarded calls a notifier, recovering its panics: each is counted in
// panics (the Locks'), and the first is logged.
type guarded struct {
	n      Notifier
	panics *atomic.Int64
	logged atomic.Bool
}

func (l *Locks) guard(n Notifier) *guarded { return &guarded{n: n, panics: &l.panics} }

func (g *guarded) Notify(e Event) {
	defer func() {
		if v := recover(); v != nil {
			g.recovered(v, e)
		}
	}()
	g.n.Notify(e)
}

func (g *guarded) recovered(v any, e Event) {
	g.panics.Add(1)
	if g.logged.CompareAndSwap(false, true) {
		slog.Default().LogAttrs(context.Background(), slog.LevelError,
			"sleeplock: a Notifier panicked; it missed the event, and its later panics are only counted (Locks.NotifierPanics)",
			slog.String("notifier", fmt.Sprintf("%T", g.n)), slog.String("event", e.Type.String()),
			slog.String("lock", e.Lock), slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
	}
}

// NotifierPanics returns how many calls of these Locks' notifiers (Notify)
// panicked: each was recovered, and its notifier missed that event. 0 for
// a nil Locks.
func (l *Locks) NotifierPanics() int64 {
	if l == nil {
		return 0
	}
	return l.panics.Load()
}

// dispatcher queues events and delivers them on a goroutine that runs only
// while the queue is not empty: each event to every notifier, in the order
// they were given, before the next event.
type dispatcher struct {
	ns      []*guarded // set before the Locks are used; read-only after
	mu      sync.Mutex
	q       []Event
	running bool
	idle    *sync.Cond // signalled when running turns false
}

func newDispatcher() *dispatcher {
	d := &dispatcher{}
	d.idle = sync.NewCond(&d.mu)
	return d
}

// addNotifier adds n to the notifiers of WithNotifier: the first makes the
// queue, the others join it.
func (l *Locks) addNotifier(n Notifier) {
	if l.ev == nil {
		l.ev = newDispatcher()
	}
	l.ev.ns = append(l.ev.ns, l.guard(n))
	l.setEmitter()
}

func (d *dispatcher) Emit(e Event) {
	d.mu.Lock()
	d.q = append(d.q, e)
	if !d.running {
		d.running = true
		go d.drain()
	}
	d.mu.Unlock()
}

func (d *dispatcher) drain() {
	var batch []Event
	for {
		d.mu.Lock()
		if len(d.q) == 0 {
			d.running = false
			d.idle.Broadcast()
			d.mu.Unlock()
			return
		}
		batch, d.q = d.q, batch[:0]
		d.mu.Unlock()
		for i := range batch {
			for _, n := range d.ns {
				n.Notify(batch[i])
			}
			batch[i] = Event{}
		}
	}
}

// flush waits until every queued event has been delivered.
func (d *dispatcher) flush() {
	d.mu.Lock()
	for d.running {
		d.idle.Wait()
	}
	d.mu.Unlock()
}

// inlineEmitter calls one inline notifier.
type inlineEmitter struct{ n *guarded }

func (e inlineEmitter) Emit(ev Event) { e.n.Notify(ev) }

// fanout calls the inline notifiers, then queues for the others.
type fanout struct {
	inline []*guarded
	queued *dispatcher // nil without WithNotifier
}

func (f *fanout) Emit(ev Event) {
	for _, n := range f.inline {
		n.Notify(ev)
	}
	if f.queued != nil {
		f.queued.Emit(ev)
	}
}
