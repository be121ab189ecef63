package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/election"
	"github.com/sleeplock/sleeplock/redisstore/redistest"
	"github.com/sleeplock/sleeplock/sqlitestore"
)

// elect runs its command while leading, with the term's token, exits with
// the command's status and resigns; leader prints the leader (JSON too) or
// "vacant" with status 1.
func TestElectAndLeader(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	st := "sqlite:" + db
	out, errOut, code := run(t, "elect", "--store", st, "jobs", "--id", "a", "--", "sh", "-c", `echo "token=$SLEEPLOCK_TOKEN id=$SLEEPLOCK_LEADER_ID ref=$SLEEPLOCK_REF"; exit 3`)
	if code != 3 || !strings.Contains(out, "token=1 id=a ref=a#") {
		t.Fatalf("elect: exit %d, out %q, err %q; want 3 and token 1", code, out, errOut)
	}
	out, _, code = run(t, "leader", "--store", st, "jobs")
	if code != 1 || !strings.Contains(out, "vacant") {
		t.Fatalf("leader after the command exited: %d %q, want vacant (elect resigns)", code, out)
	}
	locks := sqliteLocks(t, db)
	el, err := election.New(locks, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	term, err := el.Campaign(t.Context(), election.Candidate{ID: "b", Value: "10.0.0.2:80"})
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run(t, "leader", "--store", st, "--json", "jobs")
	var got leaderJSON
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("leader --json: %d %q %q", code, out, errOut)
	}
	if got.Event != "elected" || got.ID != "b" || got.Value != "10.0.0.2:80" || got.Token != term.Token() {
		t.Fatalf("leader --json: %+v, want b 10.0.0.2:80 token %d", got, term.Token())
	}
	if err := term.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, _, code := run(t, "elect", "--store", st, "jobs"); code != 2 {
		t.Fatalf("elect without a command: exit %d, want 2", code)
	}
}

// A leader whose term is taken from it (its hold released by someone
// else) has its command ended, and elect exits 122.
func TestElectEndsCommandWhenLeadershipLost(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	locks := sqliteLocks(t, db)
	codes, said := make(chan int, 1), make(chan string, 1)
	go func() {
		// The command's stderr and elect's messages share a writer: one
		// that a mutex guards, as a terminal is.
		var out, errOut lockedBuffer
		code := Main(t.Context(), []string{"elect", "--store", "sqlite:" + db, "--ttl", "1s", "jobs", "--", "sleep", "60"}, &out, &errOut)
		errOut.mu.Lock()
		said <- errOut.b.String()
		errOut.mu.Unlock()
		codes <- code
	}()
	// Wait for elect's term by the election's events; an elect that
	// exits first fails the test.
	e, err := election.New(locks, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events := e.Observe(ctx)
	var ref string
	for ref == "" {
		select {
		case code := <-codes:
			t.Fatalf("elect exited %d before it led", code)
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the election's events ended before elect led")
			}
			if ev.Type != election.Elected {
				continue
			}
			st, err := locks.StateDetail(t.Context(), "jobs")
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Holders) == 1 {
				ref = st.Holders[0].Ref
			}
		}
	}
	lease, err := locks.LeaseOf(ref, []string{"jobs"})
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code := <-codes; code != exitLost {
		t.Fatalf("elect exited %d after its term was taken, want %d", code, exitLost)
	}
	// elect has no --keep-on-loss: its message names no such flag.
	if msg := <-said; !strings.Contains(msg, "sleeplock elect: killing the command") || strings.Contains(msg, "--keep-on-loss") {
		t.Fatalf("elect said %q; want that it kills the command, and no --keep-on-loss (elect has none)", msg)
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// termChild is the command "test-child-term ADDR": it tells the test
// listening at ADDR its term ("TOKEN LEADER_ID") and exits with the
// status the test answers, 9 when the test has gone.
func termChild(addr string) int {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return 9
	}
	defer conn.Close()
	fmt.Fprintf(conn, "%s %s\n", os.Getenv("SLEEPLOCK_TOKEN"), os.Getenv("SLEEPLOCK_LEADER_ID"))
	var code int
	if _, err := fmt.Fscan(conn, &code); err != nil {
		return 9
	}
	return code
}

