//go:build linux

package sqlitestore_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/sqlitestore"
	"github.com/sleeplock/sleeplock/store"
)

// spell makes the database file at path and its WAL immutable (chattr +i:
// writes fail even through descriptors already open, even for root), as
// the SQLite chaos mode's read-only fault does; end makes them writable
// again, and the test's end does if it was not called. Without chattr, or
// on a file system without the attribute, the test is skipped.
type spell struct {
	t     testing.TB
	files []string
	mu    sync.Mutex
	on    bool
}

func newSpell(t testing.TB, path string) *spell {
	t.Helper()
	sp := &spell{t: t, files: []string{path, path + "-wal"}}
	t.Cleanup(sp.end)
	return sp
}

// begin makes the files immutable; it may run on any goroutine (it does
// not call t.Fatal).
func (sp *spell) begin() error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, f := range sp.files {
		if out, err := exec.Command("chattr", "+i", f).CombinedOutput(); err != nil {
			return errors.New("chattr +i " + f + ": " + err.Error() + ": " + strings.TrimSpace(string(out)))
		}
		sp.on = true
	}
	return nil
}

func (sp *spell) end() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.on {
		return
	}
	for _, f := range sp.files {
		if out, err := exec.Command("chattr", "-i", f).CombinedOutput(); err != nil {
			sp.t.Errorf("chattr -i %s: %v: %s", f, err, out)
		}
	}
	sp.on = false
}

// canSpell skips the test when the files cannot be made immutable here.
func canSpell(t *testing.T, path string) {
	t.Helper()
	sp := newSpell(t, path)
	if err := sp.begin(); err != nil {
		t.Skipf("cannot make the database immutable here: %v", err)
	}
	sp.end()
}

// events sends the events of a request on a channel.
type events chan store.Event

func (c events) Emit(e store.Event) { c <- e }

