// Command worker is one process of the chaos test (package chaos): it takes
// the run's locks from several goroutines and writes to their resources
// while holding them, until SIGTERM, SIGINT or SIGKILL. The driver starts
// it; it prints "ready" on stdout once connected.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sleeplock/sleeplock/chaos"
)

func main() {
	c, err := chaos.ParseWorkerArgs(os.Args[1:], os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := chaos.RunWorker(ctx, c, func() { fmt.Println("ready") }); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "chaos worker %s: %v\n", c.Name, err)
		os.Exit(1)
	}
}