func init() {
	if len(os.Args) > 2 && os.Args[1] == "test-child-term" {
		os.Exit(termChild(os.Args[2]))
	}
}

// terms is where test-child-term commands report their terms: the test
// takes each term's command from next, while it waits for its status.
// Every wait ends at a generous deadline.
type terms struct {
	ln       net.Listener
	cmds     chan *termCmd
	deadline context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup

	mu     sync.Mutex
	closed bool
	conns  []net.Conn
}

// termCmd is the command of one term, waiting for its exit status.
type termCmd struct {
	token int64
	id    string
	conn  net.Conn
}

// exit makes the command exit with code.
func (c *termCmd) exit(t *testing.T, code int) {
	t.Helper()
	if _, err := fmt.Fprintf(c.conn, "%d\n", code); err != nil {
		t.Fatalf("the command of term %d has gone: %v", c.token, err)
	}
	_ = c.conn.Close()
}

// newTerms listens for test-child-term commands until the test ends, and
// gives the command line that runs one.
func newTerms(t *testing.T) (*terms, []string) {
	t.Helper()
	t.Setenv("GORACE", "atexit_sleep_ms=0") // a -race child would sleep 1s as it exits
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &terms{ln: ln, cmds: make(chan *termCmd)}
	ts.deadline, ts.stop = context.WithTimeout(context.Background(), 2*time.Minute)
	ts.wg.Add(1)
	go ts.accept()
	t.Cleanup(ts.close)
	return ts, []string{os.Args[0], "test-child-term", ln.Addr().String()}
}

func (ts *terms) accept() {
	defer ts.wg.Done()
	for {
		conn, err := ts.ln.Accept()
		if err != nil {
			return
		}
		ts.mu.Lock()
		closed := ts.closed
		ts.conns = append(ts.conns, conn)
		ts.mu.Unlock()
		if closed {
			_ = conn.Close()
			return
		}
		c := &termCmd{conn: conn}
		if _, err := fmt.Fscan(conn, &c.token, &c.id); err != nil {
			_ = conn.Close()
			continue
		}
		select {
		case ts.cmds <- c:
		case <-ts.deadline.Done():
			return
		}
	}
}

// close lets every command still waiting go (status 9) and stops
// listening.
func (ts *terms) close() {
	ts.mu.Lock()
	ts.closed = true
	for _, c := range ts.conns {
		_ = c.Close()
	}
	ts.mu.Unlock()
	ts.stop()
	_ = ts.ln.Close()
	ts.wg.Wait()
}

// next is the command of e's next term; e exiting first fails the test.
func (ts *terms) next(t *testing.T, e *mainRun) *termCmd {
	t.Helper()
	select {
	case c := <-ts.cmds:
		return c
	case code := <-e.code:
		t.Fatalf("elect exited %d before its next term; stderr %q", code, e.errOut.String())
	case <-ts.deadline.Done():
		t.Fatalf("no next term; elect's stderr %q", e.errOut.String())
	}
	return nil
}

// wait is e's exit status; a command run meanwhile fails the test.
func (ts *terms) wait(t *testing.T, e *mainRun) int {
	t.Helper()
	select {
	case code := <-e.code:
		return code
	case c := <-ts.cmds:
		t.Fatalf("elect ran its command again, in term %d", c.token)
	case <-ts.deadline.Done():
		t.Fatalf("elect did not exit; stderr %q", e.errOut.String())
	}
	return 0
}

// mainRun is a sleeplock command run by Main on a goroutine, with a
// context of its own (interrupt cancels it), or in a process of its own
// (startProcess).
type mainRun struct {
	interrupt context.CancelFunc
	code      chan int
	finished  chan struct{}
	out       *lineWaiter
	errOut    *lineWaiter
	proc      *os.Process // in a process: this one
}

// startMain runs Main(args) until it returns; when the test ends it is
// interrupted, ts's commands still waiting are let go, and it is waited
// for.
func startMain(t *testing.T, ts *terms, args ...string) *mainRun {
	ctx, cancel := context.WithCancel(context.Background())
	e := &mainRun{interrupt: cancel, code: make(chan int, 1), finished: make(chan struct{}), out: newLineWaiter(), errOut: newLineWaiter()}
	go func() {
		defer close(e.finished)
		e.code <- Main(ctx, args, e.out, e.errOut)
	}()
	t.Cleanup(func() {
		cancel()
		if ts != nil {
			ts.close()
		}
		<-e.finished
	})
	return e
}

