//go:build linux

package sqlitestore_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/sqlitestore"
	"github.com/sleeplock/sleeplock/store"
)

// A hold of a store opened WithProcessGroup outlives its process for as
// long as a process of the group lives (a stopped one too), and no longer:
// a zombie of the group has ended.
func TestProcessGroupKeepsHold(t *testing.T) {
	grp := exec.Command("sleep", "3600")
	grp.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := grp.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := false
	t.Cleanup(func() {
		if !reaped {
			_ = grp.Process.Kill()
			_ = grp.Wait()
		}
	})
	pgid := grp.Process.Pid
	path := filepath.Join(t.TempDir(), "locks.db")
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.WithProcessGroup(func() int { return pgid }))
	if err != nil {
		t.Fatal(err)
	}
	holder := newLocks(t, s)
	if err := holder.Define(t.Context(), "g", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.TryAcquire(t.Context(), "g", sleeplock.TTL(time.Hour), sleeplock.NoKeepAlive()); err != nil {
		t.Fatal(err)
	}
	// The holder's process is gone: a pid that no process has.
	if _, err := rawDB(t, path).Exec("UPDATE holders SET pid = 999999999"); err != nil {
		t.Fatal(err)
	}
	other := newLocks(t, openAt(t, path))
	if _, err := other.TryAcquire(t.Context(), "g"); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("a dead holder's slot was given back while its process group lives: %v", err)
	}
	if err := syscall.Kill(pgid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if _, err := other.TryAcquire(t.Context(), "g"); !errors.Is(err, sleeplock.ErrUnavailable) {
		t.Fatalf("a dead holder's slot was given back while its process group is stopped: %v", err)
	}
	if err := grp.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Killed, not yet reaped: a zombie, which has ended.
	waitFor(t, "the group's process to end", func() bool { return procState(pgid) == 'Z' })
	lease, err := other.TryAcquire(t.Context(), "g")
	if err != nil {
		t.Fatalf("a dead holder's slot was not given back once its group ended: %v", err)
	}
	_ = lease.Release(t.Context())
	_ = grp.Wait()
	reaped = true
}

// WithProcessGroup(nil) is a configuration error, and Open creates nothing.
func TestProcessGroupNil(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	if _, err := sqlitestore.Open(t.Context(), path, sqlitestore.WithProcessGroup(nil)); !errors.Is(err, store.ErrInvalidConfig) {
		t.Fatalf("WithProcessGroup(nil): %v, want ErrInvalidConfig", err)
	}
	if m, _ := filepath.Glob(path + "*"); len(m) > 0 {
		t.Fatalf("Open with a bad option created %v", m)
	}
}

// procState is the state letter of process pid (0 when it is gone).
func procState(pid int) byte {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if i := bytes.LastIndexByte(stat, ')'); err == nil && i >= 0 && len(stat) > i+2 {
		return stat[i+2]
	}
	return 0
}
