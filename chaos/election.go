package chaos

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/election"
	"github.com/sleeplock/sleeplock/pgstore"
)

// ElectionConfig is an election chaos run (issue 31): Candidates processes
// of `sleeplock elect --again`, each running chaos/electcmd while it leads
// (writes of its token under Guard, recorded in a ledger), on a PostgreSQL
// cluster of the run's own; the leader is killed (-9), paused past the
// TTL, cut off (pg_terminate_backend) and the server restarted, in turn.
type ElectionConfig struct {
	Candidates int           // default 5
	TTL        time.Duration // the terms' TTL (default 2s)
	Duration   time.Duration // how long faults are injected, each at least once (default 30s)
	FaultEvery time.Duration // time between two faults (default 3s)
	// Faults, in turn: FaultKill, FaultPause (the leader's elect and
	// command stopped past the TTL, until the next term's command has
	// started), FaultTerminate (the backends of the
	// leader's elect and command), FaultRestart (default all four).
	Faults []string
	// Writes and Every make a term: the command writes every Every, Writes
	// times, then exits and elect resigns (default 25 × 40ms).
	Writes int
	Every  time.Duration
	// PauseElectOnly pauses the leader's elect but not its command: a
	// negative control, whose command writes on after its term ended, so
	// that Guard must refuse it and the checker must find the overlap.
	PauseElectOnly bool
	// The cluster (default 15, "elchaos" followed by a pid and a random
	// part, a free port).
	ClusterVersion, ClusterName string
	ClusterPort                 int
	// SleeplockBin and CommandBin are the binaries of cmd/sleeplock and
	// chaos/electcmd, built into a temporary directory when empty.
	SleeplockBin, CommandBin string
	Log                      io.Writer // progress (default: none)
}

