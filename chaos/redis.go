package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/redisstore"
	"github.com/sleeplock/sleeplock/redisstore/redistest"
)

// FaultClientPause is CLIENT PAUSE ALL of the Redis server for PauseFor:
// Redis runs only, and not by default (it pauses every client of the
// server, not only the run's: for a server of the run's own). Every lease
// expires on the server's clock meanwhile and no node can beat, so when it
// ends the holders, the waiters and the heartbeats all find themselves
// late at once.
const FaultClientPause = "client-pause"

// redisPrefix is the key prefix of a Redis run whose ledger schema is
// schema: the store's keys and the guarded resources are all under it.
func redisPrefix(schema string) string { return schema + ":" }

// resourceKey is the Redis list of the writes accepted for lock name:
// under the run's prefix, in the lock's hash slot (a Tx's keys must share
// it on Redis Cluster), apart from the store's own keys (which begin with
// prefix + "{").
func resourceKey(prefix, name string) string {
	return prefix + "w:" + redisstore.KeyTag(name) + ":" + name
}

// redisClient is a client of the Redis server at rawURL whose connections
// are named name (CLIENT LIST shows it; the driver cuts them by it).
func redisClient(rawURL, name string) (*redis.Client, error) {
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, invalid(fmt.Sprintf("Redis URL %q: %v", redactURL(rawURL), err))
	}
	o.ClientName = name
	return redis.NewClient(o), nil
}

// redactURL is rawURL without its password, for messages.
func redactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

// openRedis opens a worker's store: redisstore on its own client (named
// AppName), under the run's prefix.
func openRedis(ctx context.Context, c WorkerConfig) (*redisstore.Store, *redis.Client, error) {
	rc, err := redisClient(c.DSN, c.AppName)
	if err != nil {
		return nil, nil, err
	}
	opts := []redisstore.Option{redisstore.WithPrefix(redisPrefix(c.Schema))}
	if c.WaiterTTL > 0 {
		opts = append(opts, redisstore.WithWaiterTTL(c.WaiterTTL))
	}
	s, err := redisstore.New(ctx, rc, opts...)
	if err != nil {
		_ = rc.Close()
		return nil, nil, err
	}
	return s, rc, nil
}

// SetupRedis defines a Redis run's locks under prefix on the server at
// rawURL (defineLocks). The guarded resources need nothing: each is a list
// that its first write creates.
func SetupRedis(ctx context.Context, rawURL, prefix string) error {
	s, err := redisstore.Open(ctx, rawURL, redisstore.WithPrefix(prefix))
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	return defineLocks(ctx, s)
}

