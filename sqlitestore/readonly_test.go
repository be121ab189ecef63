package sqlitestore_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
	if errors.Is(r.err, store.ErrInvalidConfig) {
		t.Errorf("the failed commit's error matches ErrInvalidConfig: %v", r.err)
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