// A waiter granted in a transaction whose COMMIT fails (the file became
// immutable between its BEGIN and its COMMIT) is not told it was granted:
// Acquire returns the commit's error, its place in the queue goes, and the
// token it would have had is granted to the next caller, once, when the
// file is writable again.
func TestGrantNotReturnedWhenCommitFails(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "locks.db")
	holder, waiter := openAt(t, path), openAt(t, path)
	canSpell(t, path)
	if _, err := holder.Define(ctx, "jobs", 1, nil); err != nil {
		t.Fatal(err)
	}
	a, err := holder.Acquire(ctx, store.AcquireRequest{Name: "jobs", Ref: store.RefOf("a"), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	// The file becomes immutable just before the waiter's store commits
	// its grant.
	sp := newSpell(t, path)
	spellErr := make(chan error, 1)
	sqlitestore.BeforeCommit(waiter, func(evs []store.Event) {
		for _, e := range evs {
			if e.Type == store.EventAcquired {
				spellErr <- sp.begin()
				return
			}
		}
	})
	evs := make(events, 16)
	type result struct {
		g   store.Grant
		err error
	}
	done := make(chan result, 1)
	go func() {
		g, err := waiter.Acquire(ctx, store.AcquireRequest{Name: "jobs", Ref: store.RefOf("b"), TTL: time.Minute, Wait: true, Events: evs})
		done <- result{g, err}
	}()
	for e := range evs {
		if e.Type == store.EventWaiting {
			break
		}
	}
	if err := holder.Release(ctx, a.Handle(), nil); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if err := <-spellErr; err != nil {
		t.Fatal(err)
	}
	sp.end()

	st, err := holder.State(ctx, "jobs", true)
	if err != nil {
		t.Fatal(err)
	}
	if r.err == nil {
		t.Fatalf("Acquire during the read-only spell returned token %d and no error; the file holds %+v", r.g.Token, st.Holders)
	}
	if !errors.Is(r.err, sqlitestore.ErrReadOnly) || errors.Is(r.err, store.ErrInvalidConfig) {
		t.Errorf("the failed commit's error: %v, want an error matching ErrReadOnly and not ErrInvalidConfig", r.err)
	}
	if len(st.Holders) != 0 {
		t.Errorf("holders after a grant that failed to commit: %+v", st.Holders)
	}
	// The waiter that gave up left the queue (its row went at its store's
	// next transaction), and the next grant's token is a's successor.
	c, err := waiter.Acquire(ctx, store.AcquireRequest{Name: "jobs", Ref: store.RefOf("c"), TTL: time.Minute})
	if err != nil {
		t.Fatalf("a try after the spell: %v", err)
	}
	if c.Token != a.Token+1 {
		t.Errorf("token after the spell %d, want %d", c.Token, a.Token+1)
	}
}

// A store opened while its file cannot be written (SQLite then opens the
// file read-only) is told so by a transient error, ErrReadOnly, not
// ErrInvalidConfig, as is a store opened before, and works once the file
// is writable again: it opens its connection anew by itself.
func TestStoreOpenedWhileReadOnlyRecovers(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "locks.db")
	first := openAt(t, path) // keeps the WAL there, as other processes do
	canSpell(t, path)
	if _, err := first.Define(ctx, "jobs", 1, nil); err != nil {
		t.Fatal(err)
	}
	a, err := first.Acquire(ctx, store.AcquireRequest{Name: "jobs", Ref: store.RefOf("a"), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	sp := newSpell(t, path)
	if err := sp.begin(); err != nil {
		t.Fatal(err)
	}
	s, err := sqlitestore.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open of a file with a current schema that cannot be written now: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	transient := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, sqlitestore.ErrReadOnly) || errors.Is(err, store.ErrInvalidConfig) {
			t.Errorf("%s while the file cannot be written: %v, want an error matching ErrReadOnly and not ErrInvalidConfig", op, err)
		}
	}
	_, err = s.Acquire(ctx, store.AcquireRequest{Name: "jobs", Ref: store.RefOf("b"), TTL: time.Minute})
	transient("Acquire", err)
	_, err = s.Keep(ctx, a.Handle(), time.Minute, 0)
	transient("Keep", err)
	transient("Release", s.Release(ctx, a.Handle(), nil))
	// A store opened before: SQLite's I/O error at its commit.
	_, err = first.Keep(ctx, a.Handle(), time.Minute, 0)
	transient("Keep through a store opened before", err)
	sp.end()

	if _, err := s.Keep(ctx, a.Handle(), time.Minute, 0); err != nil {
		t.Fatalf("Keep once the file is writable again: %v", err)
	}
	if err := s.Release(ctx, a.Handle(), nil); err != nil {
		t.Fatalf("Release once the file is writable again: %v", err)
	}
	b, err := s.Acquire(ctx, store.AcquireRequest{Name: "jobs", Ref: store.RefOf("b"), TTL: time.Minute})
	if err != nil {
		t.Fatalf("Acquire once the file is writable again: %v", err)
	}
	if b.Token != a.Token+1 {
		t.Errorf("token %d, want %d", b.Token, a.Token+1)
	}
}

// A file this process has no permission to write does not pass by itself:
// Open refuses it with ErrInvalidConfig (SQLite would open it read-only,
// and every write would fail). The test runs Open in a process of the
// unprivileged user nobody, so it needs root.
func TestOpenRefusesFileWithoutWritePermission(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run a process as nobody")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "locks.db")
	s := openAt(t, path)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// nobody may create files in dir (SQLite's WAL) and run a copy of
	// this test binary, but not write the database.
	bin := filepath.Join(dir, "helper.test")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil { //nolint:gosec // run by nobody
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(p, 0o777); err != nil { //nolint:gosec // nobody creates the WAL there
			t.Fatal(err)
		}
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, path)
	cmd.Env = append(os.Environ(), "SQLITESTORE_HELPER=open", "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	if !strings.HasPrefix(string(out), "invalid config:") || !strings.Contains(string(out), "cannot write "+path) {
		t.Errorf("Open of a file without write permission, by nobody: %s, want an error matching ErrInvalidConfig", out)
	}
}
