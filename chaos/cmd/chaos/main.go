// Command chaos makes a chaos run of sleeplock's PostgreSQL, SQLite or Redis store
// (package chaos) and prints its report; it exits 1 when the run found a
// violation or a lost slot. For example, ten minutes with every fault,
// PostgreSQL restarts included (on a cluster of the run's own, a free port):
//
//	go run ./chaos/cmd/chaos -duration 10m -faults kill,pause,terminate,restart
//
// The SQLite store, a database file shared by the worker processes (the
// run's records in the PostgreSQL database of -dsn):
//
//	go run ./chaos/cmd/chaos -store sqlite:/tmp/chaos.db -duration 5m -faults kill,pause,readonly
//
// The Redis store, on a server of the caller's (the run's keys under a
// prefix of its own, deleted at its end; the run's records in the
// PostgreSQL database of -dsn). The client-pause fault pauses every client
// of the server: only on a server of the run's own. Restarts of the server
// are for TestChaosRedis, which starts a server of its own.
//
//	go run ./chaos/cmd/chaos -store redis://127.0.0.1:6379/0 -duration 5m
//	go run ./chaos/cmd/chaos -store redis://127.0.0.1:6391/0 -duration 5m -faults kill,pause,terminate,client-pause
//
// A failover (clusters of the run's own on free ports; root):
//
//	go run ./chaos/cmd/chaos -failover sync -duration 30s
//	go run ./chaos/cmd/chaos -failover async -stall 2s -duration 30s
//	go run ./chaos/cmd/chaos -failover sync -stall 2s -duration 30s
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
	faults := ""
	storeFlag := "postgres"
	failover := ""
	var stall time.Duration
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
	flag.StringVar(&faults, "faults", faults, "faults in turn: kill, pause, terminate, restart, readonly, client-pause (default kill,pause,terminate; kill,pause,readonly with SQLite; kill,terminate in a failover)")
	flag.StringVar(&storeFlag, "store", storeFlag, "the store: postgres, sqlite:PATH (a file the run creates and removes) or redis://HOST:PORT/DB (keys under a prefix of the run's own)")
	flag.StringVar(&failover, "failover", "", "sync or async: fail a primary over to its standby mid-run (clusters of the run's own)")
	flag.DurationVar(&stall, "stall", 0, "with -failover: stall the standby's WAL receiver this long before the primary dies")
	flag.DurationVar(&c.FaultEvery, "fault-every", 0, "time between faults (default: the TTL)")
	flag.DurationVar(&c.PauseFor, "pause-for", 0, "how long a worker stays paused (default: TTL + 1s)")
	flag.DurationVar(&c.WaiterBound, "waiter-bound", 0, "added to TTL + 1s in the liveness check")
	flag.IntVar(&c.ClusterPort, "cluster-port", 0, "port of the run's own cluster (restart fault; 0: a free port)")
	flag.BoolVar(&c.KeepSchema, "keep", false, "keep the run's schema")
	flag.IntVar(&c.Spare, "spare", 0, "workers never killed (paused and terminated like the others), whose memory is measured over the whole run")
	flag.Int64Var(&c.Ops, "ops", 0, "end the run once the workers have made this many operations (0: -duration alone)")
	flag.DurationVar(&c.ProgressEvery, "progress", time.Minute, "how often to log the operations so far and the workers' memory (with -v)")
	flag.Uint64Var(&c.Seed, "seed", 0, "seed (0: random)")
	verbose := flag.Bool("v", false, "log each fault")
	flag.Parse()
	switch {
	case faults == "none":
		c.Faults = []string{}
	case faults != "":
		c.Faults = strings.Split(faults, ",")
	}
	switch {
	case storeFlag == "postgres":
	case strings.HasPrefix(storeFlag, "sqlite:") && len(storeFlag) > len("sqlite:"):
		c.SQLite = strings.TrimPrefix(storeFlag, "sqlite:")
	case strings.HasPrefix(storeFlag, "redis://") || strings.HasPrefix(storeFlag, "rediss://"):
		c.Redis = storeFlag
	default:
		fmt.Fprintf(os.Stderr, "chaos: -store %q: postgres, sqlite:PATH or redis://…\n", storeFlag)
		os.Exit(2)
	}
	if *verbose {
		c.Log = os.Stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if failover != "" {
		if failover != "sync" && failover != "async" {
			fmt.Fprintf(os.Stderr, "chaos: -failover %q: sync or async\n", failover)
			os.Exit(2)
		}
		rep, err := chaos.RunFailover(ctx, chaos.FailoverConfig{Chaos: c, Sync: failover == "sync", Stall: stall})
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
		return
	}
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