// startProcess runs "sleeplock args…" in a process (this test binary's
// test-main) until it exits; when the test ends it is killed, ts's
// commands still waiting are let go, and it is waited for.
func startProcess(t *testing.T, ts *terms, args ...string) *mainRun {
	t.Helper()
	e := &mainRun{code: make(chan int, 1), finished: make(chan struct{}), out: newLineWaiter(), errOut: newLineWaiter()}
	cmd := exec.Command(os.Args[0], append([]string{"test-main"}, args...)...)
	cmd.Stdout, cmd.Stderr = e.out, e.errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.proc = cmd.Process
	go func() {
		defer close(e.finished)
		_ = cmd.Wait()
		e.code <- cmd.ProcessState.ExitCode()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if ts != nil {
			ts.close()
		}
		<-e.finished
	})
	return e
}

// elect runs its command once and exits with its status, the election
// left vacant. With --again it campaigns again after each command: it
// resigns first (a candidate waiting leads next), leads again in a term of
// its own (a greater token) and runs the command again; interrupted, it
// exits with the status of the last term's command and leaves the
// election vacant.
func TestElectAgainCampaignsAgain(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	st := "sqlite:" + db
	ts, child := newTerms(t)
	vacant := func(when string) {
		t.Helper()
		if out, errOut, code := run(t, "leader", "--store", st, "jobs"); code != 1 || out != "vacant: no leader\n" {
			t.Fatalf("leader %s: exit %d, %q %q; want 1 and vacant", when, code, out, errOut)
		}
	}

	e := startMain(t, ts, append([]string{"elect", "--store", st, "--id", "a", "jobs", "--"}, child...)...)
	once := ts.next(t, e)
	if once.id != "a" {
		t.Fatalf("the command runs as leader %q, want a", once.id)
	}
	once.exit(t, 5)
	if code := ts.wait(t, e); code != 5 {
		t.Fatalf("elect without --again: exit %d, want the command's 5; stderr %q", code, e.errOut.String())
	}
	vacant("after elect without --again")

	waiting := make(chan struct{}, 1)
	locks := sqliteLocks(t, db, sleeplock.WithNotifier(sleeplock.NotifierFunc(func(ev sleeplock.Event) {
		if ev.Type == sleeplock.EventWaiting {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	})))
	el, err := election.New(locks, "jobs")
	if err != nil {
		t.Fatal(err)
	}

	e = startMain(t, ts, append([]string{"elect", "--store", st, "--id", "a", "--again", "jobs", "--"}, child...)...)
	first := ts.next(t, e)
	if first.token <= once.token {
		t.Fatalf("the first term of elect --again has token %d, not above the last term's %d", first.token, once.token)
	}
	// b campaigns while a's command runs; a resigns as the command exits,
	// and b leads next.
	type campaign struct {
		term *election.Term
		err  error
	}
	bc := make(chan campaign, 1)
	go func() {
		term, err := el.Campaign(ts.deadline, election.Candidate{ID: "b"})
		bc <- campaign{term, err}
	}()
	select {
	case <-waiting:
	case <-ts.deadline.Done():
		t.Fatal("b never waited behind a")
	}
	first.exit(t, 0)
	b := <-bc
	if b.err != nil {
		t.Fatal(b.err)
	}
	if b.term.Token() <= first.token {
		t.Fatalf("b leads with token %d, not above a's %d", b.term.Token(), first.token)
	}
	// a campaigned again: it leads once b resigns.
	if err := b.term.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
	second := ts.next(t, e)
	if second.id != "a" || second.token <= b.term.Token() {
		t.Fatalf("the next term: leader %q token %d; want a, above b's %d", second.id, second.token, b.term.Token())
	}
	second.exit(t, 0)
	third := ts.next(t, e) // nobody else campaigns: a leads again at once
	if third.token <= second.token {
		t.Fatalf("the third term's token %d is not above the second's %d", third.token, second.token)
	}
	e.interrupt()
	third.exit(t, 7)
	if code := ts.wait(t, e); code != 7 {
		t.Fatalf("elect --again interrupted: exit %d, want the last command's 7; stderr %q", code, e.errOut.String())
	}
	vacant("after elect --again was interrupted")
}

// lineWaiter is an io.Writer whose lines a test waits for as they come.
type lineWaiter struct {
	mu    sync.Mutex
	part  []byte
	lines []string
	more  chan struct{} // one token: a line came
}

func newLineWaiter() *lineWaiter { return &lineWaiter{more: make(chan struct{}, 1)} }

func (w *lineWaiter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, p...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.lines = append(w.lines, string(w.part[:i]))
		w.part = w.part[i+1:]
		select {
		case w.more <- struct{}{}:
		default:
		}
	}
}

