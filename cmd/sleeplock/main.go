// Command sleeplock runs commands under named concurrency locks and shows
// the locks' state. Run "sleeplock help" for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sleeplock/sleeplock/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