func (c *ElectionConfig) defaults() {
	if c.Candidates == 0 {
		c.Candidates = 5
	}
	if c.TTL == 0 {
		c.TTL = 2 * time.Second
	}
	if c.Duration == 0 {
		c.Duration = 30 * time.Second
	}
	if c.FaultEvery == 0 {
		c.FaultEvery = 3 * time.Second
	}
	if c.Faults == nil {
		c.Faults = []string{FaultKill, FaultPause, FaultTerminate, FaultRestart}
	}
	if c.Writes == 0 {
		c.Writes = 25
	}
	if c.Every == 0 {
		c.Every = 40 * time.Millisecond
	}
	if c.ClusterVersion == "" {
		c.ClusterVersion = "15"
	}
	if c.ClusterName == "" {
		c.ClusterName = "elchaos"
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

func (c *ElectionConfig) validate() error {
	if c.Candidates < 2 {
		return invalid(fmt.Sprintf("%d candidates: an election run needs at least 2", c.Candidates))
	}
	for _, f := range c.Faults {
		if !slices.Contains([]string{FaultKill, FaultPause, FaultTerminate, FaultRestart}, f) {
			return invalid(fmt.Sprintf("unknown fault %q for an election run (kill, pause, terminate, restart)", f))
		}
	}
	return nil
}

// ElectionReport is what an election run found.
type ElectionReport struct {
	Config ElectionConfig
	Faults map[string]int // injected, by kind
	// Terms counts the terms whose command started; Writes the writes
	// that committed, Refused those Guard refused.
	Terms, Writes, Refused int
	// StaleWrites counts committed writes of a term older than one that
	// had written before (ids in commit order): writes of a leader whose
	// term had ended. 0 is the guarantee.
	StaleWrites int
	// Overlaps lists the pairs of terms whose commands ran at once while
	// both their elect processes were alive: a command's ledger line after
	// the next term's command had started. Empty is the guarantee.
	Overlaps []string
	// Takeovers is, for each kill of a leader, the time from the kill to
	// the next term's command start (by the wall clock of the host).
	Takeovers []time.Duration
	// Exited counts the candidates that exited by themselves (replaced);
	// their last lines are in Notes.
	Exited int
	Notes  []string
}

// OK reports whether the run kept the guarantees: no stale write, no
// overlap, and the run did something.
func (r *ElectionReport) OK() bool {
	return r.StaleWrites == 0 && len(r.Overlaps) == 0 && r.Terms > 1 && r.Writes > 0
}

// Write prints the report.
func (r *ElectionReport) Write(w io.Writer) {
	fmt.Fprintf(w, "election chaos: %d candidates, TTL %v, %v of faults every %v\n", r.Config.Candidates, r.Config.TTL, r.Config.Duration, r.Config.FaultEvery)
	var kinds []string
	for _, k := range r.Config.Faults {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, r.Faults[k]))
	}
	fmt.Fprintf(w, "faults: %s\n", strings.Join(kinds, ", "))
	fmt.Fprintf(w, "terms %d, writes %d, refused by Guard %d, candidates that exited by themselves %d\n", r.Terms, r.Writes, r.Refused, r.Exited)
	fmt.Fprintf(w, "stale writes (a leader whose term had ended): %d\n", r.StaleWrites)
	fmt.Fprintf(w, "overlapping commands while both elects lived: %d\n", len(r.Overlaps))
	for _, o := range r.Overlaps {
		fmt.Fprintf(w, "  %s\n", o)
	}
	if len(r.Takeovers) > 0 {
		s := slices.Clone(r.Takeovers)
		slices.Sort(s)
		fmt.Fprintf(w, "kill -9 of the leader → next leader's command: n %d, min %v, p50 %v, max %v\n",
			len(s), s[0].Round(time.Millisecond), s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// candidate is one `sleeplock elect` process.
type candidate struct {
	id       string
	cmd      *exec.Cmd
	out      syncBuffer
	done     chan struct{}
	killedAt time.Time // zero: not killed
}

type electDriver struct {
	cfg    ElectionConfig
	cl     *cluster
	dir    string
	ledger string
	locks  *sleeplock.Locks
	el     *election.Election
	rep    *ElectionReport

	mu     sync.Mutex
	cands  []*candidate
	next   int
	killed map[int]time.Time // elect pid → when it was killed
}

func (d *electDriver) logf(format string, args ...any) {
	fmt.Fprintf(d.cfg.Log, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
}

// electionName is the election of a run.
const electionName = "elchaos"

// RunElection makes an election chaos run on a cluster of its own, which
// it drops at the end. The error is for a run that could not be made (no
// cluster, a binary that does not build); what the run found is in the
// report.
func RunElection(ctx context.Context, cfg ElectionConfig) (*ElectionReport, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &electDriver{cfg: cfg, rep: &ElectionReport{Config: cfg, Faults: map[string]int{}}, killed: map[int]time.Time{}}
	var err error
	if d.dir, err = os.MkdirTemp("", "sleeplock-elchaos-"); err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(d.dir) }()
	d.ledger = filepath.Join(d.dir, "ledger")
	if d.cfg.SleeplockBin == "" {
		if d.cfg.SleeplockBin, err = goBuild(ctx, d.dir, "sleeplock", "github.com/sleeplock/sleeplock/cmd/sleeplock"); err != nil {
			return nil, err
		}
	}
	if d.cfg.CommandBin == "" {
		if d.cfg.CommandBin, err = goBuild(ctx, d.dir, "electcmd", "github.com/sleeplock/sleeplock/chaos/electcmd"); err != nil {
			return nil, err
		}
	}
	if d.cl, err = createCluster(ctx, cfg.ClusterVersion, cfg.ClusterName, cfg.ClusterPort, false); err != nil {
		return nil, err
	}
	defer func() {
		if err := d.cl.drop(context.Background()); err != nil {
			d.logf("dropping the cluster: %v", err)
		}
	}()
	d.logf("own cluster %s/%s on port %d", d.cl.version, d.cl.name, d.cl.port)
	if err := d.setup(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = d.locks.Close() }()
	err = d.chaos(ctx)
	d.stopAll()
	if err != nil {
		return d.rep, err
	}
	return d.rep, d.check(ctx)
}

// goBuild builds the command pkg as dir/name.
func goBuild(ctx context.Context, dir, name, pkg string) (string, error) {
	bin := filepath.Join(dir, name)
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("chaos: go build %s: %w: %s", pkg, err, lastLines(out))
	}
	return bin, nil
}

// dsnFor is the cluster's DSN with an application name, so that the
// backends of one candidate (its elect's and its command's) can be told.
func (d *electDriver) dsnFor(app string) string { return d.cl.dsn + "&application_name=" + app }

func (d *electDriver) setup(ctx context.Context) error {
	if err := pgstore.MigrateDSN(ctx, d.cl.dsn); err != nil {
		return fmt.Errorf("chaos: migrating: %w", err)
	}
	conn, err := pgx.Connect(ctx, d.cl.dsn)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, electWritesSQL); err != nil {
		return fmt.Errorf("chaos: creating elchaos_writes: %w", err)
	}
	s, err := pgstore.Open(ctx, d.dsnFor("driver"))
	if err != nil {
		return err
	}
	d.locks = sleeplock.New(s)
	d.el, err = election.New(d.locks, electionName, election.WithTTL(d.cfg.TTL))
	return err
}

// start starts a new candidate.
func (d *electDriver) start() error {
	d.mu.Lock()
	d.next++
	id := "c" + strconv.Itoa(d.next)
	d.mu.Unlock()
	c := &candidate{id: id, done: make(chan struct{})}
	c.cmd = exec.Command(d.cfg.SleeplockBin, "elect", "--store", d.dsnFor(id), "--ttl", d.cfg.TTL.String(), "--again", "--id", id,
		electionName, "--", d.cfg.CommandBin, "-dsn", d.dsnFor(id), "-ledger", d.ledger,
		"-writes", strconv.Itoa(d.cfg.Writes), "-every", d.cfg.Every.String())
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	dieWithDriver(c.cmd)
	c.cmd.SysProcAttr.Setpgid = true
	if err := c.cmd.Start(); err != nil {
		return err
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	d.mu.Lock()
	d.cands = append(d.cands, c)
	d.mu.Unlock()
	return nil
}

// replaceExited replaces the candidates that exited by themselves (elect
// gives up when it cannot reach the server for its campaign).
func (d *electDriver) replaceExited() error {
	d.mu.Lock()
	var gone []*candidate
	d.cands = slices.DeleteFunc(d.cands, func(c *candidate) bool {
		select {
		case <-c.done:
			gone = append(gone, c)
			return true
		default:
			return false
		}
	})
	d.mu.Unlock()
	for _, c := range gone {
		if c.killedAt.IsZero() {
			d.rep.Exited++
			d.rep.Notes = append(d.rep.Notes, c.id+" exited: "+lastLines([]byte(c.out.String())))
		}
		if err := d.start(); err != nil {
			return err
		}
	}
	return nil
}

func (d *electDriver) chaos(ctx context.Context) error {
	for range d.cfg.Candidates {
		if err := d.start(); err != nil {
			return err
		}
	}
	end := time.Now().Add(d.cfg.Duration)
	for i := 0; i < len(d.cfg.Faults) || time.Now().Before(end); i++ { // each fault at least once
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d.cfg.FaultEvery):
		}
		if err := d.replaceExited(); err != nil {
			return err
		}
		kind := d.cfg.Faults[i%len(d.cfg.Faults)]
		if err := d.inject(ctx, kind); err != nil {
			d.logf("%s: %v", kind, err)
			continue
		}
		d.rep.Faults[kind]++
	}
	// The election recovers from the last fault: a leader again.
	if err := d.replaceExited(); err != nil {
		return err
	}
	_, _, err := d.leader(ctx)
	return err
}