// line waits for line i (from 0) until ctx ends or exited says the
// command ended first.
func (w *lineWaiter) line(t *testing.T, ctx context.Context, exited <-chan int, i int) string {
	t.Helper()
	for {
		w.mu.Lock()
		if len(w.lines) > i {
			l := w.lines[i]
			w.mu.Unlock()
			return l
		}
		got := w.lines
		w.mu.Unlock()
		select {
		case <-w.more:
		case code := <-exited:
			t.Fatalf("exited %d before line %d; lines %q", code, i+1, got)
		case <-ctx.Done():
			t.Fatalf("no line %d; lines %q", i+1, got)
		}
	}
}

// waitFor waits for a line that contains s, as line does.
func (w *lineWaiter) waitFor(t *testing.T, ctx context.Context, exited <-chan int, s string) string {
	t.Helper()
	for i := 0; ; i++ {
		if l := w.line(t, ctx, exited, i); strings.Contains(l, s) {
			return l
		}
	}
}

// String is all that was written.
func (w *lineWaiter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(append(w.lines, string(w.part)), "\n")
}

func (w *lineWaiter) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...)
}

// leader NAME prints the leader (status 0) or that nobody leads (status
// 1), as text or JSON. With --watch it prints the current state, then
// each change as it comes (elected: a new term; changed: a new value;
// vacant: the leader resigned), until interrupted: then it exits 0 and
// says nothing, as state --watch.
func TestLeaderWatch(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", asJSON), func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "e.db")
			st := "sqlite:" + db
			flags := []string{"--store", st}
			if asJSON {
				flags = append(flags, "--json")
			}
			// want checks a line of leader's output: the event, the
			// leader's ID and value, the token.
			want := func(line, event, id, value string, token int64) {
				t.Helper()
				if asJSON {
					var got leaderJSON
					if err := json.Unmarshal([]byte(line), &got); err != nil {
						t.Fatalf("line %q: %v", line, err)
					}
					if got.Event != event || got.ID != id || got.Value != value || got.Token != token ||
						got.Since.IsZero() != (event == "vacant") {
						t.Fatalf("line %q: %+v; want %s %q %q token %d", line, got, event, id, value, token)
					}
					return
				}
				prefix := "vacant: no leader"
				if event != "vacant" {
					prefix = fmt.Sprintf("%s: %s (%s) token %d since ", event, id, value, token)
				}
				if !strings.HasPrefix(line, prefix) || (event == "vacant" && line != prefix) {
					t.Fatalf("line %q; want %q…", line, prefix)
				}
			}

			// No election yet: leader says so (issue 42), status 2.
			out, errOut, code := run(t, append([]string{"leader", "jobs"}, flags...)...)
			if code != 2 || out != "" || !strings.Contains(errOut, `no election "jobs"`) {
				t.Fatalf("leader of no election: exit %d, %q %q; want 2", code, out, errOut)
			}
			locks := sqliteLocks(t, db)
			if err := locks.Define(t.Context(), "jobs", 1); err != nil {
				t.Fatal(err)
			}
			out, errOut, code = run(t, append([]string{"leader", "jobs"}, flags...)...)
			if code != 1 || errOut != "" {
				t.Fatalf("leader of a vacant election: exit %d, %q %q; want 1", code, out, errOut)
			}
			want(strings.TrimSuffix(out, "\n"), "vacant", "", "", 0)

			el, err := election.New(locks, "jobs")
			if err != nil {
				t.Fatal(err)
			}
			deadline, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()

			watch := startMain(t, nil, append([]string{"leader", "jobs", "--watch"}, flags...)...)
			w, exited := watch.out, watch.code
			want(w.line(t, deadline, exited, 0), "vacant", "", "", 0)

			b, err := el.Campaign(t.Context(), election.Candidate{ID: "b", Value: "10.0.0.2:80"})
			if err != nil {
				t.Fatal(err)
			}
			want(w.line(t, deadline, exited, 1), "elected", "b", "10.0.0.2:80", b.Token())
			if out, _, code := run(t, append([]string{"leader", "jobs"}, flags...)...); code != 0 {
				t.Fatalf("leader while b leads: exit %d, want 0", code)
			} else {
				want(strings.TrimSuffix(out, "\n"), "elected", "b", "10.0.0.2:80", b.Token())
			}
			if err := b.Proclaim(t.Context(), "10.0.0.3:80"); err != nil {
				t.Fatal(err)
			}
			want(w.line(t, deadline, exited, 2), "changed", "b", "10.0.0.3:80", b.Token())
			if err := b.Resign(t.Context()); err != nil {
				t.Fatal(err)
			}
			// Vacant: in JSON with the token of the term that ended.
			vacantToken := int64(0)
			if asJSON {
				vacantToken = b.Token()
			}
			want(w.line(t, deadline, exited, 3), "vacant", "", "", vacantToken)

			watch.interrupt()
			if code := <-exited; code != 0 || watch.errOut.String() != "" {
				t.Fatalf("leader --watch interrupted: exit %d, stderr %q; want 0 and nothing said", code, watch.errOut.String())
			}
			if lines := w.all(); len(lines) != 4 {
				t.Fatalf("leader --watch printed %d lines, want 4: %q", len(lines), lines)
			}
		})
	}
}

