package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock/store"
)

// ErrUnsafeServer is the error of Check and Open when the server's settings
// break locks.
var ErrUnsafeServer = errors.New("redisstore: server settings break locks")

// Check reads the settings of client's server (of every primary of a
// *redis.ClusterClient, each warning and refusal naming its node) that
// matter to locks. It returns an error matching ErrUnsafeServer when they
// break locks:
//   - maxmemory-policy other than noeviction: Redis may evict a lock's key
//     under memory pressure, and the lock is then free while its holder
//     believes it holds it;
//   - the server is a replica: writes fail (or, with replica-read-only
//     off, stay on the replica).
//
// It returns warnings for settings that weaken guarantees without
// breaking them: no persistence (appendonly no and no save points: every
// lock vanishes when the server restarts; fencing tokens still never go
// down, see docs/guarantees.md), or settings it could not read (CONFIG
// disabled, as on some managed services).
func Check(ctx context.Context, client redis.UniversalClient) (warnings []string, err error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if client == nil {
		return nil, store.Invalid(store.ErrInvalidConfig, "client", "is nil")
	}
	var bad []string
	if cc, ok := client.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			w, b, err := checkServer(ctx, c)
			mu.Lock()
			defer mu.Unlock()
			for _, x := range w {
				warnings = append(warnings, c.Options().Addr+": "+x)
			}
			for _, x := range b {
				bad = append(bad, c.Options().Addr+": "+x)
			}
			return err
		})
		sort.Strings(warnings)
		sort.Strings(bad)
	} else {
		warnings, bad, err = checkServer(ctx, client)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return warnings, fmt.Errorf("redisstore: %w", err)
	}
	if len(bad) > 0 {
		return warnings, fmt.Errorf("%w: %s", ErrUnsafeServer, strings.Join(bad, "; "))
	}
	return warnings, nil
}

// checkServer reads the settings of one server: what breaks locks (bad)
// and what weakens them (warnings).
func checkServer(ctx context.Context, c redis.Cmdable) (warnings, bad []string, err error) {
	cfg, cerr := c.ConfigGet(ctx, "*").Result()
	if cerr != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		warnings = append(warnings, "cannot read the server's settings ("+cerr.Error()+"): eviction policy and persistence not checked")
	} else {
		if p := cfg["maxmemory-policy"]; p != "" && p != "noeviction" {
			bad = append(bad, fmt.Sprintf("maxmemory-policy is %s (evicted keys drop locks; set noeviction)", p))
		}
		if cfg["appendonly"] != "yes" && strings.TrimSpace(cfg["save"]) == "" {
			warnings = append(warnings, "the server keeps nothing on disk (appendonly no, no save points): locks vanish when it restarts")
		}
	}
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return warnings, bad, err
	}
	if strings.Contains(info, "role:slave") {
		bad = append(bad, "the server is a replica (connect to the primary)")
	}
	return warnings, bad, nil
}
