package redisstore

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock/store"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// A function of the library: the name an operation is called by (FCALL),
// and that name boxed once, as an argument of the call.
type function struct {
	name string
	arg  any
}

// library is the Lua library of every operation: lua/common.lua and
// lua/fast.lua loaded once per server (FUNCTION LOAD), then one function
// per operation: lua/NAME.lua defines its steps and main(cx, argv), which
// the function calls with a new state of the call (begin), after the fast
// path for acquire and release (see fastPaths). Its name and its
// functions' carry a hash of its code, so that stores of other versions on
// the same server keep theirs. Each operation is one call of its function:
// one round trip, atomic on the server, with no setup of the shared code
// per call.
var library, libraryName = build()

var (
	fnAcquire   = fn("acquire")
	fnRelease   = fn("release")
	fnKeep      = fn("keep")
	fnHeld      = fn("held")
	fnState     = fn("state")
	fnList      = fn("list")
	fnStats     = fn("stats")
	fnResize    = fn("resize")
	fnDelete    = fn("delete")
	fnReconcile = fn("reconcile")
	fnLeave     = fn("leave")
	fnHeartbeat = fn("heartbeat")
	fnClose     = fn("close")
	fnGuard     = fn("guard")
	fnRelabel   = fn("relabel")
)

// operations are the functions of the library, by file name.
var operations = []string{"acquire", "release", "keep", "held", "state", "list", "stats",
	"resize", "delete", "reconcile", "leave", "heartbeat", "close", "guard", "relabel"}

// fastPaths are the functions of lua/fast.lua that answer an operation's
// common cases before its general path runs (nil: not one of them): the
// uncontended acquire, refused try and release.
var fastPaths = map[string]string{"acquire": "fastacquire", "release": "fastrelease"}

func readLua(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return string(b)
}

// build returns the library's code and name.
func build() (code, name string) {
	var body strings.Builder
	body.WriteString(readLua("common"))
	body.WriteString(readLua("fast"))
	for _, op := range operations {
		body.WriteString("\ndo\n" + readLua(op))
		body.WriteString("redis.register_function('@_" + op + "', function(KEYS, ARGV)\n")
		if f, ok := fastPaths[op]; ok {
			body.WriteString("local fast = " + f + "(KEYS, ARGV)\nif fast then return fast end\n")
		}
		body.WriteString("return main(begin(ARGV), ARGV)\nend)\nend\n")
	}
	sum := sha1.Sum([]byte(body.String()))
	name = "sleeplock_" + hex.EncodeToString(sum[:8])
	return "#!lua name=" + name + "\n" + strings.ReplaceAll(body.String(), "'@_", "'"+name+"_"), name
}

func fn(op string) function {
	n := libraryName + "_" + op
	return function{name: n, arg: n}
}

// load loads the library on the server (on every primary of a cluster).
func (s *Store) load(ctx context.Context) error {
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return c.FunctionLoadReplace(ctx, library).Err()
		})
	}
	return s.c.FunctionLoadReplace(ctx, library).Err()
}

// missing reports an error of a server that lacks the library (never
// loaded there, or lost in a restart).
func missing(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Function not found")
}

// reply is a script's answer: {status, now µs, events, messages for this
// node, ...}.
type reply struct {
	status string
	now    int64
	events []any
	local  []any
	rest   []any
}

// refusal is the error of the statuses every operation on a held lock
// answers alike: its lock is not defined, or its ref does not hold it;
// nil for any other status.
func (r reply) refusal() error {
	switch r.status {
	case "notfound":
		return store.NotFound(str(r.arg(0)))
	case "notheld":
		return store.ErrNotHeld
	}
	return nil
}

// run runs f with keys and args (after the prefix and the node), then
// emits its events to ev and delivers its messages for this node, before
// any State, List or Stats of this store runs (see order).
func (s *Store) run(ctx context.Context, f function, ev store.Emitter, keys []string, args ...any) (reply, error) {
	return s.runAll(ctx, f, ev, keys, append(s.withNode(len(args)), args...))
}

// runAll is run with all of f's arguments: the prefix and the node first
// (see withNode).
func (s *Store) runAll(ctx context.Context, f function, ev store.Emitter, keys []string, args []any) (reply, error) {
	return s.runCall(ctx, ev, fcall(f, keys, args))
}