// elect --again campaigns again after a campaign failed because the store
// could not be reached, and leads again once it is back. The store is a
// Redis of the test's own that keeps nothing on disk, stopped between two
// terms and started again empty: the election's lock is defined again.
func TestElectAgainThroughStoreRestart(t *testing.T) {
	srv := redistest.Start(t, 0)
	ts, child := newTerms(t)
	e := startMain(t, ts, append([]string{"elect", "--store", srv.URL(), "--id", "a", "--again", "jobs", "--"}, child...)...)
	first := ts.next(t, e)
	srv.Stop()
	first.exit(t, 0)
	e.errOut.waitFor(t, ts.deadline, e.code, "; campaigning again in ")
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	second := ts.next(t, e)
	if second.id != "a" || second.token <= first.token {
		t.Fatalf("the term after the restart: leader %q token %d; want a, above %d", second.id, second.token, first.token)
	}
	e.interrupt()
	second.exit(t, 4)
	if code := ts.wait(t, e); code != 4 {
		t.Fatalf("elect --again interrupted: exit %d, want the last command's 4; stderr %q", code, e.errOut.String())
	}
}

// A signal that comes while elect waits to lead ends it with 128+N, as
// one that comes while run waits, and nothing runs: whether elect waits
// behind another leader or, with --again, to campaign again after its
// store could not be reached. SIGHUP is the signal that elect alone
// catches (SIGINT and SIGTERM also end its context).
func TestElectSignalWhileWaiting(t *testing.T) {
	t.Run("behind a leader", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "e.db")
		locks := sqliteLocks(t, db)
		el, err := election.New(locks, "jobs")
		if err != nil {
			t.Fatal(err)
		}
		b, err := el.Campaign(t.Context(), election.Candidate{ID: "b"})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = b.Resign(context.Background()) }()
		ts, child := newTerms(t)
		e := startProcess(t, ts, append([]string{"elect", "--store", "sqlite:" + db, "--id", "a", "jobs", "--"}, child...)...)
		waitUntil(t, "elect to wait behind b", func() bool { // polling the store: nothing to wait on across processes
			st, err := locks.State(t.Context(), "jobs")
			return err == nil && st.Waiting == 1
		})
		if err := e.proc.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if code := ts.wait(t, e); code != 128+int(syscall.SIGHUP) || !strings.Contains(e.errOut.String(), `hangup while waiting for "jobs"`) {
			t.Fatalf("elect: exit %d, stderr %q; want %d, the signal named", code, e.errOut.String(), 128+int(syscall.SIGHUP))
		}
		if st, err := locks.State(t.Context(), "jobs"); err != nil || st.Waiting != 0 {
			t.Fatalf("after elect exited: %+v %v; want nobody waiting", st, err)
		}
	})
	t.Run("to campaign again", func(t *testing.T) {
		srv := redistest.Start(t, 0)
		ts, child := newTerms(t)
		e := startProcess(t, ts, append([]string{"elect", "--store", srv.URL(), "--id", "a", "--again", "jobs", "--"}, child...)...)
		first := ts.next(t, e)
		srv.Stop()
		first.exit(t, 0)
		e.errOut.waitFor(t, ts.deadline, e.code, "; campaigning again in ")
		if err := e.proc.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if code := ts.wait(t, e); code != 128+int(syscall.SIGHUP) || !strings.Contains(e.errOut.String(), `hangup while waiting for "jobs"`) {
			t.Fatalf("elect --again: exit %d, stderr %q; want %d, the signal named", code, e.errOut.String(), 128+int(syscall.SIGHUP))
		}
	})
}

