// Command sleeplock runs commands under named concurrency locks and shows
// the locks' state. Run "sleeplock help" for the commands.
//
// Exit status: 0 on success, 1 on an error, 2 for a bad command line or
// value, 128+N when signal N (SIGINT, SIGTERM) cut a command short. A
// command that a signal ends as it should exits 0: "serve", "state
// --watch" and "leader --watch" stop, "run" exits with its command's
// status ("sleeplock help run" lists its statuses).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/sleeplock/sleeplock/cmd/sleeplock/internal/cli"
)

func main() {
	redis.SetLogger(quietRedis{})
	os.Exit(run(os.Args[1:]))
}

// quietRedis drops the Redis client's own log lines (one per failed dial
// of its pool, a dozen before a command gives up on a server that does
// not answer): the command reports the error that ends it.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// run runs the command line args. The first SIGINT or SIGTERM cancels the
// command's context with a *cli.SignalError cause; a second one ends the
// process as usual (sleeplock run catches its own and passes them on).
func run(args []string) int {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	caught := make(chan struct{})
	go func() {
		defer close(caught)
		sig, ok := <-sigs
		if !ok {
			return
		}
		signal.Stop(sigs) // a second signal ends the process
		cancel(&cli.SignalError{Signal: sig.(syscall.Signal)})
	}()
	code := cli.Main(ctx, args, os.Stdout, os.Stderr)
	signal.Stop(sigs)
	close(sigs)
	<-caught
	return code
}
