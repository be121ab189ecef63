package sqlitestore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/sqlitestore"
	"github.com/sleeplock/sleeplock/store"
)

// helperMain runs this test binary as a helper process when the
// environment asks for one, and reports whether it did.
func helperMain() bool {
	role := os.Getenv("SQLITESTORE_HELPER")
	if role == "" {
		return false
	}
	os.Exit(runHelper(role, os.Args[1:]))
	return true
}

// runHelper: "hold DB LOCK" takes LOCK (TTL 10 min), says "ready" and waits
// to be killed; "queue DB LOCK ID OUT" waits for LOCK, appends ID to OUT and
// releases; "wait DB LOCK" queues for LOCK and waits forever; "open DB"
// opens DB and says what Open returned.
func runHelper(role string, args []string) int {
	if role == "pingpong" {
		n, _ := strconv.Atoi(args[2])
		return pingpong(args[0], args[1], n, args[3])
	}
	ctx := context.Background()
	if role == "open" {
		s, err := sqlitestore.Open(ctx, args[0])
		switch {
		case err == nil:
			_ = s.Close()
			fmt.Println("opened")
		case errors.Is(err, store.ErrInvalidConfig):
			fmt.Println("invalid config:", err)
		default:
			fmt.Println("error:", err)
		}
		return 0
	}
	s, err := sqlitestore.Open(ctx, args[0])
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	l := sleeplock.New(s, sleeplock.WithTTL(10*time.Minute))
	defer l.Close()
	switch role {
	case "hold":
		if _, err := l.TryAcquire(ctx, args[1], sleeplock.Ref("helper")); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("ready")
		select {}
	case "wait":
		fmt.Println("ready")
		_, err := l.Acquire(ctx, args[1])
		fmt.Println("error", err)
		return 1
	case "queue":
		lease, err := l.Acquire(ctx, args[1], sleeplock.Ref("helper-"+args[2]))
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		f, err := os.OpenFile(args[3], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			_, err = fmt.Fprintln(f, args[2])
			_ = f.Close()
		}
		if err := lease.Release(ctx); err != nil {
			fmt.Println("error", err)
			return 1
		}
		if err != nil {
			return 1
		}
		return 0
	}
	return 2
}

func openLocks(path string) (*sleeplock.Locks, error) {
	s, err := sqlitestore.Open(context.Background(), path)
	if err != nil {
		return nil, err
	}
	return sleeplock.New(s), nil
}

func writeFile(path, text string) int {
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// helper starts a helper process and waits for its "ready" when it says one.
func helper(t testing.TB, ready bool, role string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "SQLITESTORE_HELPER="+role, "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if ready {
		line, _ := bufio.NewReader(out).ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			t.Fatalf("helper %s: %q", role, line)
		}
	}
	return cmd
}