// leader returns the candidate that leads now, and its command's pid
// (from the ledger), waiting up to TTL + 2s for one.
func (d *electDriver) leader(ctx context.Context) (*candidate, election.Leader, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.TTL+2*time.Second)
	defer cancel()
	for {
		l, err := d.el.Leader(ctx)
		if err == nil {
			d.mu.Lock()
			i := slices.IndexFunc(d.cands, func(c *candidate) bool { return c.id == l.ID })
			var c *candidate
			if i >= 0 {
				c = d.cands[i]
			}
			d.mu.Unlock()
			if c != nil {
				return c, l, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, election.Leader{}, fmt.Errorf("no leader among the candidates: %w", errors.Join(err, ctx.Err()))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (d *electDriver) inject(ctx context.Context, kind string) error {
	if kind == FaultRestart {
		start := time.Now()
		if err := d.cl.restart(ctx); err != nil {
			return err
		}
		d.logf("restarted PostgreSQL in %v", time.Since(start).Round(time.Millisecond))
		return nil
	}
	c, l, err := d.leader(ctx)
	if err != nil {
		return err
	}
	switch kind {
	case FaultKill:
		at := time.Now()
		if err := c.cmd.Process.Kill(); err != nil {
			return err
		}
		c.killedAt = at
		d.mu.Lock()
		d.killed[c.cmd.Process.Pid] = at
		d.mu.Unlock()
		d.logf("killed the leader %s (token %d)", c.id, l.Token)
		return d.start()
	case FaultPause:
		// Wait for the term's command to start: a pause before it would
		// test only that an elect paused before its command starts
		// never starts it.
		cmdPid := d.commandOf(ctx, l.Token)
		if cmdPid == 0 && d.cfg.PauseElectOnly {
			return fmt.Errorf("the command of term %d did not start within the TTL", l.Token)
		}
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGSTOP)
		if d.cfg.PauseElectOnly {
			cmdPid = 0 // the command runs on: the negative control
		}
		if cmdPid > 0 {
			_ = syscall.Kill(-cmdPid, syscall.SIGSTOP)
		}
		at := time.Now()
		d.logf("paused the leader %s (token %d, command %d)", c.id, l.Token, cmdPid)
		// The pause lasts past the TTL and until the next term's command
		// has started, so that the fault always makes the paused leader
		// resume into a term that is no longer its own, however slowly a
		// loaded machine hands the lease over. In the negative control,
		// it also lasts until the paused term's command has written (or
		// been refused) after that start: the overlap the checker must
		// find. Both are read from the ledger, within a bound.
		next := d.waitLedger(ctx, d.cfg.TTL+pauseBound, func(lines []ledgerLine) bool {
			var started time.Time
			for _, ln := range lines {
				switch {
				case ln.token > l.Token && ln.event == evStart && started.IsZero():
					started = ln.at
				case d.cfg.PauseElectOnly && ln.token == l.Token && !started.IsZero() && ln.at.After(started):
					return true
				}
			}
			return !started.IsZero() && !d.cfg.PauseElectOnly
		})
		if rest := d.cfg.TTL + time.Second - time.Since(at); rest > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(rest):
			}
		}
		d.logf("resumed the leader %s after %v (next term seen: %v)", c.id, time.Since(at).Round(time.Millisecond), next)
		// The elect first: past its term's deadline it kills its command,
		// stopped or not; a command it failed to end resumes a second later.
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGCONT)
		if cmdPid > 0 {
			time.AfterFunc(time.Second, func() { _ = syscall.Kill(-cmdPid, syscall.SIGCONT) })
		}
		if !next {
			return fmt.Errorf("no term after %d started within %v of pausing its leader", l.Token, d.cfg.TTL+pauseBound)
		}
		return nil
	case FaultTerminate:
		conn, err := pgx.Connect(ctx, d.cl.dsn)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close(ctx) }()
		var n int
		err = conn.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", c.id).Scan(&n)
		d.logf("terminated %d backends of the leader %s (token %d)", n, c.id, l.Token)
		return err
	}
	return fmt.Errorf("unknown fault %q", kind)
}