// runCall is runAll with the whole command built (see callOf).
func (s *Store) runCall(ctx context.Context, ev store.Emitter, a []any) (reply, error) {
	s.order.RLock()
	defer s.order.RUnlock()
	return s.execCall(ctx, ev, a)
}

// callOf returns the start of a call of f with nkeys keys: FCALL, the
// function and nkeys, with room for the keys, the prefix and the node and
// n arguments after them. The hot paths build their calls in it, each
// argument boxed once (go-redis's FCall would copy keys and arguments
// into a slice of its own and box every key again).
func callOf(f function, nkeys, n int) []any {
	return append(make([]any, 0, 3+nkeys+2+n), "fcall", f.arg, nkeys)
}

// fcall returns the command of a call of f with keys and args.
func fcall(f function, keys []string, args []any) []any {
	a := callOf(f, len(keys), len(args))
	for _, k := range keys {
		a = append(a, k)
	}
	return append(a, args...)
}

// withNode returns an argument list of capacity n that starts with the
// prefix and the node, as every function's does.
func (s *Store) withNode(n int) []any {
	return append(make([]any, 0, n+2), s.head[:]...)
}

// exec runs f as run does, without ordering it.
func (s *Store) exec(ctx context.Context, f function, ev store.Emitter, keys []string, args ...any) (reply, error) {
	return s.execAll(ctx, f, ev, keys, append(s.withNode(len(args)), args...))
}

// execAll is exec with all of f's arguments. A server that lacks the
// library is given it, and f runs again.
func (s *Store) execAll(ctx context.Context, f function, ev store.Emitter, keys []string, args []any) (reply, error) {
	return s.execCall(ctx, ev, fcall(f, keys, args))
}

// execCall is execAll with the whole command built (see callOf).
func (s *Store) execCall(ctx context.Context, ev store.Emitter, a []any) (reply, error) {
	if s.closed.Load() {
		return reply{}, store.ErrClosed
	}
	v, err := s.send(ctx, a)
	if missing(err) {
		if err = s.load(ctx); err == nil {
			v, err = s.send(ctx, a)
		}
	}
	if err != nil {
		s.reroute(err)
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

// send sends a command of callOf, as go-redis's FCall does: a cluster
// client routes it by its first key.
func (s *Store) send(ctx context.Context, a []any) (any, error) {
	cmd := redis.NewCmd(ctx, a...)
	if a[2] != 0 {
		cmd.SetFirstKeyPos(3)
	}
	_ = s.c.Process(ctx, cmd)
	return cmd.Result()
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

// runEach runs f once per call in one pipeline (one round trip; on Redis
// Cluster, the calls may name keys of different slots). The calls that
// found no library run again once it is loaded.
func (s *Store) runEach(ctx context.Context, f function, calls []call) ([]reply, error) {
	cmds := make([]*redis.Cmd, len(calls))
	todo := make([]int, len(calls))
	for i := range todo {
		todo[i] = i
	}
	for attempt := 0; ; attempt++ {
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range todo {
				cmds[i] = p.FCall(ctx, f.name, calls[i].keys, append([]any{s.cfg.prefix, s.id}, calls[i].args...)...)
			}
			return nil
		})
		var again []int
		for _, i := range todo {
			if missing(cmds[i].Err()) {
				again = append(again, i)
			}
		}
		if len(again) > 0 && attempt == 0 {
			if err := s.load(ctx); err != nil {
				return nil, s.fail(ctx, err)
			}
			todo = again
			continue
		}
		if err != nil {
			return nil, s.fail(ctx, err)
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
	if n, ok := v.(int64); ok { // lua/fast.lua's grant (a token) or release (1)
		return reply{status: "int", now: n}, nil
	}
	a, ok := v.([]any)
	if ok && len(a) >= 2 {
		if st, _ := a[0].(string); len(st) == 1 {
			// A flat reply of lua/fast.lua (no events, no messages):
			// {G, now, token, expires, weight}, or {B, now, kind, ref,
			// expires, definition, slots, free}.
			return reply{status: flat[st], now: integer(a[1]), rest: a[2:]}, nil
		}
	}
	if !ok || len(a) < 4 {
		return reply{}, fmt.Errorf("redisstore: unexpected reply %v", v)
	}
	r := reply{status: str(a[0]), now: integer(a[1]), events: list(a[2]), local: list(a[3]), rest: a[4:]}
	return r, nil
}

// flat are the statuses of lua/fast.lua's flat replies.
var flat = map[string]string{"G": "fastgranted", "B": "fastbusy"}

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
