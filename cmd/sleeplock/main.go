// Command sleeplock runs commands under named concurrency locks and shows
// the locks' state. Run "sleeplock help" for the commands.
//
// Exit status: 0 on success, 1 on an error, 2 for a bad command line, 130
// when interrupted (SIGINT) and 143 when terminated (SIGTERM).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sleeplock/sleeplock/cmd/sleeplock/internal/cli"
)

func main() { os.Exit(run(os.Args[1:])) }

// run runs the command line args; the first SIGINT or SIGTERM cancels the
// command's context, and a second one kills the process as usual.
func run(args []string) int {
	interrupted, stopInt := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stopInt()
	ctx, stopTerm := signal.NotifyContext(interrupted, syscall.SIGTERM)
	defer stopTerm()
	// Once cancelled, stop catching: a second signal ends the process.
	context.AfterFunc(interrupted, stopInt)
	context.AfterFunc(ctx, stopTerm)
	code := cli.Main(ctx, args, os.Stdout, os.Stderr)
	switch {
	case interrupted.Err() != nil:
		return cli.StatusInterrupted
	case ctx.Err() != nil:
		return 128 + int(syscall.SIGTERM)
	}
	return code
}