// pauseBound is how long past the TTL a paused leader stays paused at
// most, waiting for the next term.
const pauseBound = 30 * time.Second

// commandOf returns the pid of the command of term token, from the
// ledger, waiting up to the TTL for it to start (0 when it has not).
func (d *electDriver) commandOf(ctx context.Context, token int64) int {
	pid := 0
	d.waitLedger(ctx, d.cfg.TTL, func(lines []ledgerLine) bool {
		for _, l := range lines {
			if l.token == token && l.event == evStart {
				pid = l.pid
				return true
			}
		}
		return false
	})
	return pid
}

// waitLedger reads the ledger until done reports true of its lines, or
// for at most bound; it returns whether done did.
func (d *electDriver) waitLedger(ctx context.Context, bound time.Duration, done func([]ledgerLine) bool) bool {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for {
		lines, _ := readLedger(d.ledger)
		if done(lines) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// stopAll ends every candidate: SIGTERM (elect ends its command and
// resigns), SIGKILL of what is left after 5s, and of commands left
// behind by killed candidates.
func (d *electDriver) stopAll() {
	d.mu.Lock()
	cands := slices.Clone(d.cands)
	d.mu.Unlock()
	for _, c := range cands {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGCONT)
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(5 * time.Second)
	for _, c := range cands {
		select {
		case <-c.done:
		case <-deadline:
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.done
		}
	}
	lines, _ := readLedger(d.ledger)
	for _, l := range lines {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", l.pid)); l.event == evStart && err == nil && bytes.Contains(b, []byte("electcmd")) {
			_ = syscall.Kill(-l.pid, syscall.SIGKILL) // its own process group (elect's supervision)
		}
	}
}

// ledgerLine is one line of the ledger.
type ledgerLine struct {
	at        time.Time
	event     string
	token     int64
	cand      string
	pid, ppid int
}

func readLedger(path string) ([]ledgerLine, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []ledgerLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 6 {
			continue
		}
		ns, err1 := strconv.ParseInt(f[0], 10, 64)
		tok, err2 := strconv.ParseInt(f[2], 10, 64)
		pid, err3 := strconv.Atoi(f[4])
		ppid, err4 := strconv.Atoi(f[5])
		if errors.Join(err1, err2, err3, err4) != nil {
			continue
		}
		out = append(out, ledgerLine{at: time.Unix(0, ns), event: f[1], token: tok, cand: f[3], pid: pid, ppid: ppid})
	}
	return out, sc.Err()
}