// sqliteLocks opens the SQLite store at db as another process of the
// test would, with opts; the test's end closes it.
func sqliteLocks(t *testing.T, db string, opts ...sleeplock.Option) *sleeplock.Locks {
	t.Helper()
	s, err := sqlitestore.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	locks := sleeplock.New(s, opts...)
	t.Cleanup(func() { _ = locks.Close() })
	return locks
}

// TestLeaderOfAPlainLock: leader reports only an election. Given a lock
// that run holds (a ref that is no candidate's), or one of a million
// slots that two shared runs hold, it says that NAME is a lock, not an
// election, and exits 2; leader --watch too when run takes the lock it
// watches.
func TestLeaderOfAPlainLock(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	st := "sqlite:" + db
	locks := sqliteLocks(t, db)
	ctx := t.Context()
	wantNotElection := func(name, errOut string, code int) {
		t.Helper()
		if code != 2 || !strings.Contains(errOut, `"`+name+`" is a lock, not an election`) {
			t.Fatalf("leader %s: exit %d %q; want 2 and that it is a lock, not an election", name, code, errOut)
		}
	}

	if err := locks.Define(ctx, "M", 1); err != nil {
		t.Fatal(err)
	}
	m, err := locks.Acquire(ctx, "M", sleeplock.Ref("vm:4242"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Release(context.Background()) }()
	out, errOut, code := run(t, "leader", "--store", st, "M")
	if out != "" {
		t.Fatalf("leader M printed %q", out)
	}
	wantNotElection("M", errOut, code)

	if err := locks.Define(ctx, "R", 1_000_000); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"vm:1", "vm:2"} {
		r, err := locks.Acquire(ctx, "R", sleeplock.Ref(ref), sleeplock.Shared())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = r.Release(context.Background()) }()
	}
	_, errOut, code = run(t, "leader", "--store", st, "R")
	wantNotElection("R", errOut, code)
	_, errOut, code = run(t, "leader", "--store", st, "--watch", "R")
	wantNotElection("R", errOut, code)

	// A vacant lock of 1 slot reads as a vacant election, until run takes it.
	if err := locks.Define(ctx, "W", 1); err != nil {
		t.Fatal(err)
	}
	deadline, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	watch := startMain(t, nil, "leader", "--store", st, "--watch", "W")
	if line := watch.out.line(t, deadline, watch.code, 0); line != "vacant: no leader" {
		t.Fatalf("leader --watch W: %q; want vacant", line)
	}
	w, err := locks.Acquire(ctx, "W", sleeplock.Ref("vm:4243"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Release(context.Background()) }()
	select {
	case code := <-watch.code:
		wantNotElection("W", watch.errOut.String(), code)
	case <-deadline.Done():
		t.Fatal("leader --watch W went on after run took W")
	}
	if lines := watch.out.all(); len(lines) != 1 {
		t.Fatalf("leader --watch W printed %q; want the vacancy only", lines)
	}
}
