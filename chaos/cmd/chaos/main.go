// Command chaos makes a chaos run of sleeplock's PostgreSQL store (package
// chaos) and prints its report; it exits 1 when the run found a violation
// or a lost slot. For example, ten minutes with every fault, PostgreSQL
// restarts included (on a cluster of the run's own, port 5433):
//
//	go run ./chaos/cmd/chaos -duration 10m -faults kill,pause,terminate,restart
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/sleeplock/sleeplock/chaos"
)

func main() {
	var c chaos.Config
	dsn := os.Getenv("SLEEPLOCK_TEST_DATABASE_URL")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	faults := "kill,pause,terminate"
	flag.StringVar(&c.DSN, "dsn", dsn, "PostgreSQL DSN (not used with the restart fault: that runs on a cluster of its own)")
	flag.IntVar(&c.Workers, "workers", 3, "worker processes")
	flag.IntVar(&c.Goroutines, "goroutines", 4, "goroutines per worker")
	flag.IntVar(&c.Members, "members", 4, "members of the one-slot family in use")
	flag.DurationVar(&c.Duration, "duration", time.Minute, "how long to inject faults")
	flag.DurationVar(&c.TTL, "ttl", 2*time.Second, "lease TTL")
	flag.DurationVar(&c.WaiterTTL, "waiter-ttl", time.Second, "pgstore waiter TTL (0: pgstore's default)")
	flag.DurationVar(&c.Poll, "poll", 0, "pgstore poll interval (0: pgstore's default)")
	flag.DurationVar(&c.Hold, "hold", 30*time.Millisecond, "how long a holder holds")
	flag.IntVar(&c.Writes, "writes", 3, "guarded writes per holding")
	flag.BoolVar(&c.NoGuard, "no-guard", false, "write without Guard (the negative control: violations expected)")
	flag.BoolVar(&c.NoAcquireAll, "no-acquire-all", false, "workers never call AcquireAll")
	flag.StringVar(&faults, "faults", faults, "faults in turn: kill, pause, terminate, restart")
	flag.DurationVar(&c.FaultEvery, "fault-every", 0, "time between faults (default: the TTL)")
	flag.DurationVar(&c.PauseFor, "pause-for", 0, "how long a worker stays paused (default: TTL + 1s)")
	flag.DurationVar(&c.WaiterBound, "waiter-bound", 0, "added to TTL + 1s in the liveness check")
	flag.IntVar(&c.ClusterPort, "cluster-port", 5433, "port of the run's own cluster (restart fault)")
	flag.BoolVar(&c.KeepSchema, "keep", false, "keep the run's schema")
	flag.Uint64Var(&c.Seed, "seed", 0, "seed (0: random)")
	verbose := flag.Bool("v", false, "log each fault")
	flag.Parse()
	c.Faults = strings.Split(faults, ",")
	if faults == "" {
		c.Faults = []string{}
	}
	if *verbose {
		c.Log = os.Stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := chaos.Run(ctx, c)
	if rep != nil {
		rep.Write(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if !rep.OK() {
		os.Exit(1)
	}
}