// term is one term as the ledger shows it.
type termSpan struct {
	token       int64
	cand        string
	elect       int // its elect's pid
	start, last time.Time
}

// check reads the writes and the ledger and fills the report.
func (d *electDriver) check(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, d.cl.dsn)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()
	rows, err := conn.Query(ctx, "SELECT token FROM elchaos_writes ORDER BY id")
	if err != nil {
		return err
	}
	tokens, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	lines, err := readLedger(d.ledger)
	if err != nil {
		return err
	}
	analyze(d.rep, tokens, lines, d.killed)
	return nil
}

// analyze fills rep from the writes' tokens in commit order, the ledger's
// lines and the kills (elect pid → when).
func analyze(rep *ElectionReport, tokens []int64, lines []ledgerLine, killed map[int]time.Time) {
	var top int64
	for _, t := range tokens {
		if t < top {
			rep.StaleWrites++
		}
		top = max(top, t)
	}
	spans := map[int64]*termSpan{}
	for _, l := range lines {
		s := spans[l.token]
		if s == nil {
			s = &termSpan{token: l.token, cand: l.cand, elect: l.ppid, start: l.at, last: l.at}
			spans[l.token] = s
		}
		switch l.event {
		case evStart:
			rep.Terms++
			s.start = l.at
		case evWrite:
			rep.Writes++
		case evRefused:
			rep.Refused++
		}
		if l.at.After(s.last) {
			s.last = l.at
		}
	}
	if rep.Writes != len(tokens) {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the ledger has %d writes, the table %d (a write whose commit's reply was lost, or whose ledger line was not written)", rep.Writes, len(tokens)))
	}
	order := make([]*termSpan, 0, len(spans))
	for _, s := range spans {
		order = append(order, s)
	}
	slices.SortFunc(order, func(a, b *termSpan) int { return int(a.token - b.token) })
	// Two terms overlap when a command's last line comes after a later
	// term's command started, while both elects were alive.
	for i, a := range order {
		killA, wasKilled := killed[a.elect]
		for _, b := range order[i+1:] {
			if b.elect == a.elect {
				continue
			}
			until := a.last
			if wasKilled && killA.Before(until) {
				until = killA
			}
			if killB, ok := killed[b.elect]; ok && killB.Before(until) {
				until = killB
			}
			if b.start.Before(until) {
				rep.Overlaps = append(rep.Overlaps, fmt.Sprintf("token %d (%s) ran until %s, token %d (%s) started %s",
					a.token, a.cand, a.last.Format("15:04:05.000"), b.token, b.cand, b.start.Format("15:04:05.000")))
			}
		}
	}
	// Takeovers: from each kill to the first term that started after it.
	for _, at := range killed {
		i := slices.IndexFunc(order, func(s *termSpan) bool { return s.start.After(at) })
		if i >= 0 {
			rep.Takeovers = append(rep.Takeovers, order[i].start.Sub(at))
		}
	}
}
