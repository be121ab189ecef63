package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock/store"
)

// ErrUnsafeServer is the error of Check and Open when the server's settings
// break locks.
var ErrUnsafeServer = errors.New("redisstore: server settings break locks")

// Check reads the settings of client's server that matter to locks. It
// returns an error matching ErrUnsafeServer when they break locks:
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
	cfg, cerr := client.ConfigGet(ctx, "*").Result()
	var bad []string
	if cerr != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
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
	info, ierr := client.Info(ctx, "replication").Result()
	if ierr != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return warnings, fmt.Errorf("redisstore: %w", ierr)
	}
	if strings.Contains(info, "role:slave") {
		bad = append(bad, "the server is a replica (connect to the primary)")
	}
	if len(bad) > 0 {
		return warnings, fmt.Errorf("%w: %s", ErrUnsafeServer, strings.Join(bad, "; "))
	}
	return warnings, nil
}
