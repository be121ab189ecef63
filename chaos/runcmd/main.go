//go:build linux

// Command runcmd is what each `sleeplock run` of the CLI chaos run
// (chaos.RunCLI) runs: it counts the commands inside, children included,
// and holds a while (chaos.CLICommand).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sleeplock/sleeplock/chaos"
)

func main() {
	var c chaos.CLICommand
	child := flag.Bool("child", false, "be the command's child (holds the marker on fd 3)")
	flag.StringVar(&c.Dir, "dir", "", "the run's directory: markers, mutex and ledger")
	flag.DurationVar(&c.Hold, "hold", 300*time.Millisecond, "hold at most this long (the child: this long)")
	flag.BoolVar(&c.Escape, "escape", false, "the negative control: the child leaves the process group (setsid)")
	flag.Parse()
	run := c.Run
	if *child {
		run = c.Child
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "runcmd:", err)
		os.Exit(1)
	}
}
