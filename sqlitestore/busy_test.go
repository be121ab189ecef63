package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock/sqlitestore"
	"github.com/sleeplock/sleeplock/store"
)

// A caller that waits for a slot waits out a database that another
// process's transaction keeps busy past the busy timeout: only its context
// ends its wait. A caller that does not wait is told the database is busy.
func TestWaitingCallerWaitsOutABusyDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	s := openAt(t, path, sqlitestore.WithBusyTimeout(20*time.Millisecond))
	ctx := context.Background()
	if _, err := s.Define(ctx, "jobs", 1, nil); err != nil {
		t.Fatal(err)
	}
	// Another process's write transaction, held for the whole test.
	conn, err := rawDB(t, path).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, "ROLLBACK") //nolint:errcheck // the test's end

	try := store.AcquireRequest{Name: "jobs", Ref: store.RefOf("try"), TTL: time.Minute}
	_, err = s.Acquire(ctx, try)
	if !errors.Is(err, sqlitestore.ErrBusy) || strings.Contains(err.Error(), "SQLITE_BUSY") {
		t.Fatalf("a try on a busy database: %v, want ErrBusy, in our words", err)
	}

	// Ten busy timeouts: a waiting caller is still waiting when its
	// context ends.
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	wait := store.AcquireRequest{Name: "jobs", Ref: store.RefOf("waiter"), TTL: time.Minute, Wait: true}
	if _, err := s.Acquire(wctx, wait); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a waiting acquisition on a busy database: %v, want its context's deadline", err)
	}
}

// Processes that open a new file at the same moment all open it: the
// first sets the file up (WAL mode, the WAL index, the schema) while the
// others' connections and first reads find it busy, and wait for it
// rather than fail with "database is locked". Connections of one process
// lock the file as those of several do. Without the wait, about 1 open in
// 400 failed here.
func TestOpenNewFileFromManyAtOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for i := range 200 {
		path := filepath.Join(dir, "locks"+strconv.Itoa(i)+".db")
		start := make(chan struct{})
		errs := make(chan error, 4)
		for range 4 {
			go func() {
				<-start
				s, err := sqlitestore.Open(ctx, path)
				if err == nil {
					err = s.Close()
				}
				errs <- err
			}()
		}
		close(start)
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatalf("file %d: %v", i, err)
			}
		}
	}
}

// TestBusyCallTriedAgain: another process's write transaction keeps the
// database busy when a call that waits for no slot comes (a definition, a
// try, a release). The call is tried again, not failed with SQLITE_BUSY:
// it succeeds once that transaction ends, which the test makes happen at
// the call's first busy try.
func TestBusyCallTriedAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.WithBusyTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	busy := make(chan struct{}, 1)
	sqlitestore.OnBusy(s, func() {
		select {
		case busy <- struct{}{}:
		default:
		}
	})
	ctx := t.Context()
	var g store.Grant
	for _, c := range []struct {
		name string
		op   func() error
	}{
		{"define", func() error { _, err := s.Define(ctx, "jobs", 1, nil); return err }},
		{"try", func() error {
			var err error
			g, err = s.Acquire(ctx, store.AcquireRequest{Name: "jobs", Ref: store.RefOf("w"), TTL: time.Minute})
			return err
		}},
		{"release", func() error { return s.Release(ctx, g.Handle(), nil) }},
	} {
		conn, err := rawDB(t, path).Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.op() }()
		select {
		case <-busy:
		case err := <-done:
			t.Fatalf("%s: did not meet the busy database: %v", c.name, err)
		}
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		_ = conn.Close()
		if err := <-done; err != nil {
			t.Fatalf("%s on a database busy for a while: %v", c.name, err)
		}
	}
}