// observedRedis is the Redis server's clock just after a grant: the start
// of the holding's interval for the checker, on the clock of the grants
// and of the fenced writes.
func (w *worker) observedRedis(ctx context.Context) (*time.Time, error) {
	t, err := w.rc.Time(ctx).Result()
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// fencedRedis appends token to name's resource (a Redis list) through
// Guard: the write runs in the script that checks the lease, or not at
// all. The script reads the server's clock (TIME) as it writes: the
// write's time, on the clock of the grants, with nothing between the check
// and the write for a pause of this process to stretch.
func (w *worker) fencedRedis(ctx context.Context, lease sleeplock.Lease, name string, token int64) (t0, t1 time.Time, fromGuard bool, err error) {
	key := resourceKey(redisPrefix(w.c.Schema), name)
	var tx redisstore.Tx
	tx.Do(key, "TIME")
	tx.Do(key, "RPUSH", key, token)
	if err := lease.Guard(ctx, &tx); err != nil {
		return t0, t1, true, err
	}
	t, err := redisTime(tx.Results)
	return t, t, false, err
}

// redisTime reads the reply of TIME, the first of a Tx's results.
func redisTime(results []any) (time.Time, error) {
	if len(results) > 0 {
		if a, ok := results[0].([]any); ok && len(a) == 2 {
			s, err1 := strconv.ParseInt(fmt.Sprint(a[0]), 10, 64)
			us, err2 := strconv.ParseInt(fmt.Sprint(a[1]), 10, 64)
			if err1 == nil && err2 == nil {
				return time.Unix(s, us*1000), nil
			}
		}
	}
	return time.Time{}, fmt.Errorf("chaos: a fenced write's TIME: unexpected reply %v", results)
}

// cutRedis kills (CLIENT KILL) every connection of worker p to the Redis
// server: its store's commands and subscription, its clock's reads.
func (d *driver) cutRedis(ctx context.Context, p *proc) error {
	at, err := d.now(ctx)
	if err != nil {
		return err
	}
	list, err := d.rc.ClientList(ctx).Result()
	if err != nil {
		return fmt.Errorf("chaos: CLIENT LIST: %w", err)
	}
	n := 0
	for _, id := range clientIDs(list, p.app) {
		if d.rc.Do(ctx, "CLIENT", "KILL", "ID", id).Err() == nil {
			n++
		}
	}
	d.logf("killed %d Redis connections of %s", n, p.name)
	return d.record(ctx, FaultTerminate, p.name, at, nil, fmt.Sprintf("%d connections", n))
}

// clientIDs are the ids of the connections named name in the reply of
// CLIENT LIST.
func clientIDs(list, name string) []string {
	var ids []string
	for line := range strings.SplitSeq(list, "\n") {
		var id, n string
		for f := range strings.FieldsSeq(line) {
			if v, ok := strings.CutPrefix(f, "id="); ok {
				id = v
			} else if v, ok := strings.CutPrefix(f, "name="); ok {
				n = v
			}
		}
		if id != "" && n == name {
			ids = append(ids, id)
		}
	}
	return ids
}

// clientPause pauses every client of the Redis server (CLIENT PAUSE ALL)
// for PauseFor; the server ends the pause by itself. The run winds down
// only after it ended, as after a worker's pause.
func (d *driver) clientPause(ctx context.Context) error {
	at, err := d.now(ctx)
	if err != nil {
		return err
	}
	if err := d.rc.Do(ctx, "CLIENT", "PAUSE", d.cfg.PauseFor.Milliseconds(), "ALL").Err(); err != nil {
		return fmt.Errorf("chaos: CLIENT PAUSE: %w", err)
	}
	d.logf("paused every Redis client for %v", d.cfg.PauseFor)
	d.spell(FaultClientPause, "", at, func() {})
	return nil
}

// connectRedis makes the driver's client of a Redis run's server, and
// returns the function that deletes the run's keys and closes it.
func (d *driver) connectRedis(ctx context.Context) (func(), error) {
	rc, err := redisClient(d.cfg.Redis, "sleeplock-chaos-driver-"+d.run)
	if err != nil {
		return nil, err
	}
	if err := rc.Ping(ctx).Err(); err != nil {
		_ = rc.Close()
		return nil, fmt.Errorf("chaos: connecting to Redis: %w", err)
	}
	d.rc = rc
	return func() {
		if !d.cfg.KeepSchema {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := redistest.DropPrefix(ctx, rc, redisPrefix(d.schema)); err != nil {
				d.logf("deleting the run's Redis keys: %v", err)
			}
		}
		_ = rc.Close()
	}, nil
}

// RedisFindings is what a Redis run's resources hold at its end: each a
// list of the tokens of the writes Redis accepted through Guard, in the
// order it accepted them.
type RedisFindings struct {
	Accepted int64 // writes in the lists
	// Backwards counts, in the lists of the one-slot resources, the writes
	// whose token is lower than that of the write before: a fenced write
	// accepted after a newer holder's.
	Backwards int64
	// Missing counts the writes the ledger has (acknowledged to their
	// worker by Guard) that the lists do not: writes the server lost.
	Missing int64
}

// checkRedis reads the resources' lists and compares them with the
// ledger's accepted writes.
func (d *driver) checkRedis(ctx context.Context) (*RedisFindings, error) {
	f := &RedisFindings{}
	ledger := map[string]map[int64]int64{}
	err := collect(ctx, d.pool, "SELECT resource, token, count(*) FROM "+quote(d.schema)+".chaos_writes GROUP BY resource, token",
		func(r pgx.Rows) error {
			var res string
			var token, n int64
			if err := r.Scan(&res, &token, &n); err != nil {
				return err
			}
			if ledger[res] == nil {
				ledger[res] = map[int64]int64{}
			}
			ledger[res][token] = n
			return nil
		})
	if err != nil {
		return nil, err
	}
	names, slots := resources(d.cfg.Members)
	for i, name := range names {
		vals, err := d.rc.LRange(ctx, resourceKey(redisPrefix(d.schema), name), 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("chaos check: reading %s: %w", name, err)
		}
		tokens := make([]int64, len(vals))
		for j, v := range vals {
			if tokens[j], err = strconv.ParseInt(v, 10, 64); err != nil {
				return nil, fmt.Errorf("chaos check: %s holds %q", name, v)
			}
		}
		f.Accepted += int64(len(tokens))
		if slots[i] == 1 {
			f.Backwards += backwards(tokens)
		}
		f.Missing += missing(ledger[name], tokens)
	}
	return f, nil
}

// backwards counts the tokens lower than the one before them.
func backwards(tokens []int64) int64 {
	var n int64
	for i := 1; i < len(tokens); i++ {
		if tokens[i] < tokens[i-1] {
			n++
		}
	}
	return n
}

// missing counts the writes of ledger (token → count) that tokens lacks.
func missing(ledger map[int64]int64, tokens []int64) int64 {
	have := map[int64]int64{}
	for _, t := range tokens {
		have[t]++
	}
	var n int64
	for t, c := range ledger {
		n += max(0, c-have[t])
	}
	return n
}

// redisTyped reports whether err is an error of the Redis client a caller
// can tell apart without reading its text: a reply of the server (LOADING
// during a restart, …), a closed client or an exhausted pool.
func redisTyped(err error) bool {
	var re redis.Error
	return errors.As(err, &re) || errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout)
}
