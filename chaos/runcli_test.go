//go:build linux

package chaos_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock/chaos"
	"github.com/sleeplock/sleeplock/redisstore/redistest"
)

// cliChaosDuration is how long TestCLIChaos runs on each store: 20 s, or
// SLEEPLOCK_CHAOS_CLI (a duration) for a long run.
const cliChaosDuration = 20 * time.Second

var (
	cliOnce                  sync.Once
	cliSleeplock, cliCommand string
	cliBuildErr              error
)

// cliBins builds cmd/sleeplock and chaos/runcmd once per test run.
func cliBins(t *testing.T) (string, string) {
	t.Helper()
	cliOnce.Do(func() {
		cliDir, cliBuildErr = os.MkdirTemp("", "sleeplock-cli-chaos-bin-")
		if cliBuildErr == nil {
			cliSleeplock, cliCommand, cliBuildErr = chaos.BuildCLI(context.Background(), cliDir)
		}
	})
	if cliBuildErr != nil {
		t.Fatal(cliBuildErr)
	}
	return cliSleeplock, cliCommand
}

// cliStore is the --store and --schema of a store of the test's own:
// a SQLite file, a PostgreSQL schema (migrated, dropped at the end), or a
// Redis server on a free port.
func cliStore(t *testing.T, kind, sleeplock string) (string, string) {
	t.Helper()
	switch kind {
	case "postgres":
		pool := newPool(t)
		var b [6]byte
		_, _ = rand.Read(b[:])
		schema := "cli_chaos_" + hex.EncodeToString(b[:])
		t.Cleanup(func() {
			_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		})
		if out, err := exec.Command(sleeplock, "migrate", "--store", dbURL(), "--schema", schema).CombinedOutput(); err != nil {
			t.Fatalf("migrate: %v: %s", err, out)
		}
		return dbURL(), schema
	case "redis":
		return redistest.Start(t, 0).URL(), ""
	}
	return "sqlite:" + t.TempDir() + "/locks.db", ""
}

// TestCLIChaos: 8 shell loops run `sleeplock run --ttl 2s` of a 2-slot
// lock, each command (chaos/runcmd) with a child, while a killer sends
// SIGKILL to a random `sleeplock run` every 0.1–0.9 s, on every store.
// Never more than 2 commands are inside at once, their children included
// (counted by flocks that each command's tree holds till its last process
// ends), no process of a command's tree (nor a guard, nor a sleeplock) is
// left at the end, and every slot comes back.
func TestCLIChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run: not with -short")
	}
	d := cliChaosDuration
	if v := os.Getenv("SLEEPLOCK_CHAOS_CLI"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("SLEEPLOCK_CHAOS_CLI: %v", err)
		}
	}
	for _, kind := range []string{"sqlite", "postgres", "redis"} {
		t.Run(kind, func(t *testing.T) {
			sleeplock, command := cliBins(t)
			st, schema := cliStore(t, kind, sleeplock)
			rep := runCLI(t, chaos.CLIConfig{Store: st, Schema: schema, SleeplockBin: sleeplock, CommandBin: command, Duration: d})
			if rep.Runs == 0 || rep.Kills == 0 {
				t.Errorf("%d runs, %d kills: the run did nothing", rep.Runs, rep.Kills)
			}
			if rep.MaxInside > 2 || rep.Over > 0 {
				t.Errorf("%d commands inside at once (%d entries over the 2 slots), want at most 2", rep.MaxInside, rep.Over)
			}
			if len(rep.Left) > 0 || !rep.SlotsBack {
				t.Errorf("left behind: %v processes; every slot back: %v", rep.Left, rep.SlotsBack)
			}
		})
	}
}

// TestCLIChaosNegativeControl: the same on SQLite, but each command's
// child leaves its process group (setsid, as a daemon does), out of run's
// reach, and outlives its command: the count must find more commands
// inside than slots, and processes left. If it did not, it could not be
// trusted to find them in TestCLIChaos.
func TestCLIChaosNegativeControl(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run: not with -short")
	}
	sleeplock, command := cliBins(t)
	st, _ := cliStore(t, "sqlite", sleeplock)
	rep := runCLI(t, chaos.CLIConfig{Store: st, SleeplockBin: sleeplock, CommandBin: command, Duration: 3 * time.Second, Escape: true})
	if rep.MaxInside <= 2 || rep.Over == 0 {
		t.Errorf("at most %d commands inside at once with their children escaping: the count misses them", rep.MaxInside)
	}
	if len(rep.Left) == 0 {
		t.Errorf("no process left with the children escaping: the check for them misses them")
	}
}

func runCLI(t *testing.T, cfg chaos.CLIConfig) *chaos.CLIReport {
	t.Helper()
	cfg.Log = logWriter{t}
	rep, err := chaos.RunCLI(context.Background(), cfg)
	if rep != nil {
		var b strings.Builder
		rep.Write(&b)
		t.Log("\n" + b.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
