package redisstore

import (
	"context"
	"embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock/store"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// script returns the script of an operation: lua/common.lua, then
// lua/NAME.lua. Each operation is one call of its script: one round trip,
// atomic on the server.
func script(name string) *redis.Script {
	common, err := luaFiles.ReadFile("lua/common.lua")
	if err != nil {
		panic(err)
	}
	body, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(common) + "\n" + string(body))
}

var (
	scriptAcquire   = script("acquire")
	scriptRelease   = script("release")
	scriptKeep      = script("keep")
	scriptHeld      = script("held")
	scriptState     = script("state")
	scriptList      = script("list")
	scriptStats     = script("stats")
	scriptDefine    = script("define")
	scriptResize    = script("resize")
	scriptLeave     = script("leave")
	scriptHeartbeat = script("heartbeat")
	scriptClose     = script("close")
	scriptGuard     = script("guard")
	scriptRelabel   = script("relabel")
)

// reply is a script's answer: {status, now µs, events, messages for this
// node, ...}.
type reply struct {
	status string
	now    int64
	events []any
	local  []any
	rest   []any
}

// run runs sc with keys and args (after the prefix and the node), then
// emits its events to ev and delivers its messages for this node, before
// any State, List or Stats of this store runs (see order).
func (s *Store) run(ctx context.Context, sc *redis.Script, ev store.Emitter, keys []string, args ...any) (reply, error) {
	s.order.RLock()
	defer s.order.RUnlock()
	return s.exec(ctx, sc, ev, keys, args...)
}

// exec runs sc as run does, without ordering it.
func (s *Store) exec(ctx context.Context, sc *redis.Script, ev store.Emitter, keys []string, args ...any) (reply, error) {
	if s.closed.Load() {
		return reply{}, store.ErrClosed
	}
	v, err := sc.Run(ctx, s.c, keys, append([]any{s.cfg.prefix, s.id}, args...)...).Result()
	if err != nil {
		if ctx.Err() != nil {
			return reply{}, ctx.Err()
		}
		return reply{}, fmt.Errorf("redisstore: %w", err)
	}
	r, err := parseReply(v)
	if err == nil {
		s.after(ev, &r)
	}
	return r, err
}

// look runs a script that only reads (State, List, Stats) once every
// change this store made has had its events emitted: an observer that
// sees a change has its event already.
func (s *Store) look(f func() error) error {
	s.order.Lock()
	defer s.order.Unlock()
	return f()
}

// call is one call of a script in runEach.
type call struct {
	keys []string
	args []any
}

// runEach runs sc once per call in one pipeline (one round trip; on Redis
// Cluster, the calls may name keys of different slots).
func (s *Store) runEach(ctx context.Context, sc *redis.Script, calls []call) ([]reply, error) {
	for attempt := 0; ; attempt++ {
		cmds := make([]*redis.Cmd, len(calls))
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, c := range calls {
				cmds[i] = sc.EvalSha(ctx, p, c.keys, append([]any{s.cfg.prefix, s.id}, c.args...)...)
			}
			return nil
		})
		if err != nil && attempt == 0 && redis.HasErrorPrefix(err, "NOSCRIPT") {
			if err := sc.Load(ctx, s.c).Err(); err != nil {
				return nil, fmt.Errorf("redisstore: %w", err)
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("redisstore: %w", err)
		}
		out := make([]reply, len(cmds))
		for i, c := range cmds {
			if out[i], err = parseReply(c.Val()); err != nil {
				return nil, err
			}
			s.after(nil, &out[i])
		}
		return out, nil
	}
}

func parseReply(v any) (reply, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 4 {
		return reply{}, fmt.Errorf("redisstore: unexpected reply %v", v)
	}
	r := reply{status: str(a[0]), now: integer(a[1]), events: list(a[2]), local: list(a[3]), rest: a[4:]}
	return r, nil
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

func integer(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

func list(v any) []any {
	a, _ := v.([]any)
	return a
}

func (r *reply) arg(i int) any {
	if i < len(r.rest) {
		return r.rest[i]
	}
	return nil
}

func micros(d time.Duration) int64 { return d.Microseconds() }

func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

func durMicros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// after emits r's events to ev, then delivers r's messages for this
// node: a waiter granted here emits its events after the release's.
func (s *Store) after(ev store.Emitter, r *reply) {
	emit(ev, r.now, r.events)
	for _, m := range r.local {
		s.deliver(str(m))
	}
}

// emit sends the events of r to ev.
func emit(ev store.Emitter, now int64, evs []any) {
	if ev == nil {
		return
	}
	for _, x := range evs {
		if e, ok := toEvent(list(x), now); ok {
			ev.Emit(e)
		}
	}
}

// toEvent reads an event of lua/common.lua's event(): {type, lock, slots,
// running, waiting, ref, kind, token, weight, waited, held, holder, seq,
// lost}.
func toEvent(a []any, now int64) (store.Event, bool) {
	if len(a) < 13 {
		return store.Event{}, false
	}
	return store.Event{
		Type: store.EventType(integer(a[0])), Lock: str(a[1]), Slots: int(integer(a[2])),
		Running: int(integer(a[3])), Waiting: int(integer(a[4])), Ref: str(a[5]), Kind: str(a[6]),
		Token: integer(a[7]), Weight: int(integer(a[8])), Waited: durMicros(integer(a[9])),
		Held: durMicros(integer(a[10])), Holder: str(a[11]), Seq: uint64(integer(a[12])), Time: fromMicros(now),
	}, true
}

func quote(s string) string { return strconv.Quote(s) }
