// Command electcmd is what each `sleeplock elect` of the election chaos run
// (chaos.RunElection) runs while it leads: writes of its term's token
// under Guard, recorded in the run's ledger (chaos.ElectCommand).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sleeplock/sleeplock/chaos"
)

func main() {
	var c chaos.ElectCommand
	flag.StringVar(&c.DSN, "dsn", "", "the database")
	flag.StringVar(&c.Ledger, "ledger", "", "the ledger file")
	flag.IntVar(&c.Writes, "writes", 25, "writes before exiting")
	flag.DurationVar(&c.Every, "every", 40*time.Millisecond, "time between writes")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := c.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "electcmd:", err)
		os.Exit(1)
	}
}
