package redispeer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// answerHere is a go-redis hook that answers the commands of a pair in the
// client, as the server would, without sending them: what a pair costs
// then is the client's own work (the library, go-redis's command, no
// network and no server).
type answerHere struct{}

func (answerHere) DialHook(next redis.DialHook) redis.DialHook { return next }

func (answerHere) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (answerHere) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch c := cmd.(type) {
		case *redis.Cmd:
			if f, _ := cmd.Args()[1].(string); cmd.Name() == "fcall" && !strings.HasSuffix(f, "_release") {
				c.SetVal(time.Now().UnixMicro()) // lua/fast.lua's grant: the token, the server's clock
			} else {
				c.SetVal(int64(1)) // lua/fast.lua's release; redislock's release script
			}
		case *redis.BoolCmd:
			c.SetVal(true) // redislock's SET NX
		default:
			return next(ctx, cmd)
		}
		return nil
	}
}

// BenchmarkClient: b.N TryAcquire+Release pairs of one client with every
// command answered in the client (answerHere): the time and allocations
// per pair of each peer's client alone. The store is made, and the lock
// defined, on the server first.
func BenchmarkClient(b *testing.B) { benchPairs(b, answerHere{}) }
