package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
)

// help prints on stdout with status 0; "help COMMAND" and "COMMAND -h"
// print the command's help; no command prints the usage on stderr, 2.
func TestHelp(t *testing.T) {
	out, errOut, code := run(t, "help")
	if code != 0 || errOut != "" || !strings.Contains(out, "usage: sleeplock [--store STORE] COMMAND") || !strings.Contains(out, "  state ") {
		t.Errorf("help: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, args := range [][]string{{"help", "state"}, {"state", "-h"}, {"state", "--help"}, {"state", "x", "-h"}} {
		out, errOut, code := run(t, args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: sleeplock state [flags] [NAME…]\n") || !strings.Contains(out, "-json") || !strings.Contains(out, "Show locks") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	for name := range commands {
		if out, errOut, code := run(t, "help", name); code != 0 || !strings.HasPrefix(out, "usage: sleeplock "+name) {
			t.Errorf("help %s: exit %d, stdout %q, stderr %q", name, code, out, errOut)
		}
	}
	out, errOut, code = run(t)
	if code != 2 || out != "" || !strings.Contains(errOut, "usage: sleeplock [--store STORE] COMMAND") {
		t.Errorf("no command: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, args := range [][]string{{"help", "nope"}, {"help", "state", "demo"}} {
		if out, errOut, code := run(t, args...); code != 2 || out != "" || errOut == "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

// A bad flag is reported once, with status 2, wherever it is.
func TestBadFlagReportedOnce(t *testing.T) {
	for _, args := range [][]string{{"state", "--nope"}, {"release", "x", "--nope"}, {"demo", "-tasks", "x"}, {"define", "a", "1", "--resize=maybe"}} {
		out, errOut, code := run(t, args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "usage:") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and one line", args, code, out, errOut)
		}
	}
	_, errOut, _ := run(t, "state", "--nope")
	if strings.Count(errOut, "-nope") != 1 {
		t.Errorf("stderr %q names the flag %d times", errOut, strings.Count(errOut, "-nope"))
	}
}

// signalWriter is an io.Writer that closes seen when what it was given
// contains want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, _ := w.buf.Write(p)
	if w.seen != nil && strings.Count(w.buf.String(), w.want) > 0 {
		close(w.seen)
		w.seen = nil
	}
	return n, nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// A command whose context ends (SIGINT in cmd/sleeplock) exits 130.
func TestInterruptedStatus(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &signalWriter{want: "Lock    [1]", seen: make(chan struct{})}
	seen := out.seen
	var errOut bytes.Buffer
	done := make(chan int)
	go func() { done <- Main(ctx, []string{"demo", "-work", "1h"}, out, &errOut) }()
	select {
	case <-seen:
	case code := <-done:
		t.Fatalf("demo ended before a task locked: exit %d, stderr %q", code, errOut.String())
	}
	cancel()
	if code := <-done; code != StatusInterrupted || !strings.Contains(errOut.String(), "interrupted") {
		t.Fatalf("exit %d, stderr %q; want %d", code, errOut.String(), StatusInterrupted)
	}
}

func TestVersion(t *testing.T) {
	out, errOut, code := run(t, "version")
	if code != 0 || !strings.HasPrefix(out, "sleeplock 0.2.0 go") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, _, code := run(t, "version", "x"); code != 2 {
		t.Errorf("version x: exit %d", code)
	}
}

// state --json prints [] for no locks and lockview documents: lower-case
// keys, empty lists as [].
func TestStateJSON(t *testing.T) {
	pg := newPG(t)
	ctx := t.Context()
	out, errOut, code := pg.run(t, "state", "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("no locks: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if err := pg.locks.Define(ctx, "idle", 1); err != nil {
		t.Fatal(err)
	}
	if err := pg.locks.Define(ctx, "busy", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.locks.Acquire(ctx, "busy", sleeplock.Ref("r1"), sleeplock.Kind("job"), sleeplock.TTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = pg.run(t, "state", "--json")
	if code != 0 {
		t.Fatalf("exit %d, %q", code, errOut)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got) != 2 || got[0]["name"] != "busy" || got[1]["name"] != "idle" {
		t.Fatalf("locks %s", out)
	}
	for _, l := range got {
		for k := range l {
			if k != strings.ToLower(k) {
				t.Errorf("key %q is not lower-case", k)
			}
		}
		if q, ok := l["queue"].([]any); !ok || len(q) != 0 {
			t.Errorf("%v: queue %#v, want []", l["name"], l["queue"])
		}
	}
	if h, ok := got[1]["holders"].([]any); !ok || len(h) != 0 {
		t.Errorf("idle: holders %#v, want []", got[1]["holders"])
	}
	h, _ := got[0]["holders"].([]any)
	if len(h) != 1 || h[0].(map[string]any)["ref"] != "r1" || h[0].(map[string]any)["kind"] != "job" {
		t.Errorf("busy: holders %#v", got[0]["holders"])
	}
}

// The table shows the queue, in order.
func TestStateShowsQueue(t *testing.T) {
	waiting := make(chan struct{}, 1)
	pg := newPG(t, sleeplock.WithNotifier(sleeplock.NotifierFunc(func(e sleeplock.Event) {
		if e.Type == sleeplock.EventWaiting {
			waiting <- struct{}{}
		}
	})))
	ctx := t.Context()
	if err := pg.locks.Define(ctx, "payments", 1); err != nil {
		t.Fatal(err)
	}
	out, _, code := pg.run(t, "state", "payments")
	if code != 0 || !strings.Contains(out, "QUEUE") || !strings.Contains(out, "payments  1      0        0        0        -        -") {
		t.Fatalf("idle lock: exit %d\n%s", code, out)
	}
	lease, err := pg.locks.Acquire(ctx, "payments", sleeplock.Ref("holder"), sleeplock.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	waiterCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error)
	go func() {
		l, err := pg.locks.Acquire(waiterCtx, "payments", sleeplock.Ref("next-in-line"), sleeplock.Kind("job"), sleeplock.TTL(time.Minute))
		if err == nil {
			err = l.Release(context.Background())
		}
		done <- err
	}()
	<-waiting
	out, errOut, code := pg.run(t, "state")
	if code != 0 || !strings.Contains(out, "1. next-in-line (job) waited ") || !strings.Contains(out, "holder age ") {
		t.Fatalf("exit %d, stderr %q\n%s", code, errOut, out)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// state --watch redraws until interrupted.
func TestStateWatch(t *testing.T) {
	pg := newPG(t)
	if err := pg.locks.Define(t.Context(), "payments", 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &signalWriter{want: "payments", seen: make(chan struct{})}
	seen := out.seen
	var errOut bytes.Buffer
	done := make(chan int)
	go func() {
		done <- Main(ctx, []string{"state", "--watch", "--every", "1ms", "--store", pg.dsn, "--schema", pg.schema}, out, &errOut)
	}()
	select {
	case <-seen:
	case code := <-done:
		t.Fatalf("state --watch ended: exit %d, stderr %q", code, errOut.String())
	}
	// Wait for a redraw: a second frame.
	out.mu.Lock()
	out.want, out.seen = "payments", make(chan struct{})
	seen = out.seen
	out.buf.Reset()
	out.mu.Unlock()
	<-seen
	cancel()
	// The user ended the watch (Ctrl-C): a success, said quietly (stderr
	// has only the schema's note, once, from the start: not at each redraw).
	note := fmt.Sprintf("sleeplock: schema %q: tables logged: leases survive a crash of PostgreSQL\n", pg.schema)
	if code := <-done; code != 0 || errOut.String() != note {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing said but %q", code, errOut.String(), note)
	}
	if !strings.Contains(out.String(), "LOCK") {
		t.Fatalf("second frame %q", out.String())
	}
	if _, _, code := pg.run(t, "state", "--watch", "--every", "0s"); code != 2 {
		t.Errorf("--every 0s: exit %d", code)
	}
	if _, errOut, code := pg.run(t, "state", "--every", "2s"); code != 2 || !strings.Contains(errOut, "--watch") {
		t.Errorf("--every without --watch: exit %d %q; want 2 naming --watch", code, errOut)
	}
}

// define creates a lock (resizing only when asked), apply a config file;
// state tells operators to use them.
func TestDefineApply(t *testing.T) {
	pg := newPG(t)
	ctx := t.Context()
	out, _, code := pg.run(t, "state")
	if code != 0 || !strings.Contains(out, "sleeplock define NAME SLOTS") {
		t.Errorf("state of no locks: exit %d %q", code, out)
	}
	if out, errOut, code := pg.run(t, "define", "payments", "3"); code != 0 || out != "payments has 3 slots\n" {
		t.Fatalf("define: exit %d %q %q", code, out, errOut)
	}
	if out, errOut, code := pg.run(t, "define", "payments", "3"); code != 0 || out != "payments has 3 slots\n" {
		t.Fatalf("define again: exit %d %q %q", code, out, errOut)
	}
	// In the command line's terms, once: no library hint, no doubled prefix.
	if _, errOut, code := pg.run(t, "define", "payments", "2"); code != 1 ||
		errOut != "sleeplock define: lock \"payments\" has 3 slots, not 2: give --resize to change them\n" {
		t.Fatalf("define with other slots: exit %d %q", code, errOut)
	}
	if out, errOut, code := pg.run(t, "define", "payments", "2", "--resize"); code != 0 || out != "payments resized to 2 slots\n" {
		t.Fatalf("define --resize: exit %d %q %q", code, out, errOut)
	}
	if st, err := pg.locks.State(ctx, "payments"); err != nil || st.Slots != 2 {
		t.Fatalf("payments: %+v %v", st, err)
	}
	for _, args := range [][]string{{"define", "x"}, {"define", "x", "two"}, {"define", "x", "1", "2"}, {"apply"}} {
		if _, errOut, code := pg.run(t, args...); code != 2 {
			t.Errorf("%q: exit %d %q", args, code, errOut)
		}
	}
	// A bad value is status 2 with the reason, a negative one too.
	for _, slots := range []string{"0", "-1", "1.5"} {
		if _, errOut, code := pg.run(t, "define", "x", slots); code != 2 || !strings.Contains(errOut, "SLOTS must be a whole number from 1, got \""+slots+"\"") {
			t.Errorf("%s slots: exit %d %q", slots, code, errOut)
		}
	}
	if _, errOut, code := pg.run(t, "define", "bad\x01name", "1"); code != 2 || !strings.Contains(errOut, "invalid lock name") || strings.Contains(errOut, "sleeplock: ") {
		t.Errorf("bad name: exit %d %q", code, errOut)
	}

	dir := t.TempDir()
	good := filepath.Join(dir, "locks.yaml")
	if err := os.WriteFile(good, []byte("locks:\n  - name: reports\n    slots: 4\n  - name: chat/*\n    slots: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := pg.run(t, "apply", good); code != 0 || out != "reports has 4 slots\nchat/* has 1 slot\n" {
		t.Fatalf("apply: exit %d %q %q", code, out, errOut)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("locks:\n  - name: later\n    slots: 1\n  - name: broken\n    slots: -1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := pg.run(t, "apply", bad); code != 2 || !strings.Contains(errOut, "broken") || !strings.Contains(errOut, bad) {
		t.Errorf("apply of a bad file: exit %d %q", code, errOut)
	}
	// A conflict with the store names the file, in the command line's terms.
	clash := filepath.Join(dir, "clash.yaml")
	if err := os.WriteFile(clash, []byte("locks:\n  - name: payments\n    slots: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := pg.run(t, "apply", clash); code != 1 || !strings.Contains(errOut, clash+":2: lock \"payments\" has 2 slots, not 5") || strings.Contains(errOut, "Resize") {
		t.Errorf("apply of a clashing file: exit %d %q", code, errOut)
	}
	if _, errOut, code := pg.run(t, "apply", filepath.Join(dir, "missing.yaml")); code != 2 || errOut == "" { // a bad FILE, as a bad value
		t.Errorf("apply of a missing file: exit %d %q", code, errOut)
	}
	states, err := pg.locks.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range states {
		names = append(names, st.Name)
	}
	if !slices.Equal(names, []string{"chat/*", "payments", "reports"}) {
		t.Errorf("locks %q", names)
	}
}
