package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/election"
)

var _ = register("elect", "run a command while leading an election (one leader at a time)", runElect)

var _ = register("leader", "print the leader of an election, or follow its changes", runLeader)

func init() {
	extraHelp["elect"] = `Waits in FIFO order behind the other candidates until it leads, then runs
the command with SLEEPLOCK_TOKEN (the term's fencing token), SLEEPLOCK_LOCK,
SLEEPLOCK_LEADER_ID and SLEEPLOCK_REF (the term's lease's ref, for a fenced
write: pgstore's Guard with the token). When the command exits, it resigns: the next
candidate leads at once (within 1s; a store that does not answer by then
keeps the term until it expires by --ttl, and elect says so and exits).
When leadership is lost (renewals failed until the
term's deadline, or another took it over), the command's process group is
ended as run ends it after a lost lease (SIGTERM before the term's
deadline, SIGKILL at it or at once on a takeover) and elect exits 122.
As with run, the command's process group ends with the term: what the
command leaves running in it is ended when it exits, and a guard ends
the group if elect dies, even by kill -9; a process that leaves the group
on purpose (setsid, a daemon) is out of reach. With --again it
campaigns again after the command exits, until interrupted, and after a
campaign that failed because the store could not be reached (waiting 100ms,
doubling up to the TTL).

Exit status: the command's (of the last term with --again), 122 when
leadership was lost while it ran, 125 when elect itself failed, 126/127
when the command cannot be run, 128+N when signal N came while it waited
to lead (or to campaign again), 2 for a bad command line.
`
	extraHelp["leader"] = `Prints the leader (its ID, value, term token and since when), or "vacant:
no leader". With --watch it prints that, then each change as it comes:
elected (a new term), changed (the leader proclaimed another value),
vacant (nobody leads), until interrupted. --json prints one object a
line: event, id, value, token, since, waiting.

Only an election is reported: NAME that is a lock and not an election
(of other than 1 slot, or held by run rather than elect's candidates) is
an error, also when run takes it during --watch.

Exit status: 0 when it printed a leader, 1 when nobody leads (or on an
error); with --watch, 0 when interrupted; 2 for a bad command line, a
NAME that no election has (without --watch, which waits for it), or a
NAME that is a lock, not an election.
`
}

type electFlags struct {
	id, value string
	ttl       time.Duration
	again     bool
}

func runElect(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("elect", errOut, "[flags] NAME [--] COMMAND [ARGS…]")
	sf := addStoreFlags(fs, errOut)
	var f electFlags
	fs.StringVar(&f.id, "id", "", "candidate `ID` that others see (default HOST:PID)")
	fs.StringVar(&f.value, "value", "", "`VALUE` the leader advertises (an address)")
	durationVar(fs, &f.ttl, "ttl", election.DefaultTTL, "term lease TTL (`DUR`: 15s, or seconds: 15; at least 1s): a leader that dies is replaced within it")
	fs.BoolVar(&f.again, "again", false, "campaign again after the command exits")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 2 {
		return usagef("give an election NAME and a COMMAND to run while leading")
	}
	if nameAfterDashDash(fs, args) {
		return usagef("no election name: \"--\" ends elect's flags and starts the command, so give NAME before it (elect [flags] NAME -- COMMAND), got %q", fs.Args())
	}
	name, command := fs.Arg(0), fs.Args()[1:]
	if err := checkTTL(f.ttl); err != nil {
		return err
	}
	if f.id == "" {
		host, _ := os.Hostname()
		f.id = host + ":" + strconv.Itoa(os.Getpid())
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, runSignals...)
	defer signal.Stop(sigs)
	gs := newGuardSlot(sf.freedAtDeath())
	s, err := sf.openGuarded(ctx, gs)
	if err != nil {
		return runFailed(ctx, err)
	}
	locks := sleeplock.New(s)
	lv := &leaving{who: "sleeplock elect", ttl: f.ttl, errOut: errOut}
	defer lv.close(locks)
	el, err := election.New(locks, name, election.WithTTL(f.ttl))
	if err != nil {
		return runFailed(ctx, err)
	}
	cand := election.Candidate{ID: f.id, Value: f.value}
	wait := campaignRetry
	for {
		lv.by = time.Time{} // only the last term's resignation bounds the close
		code, err := electOnce(ctx, el, cand, command, gs, sigs, out, lv)
		var ce *campaignError
		if f.again && errors.As(err, &ce) && ctx.Err() == nil {
			// The store could not be reached (a restart, a failover):
			// a candidate with --again stays one.
			fmt.Fprintf(errOut, "sleeplock elect: %s; campaigning again in %v\n", message(ce.err), wait)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case sig := <-sigs:
				return signalExit("sleeplock elect", sig, name, errOut)
			case <-time.After(wait):
			}
			wait = min(2*wait, f.ttl)
			continue
		}
		wait = campaignRetry
		if err != nil || !f.again || ctx.Err() != nil {
			if err == nil && code != 0 {
				return &exitError{code: code}
			}
			return err
		}
	}
}

// campaignRetry is the first wait of elect --again before it campaigns
// again after a campaign failed; it doubles up to the TTL.
const campaignRetry = 100 * time.Millisecond

// campaignError is a campaign that failed for a reason that may pass (the
// store unreachable, restarting): elect --again campaigns again.
type campaignError struct{ err error }

func (e *campaignError) Error() string { return e.err.Error() }
func (e *campaignError) Unwrap() error { return e.err }

// mayPass reports whether a campaign's error may pass by itself: not bad
// input, a lock of the election's name with other slots, a store that
// cannot elect, or a closed one.
func mayPass(err error) bool {
	for _, permanent := range []error{sleeplock.ErrInvalid, sleeplock.ErrAlreadyDefined, sleeplock.ErrUnsupported,
		sleeplock.ErrClosed, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, permanent) {
			return false
		}
	}
	return true
}

// electOnce campaigns, runs the command while leading and resigns; it
// returns the command's exit status (exitLost after a loss): run's
// supervision ends the command before the term's deadline.
func electOnce(ctx context.Context, el *election.Election, cand election.Candidate, command []string,
	gs *guardSlot, sigs <-chan os.Signal, out io.Writer, lv *leaving) (int, error) {
	errOut := lv.errOut
	g := gs.start(errOut, "sleeplock elect")
	defer g.done() // when no command ran; supervise lets it go itself
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	caught := make(chan os.Signal, 1)
	joined := make(chan struct{})
	go func() { // a signal while waiting ends the campaign
		defer close(joined)
		select {
		case sig := <-sigs:
			caught <- sig
			cancel()
		case <-cctx.Done():
		}
	}()
	term, err := el.Campaign(cctx, cand)
	interrupted := cctx.Err() != nil
	cancel()
	<-joined
	select {
	case sig := <-caught:
		if err == nil { // led as the signal came: hand over at once
			_ = lv.release(ctx, term.Lease(), term.Resign)
		}
		return 0, signalExit("sleeplock elect", sig, el.Name(), errOut)
	default:
	}
	if err != nil {
		if !interrupted && ctx.Err() == nil && mayPass(err) {
			return 0, &campaignError{runFailed(ctx, err)}
		}
		return 0, runFailed(ctx, err)
	}
	// From here on the term is resigned whatever happens, within
	// releaseTimeout.
	resign := func() error {
		return lv.release(ctx, term.Lease(), term.Resign)
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, out, errOut
	cmd.Env = append(os.Environ(),
		"SLEEPLOCK_LOCK="+el.Name(),
		"SLEEPLOCK_TOKEN="+strconv.FormatInt(term.Token(), 10),
		"SLEEPLOCK_LEADER_ID="+term.ID(),
		"SLEEPLOCK_REF="+term.Lease().Ref())
	res, err := supervise(cmd, supervision{Lease: term.Lease(), FreedAtDeath: gs != nil, Guard: g, Signals: sigs, Who: "sleeplock elect", ErrOut: errOut})
	if err != nil {
		_ = resign()
		return 0, startError("sleeplock elect", command[0], err, errOut)
	}
	rerr := resign()
	if res.Lost == nil {
		// The resignation may be the first to see that the term was over
		// (its lock deleted, or taken over) before the command ended.
		if lerr := term.Lease().Err(); errors.Is(lerr, sleeplock.ErrLeaseLost) {
			res.Lost = lerr
		} else {
			res.Lost = lostAtRelease(rerr, term.Lease())
		}
		if res.Lost != nil {
			fmt.Fprintf(errOut, "sleeplock elect: lost the leadership of %q while the command ran: %s\n", el.Name(), message(res.Lost))
		}
	}
	if res.Lost != nil {
		fmt.Fprintf(errOut, "sleeplock elect: the command ended with status %d; exiting %d: leadership was lost while it ran\n", exitStatus(res.State), exitLost)
	}
	return res.Status(), nil
}

func runLeader(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("leader", errOut, "[flags] NAME")
	sf := addStoreFlags(fs, errOut)
	watch := fs.Bool("watch", false, "follow the changes (elected, changed, vacant) until interrupted")
	asJSON := fs.Bool("json", false, "print JSON, one object a line")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("give one election NAME")
	}
	s, err := sf.open(ctx)
	if err != nil {
		return err
	}
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	el, err := election.New(locks, fs.Arg(0))
	if err != nil {
		return &usageError{message(err)}
	}
	if err := notAnElection(ctx, locks, fs.Arg(0)); err != nil {
		return err
	}
	if !*watch {
		if err := noElection(ctx, locks, fs.Arg(0)); err != nil {
			return err
		}
		l, err := el.Leader(ctx)
		if errors.Is(err, election.ErrNoLeader) {
			printLeader(out, election.Event{Type: election.Vacant}, *asJSON)
			return &exitError{code: 1}
		}
		if err != nil {
			return err
		}
		printLeader(out, election.Event{Type: election.Elected, Leader: l, Token: l.Token}, *asJSON)
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := el.Observe(wctx)
	for ev := range events {
		if ev.Type == election.Elected {
			// A lock that run took since: its holder is no leader.
			if err := notAnElection(ctx, locks, fs.Arg(0)); err != nil {
				cancel()
				for range events { // the observer ends
				}
				return err
			}
		}
		printLeader(out, ev, *asJSON)
	}
	return nil // the user ended the watch (Ctrl-C): a success, as state --watch
}

// notAnElection is the error (status 2) of leader given the name of a
// lock that is not an election: a family, a lock of other than 1 slot, or
// one held or waited for by others than an election's candidates (run's
// holders; election.StatusOf knows candidates by their refs). A vacant
// lock of 1 slot may be either: it reads as a vacant election. Nil when it
// is one, or when the lock cannot be read (the election's own read then
// says why).
func notAnElection(ctx context.Context, locks *sleeplock.Locks, name string) error {
	st, err := locks.StateDetail(ctx, name)
	if err != nil {
		return nil
	}
	var why string
	switch {
	case st.Family:
		return &exitError{code: 2, err: fmt.Errorf("%q is a family of locks, not an election", name)}
	case st.Slots != 1:
		why = "it has " + slotCount(st.Slots) + ", an election's lock has 1"
	case len(st.Holders)+len(st.Queue) == 0:
		return nil
	default:
		if _, ok := election.StatusOf(st); ok {
			return nil
		}
		why = "its holders are not an election's candidates (\"sleeplock state " + name + "\" shows them)"
	}
	return &exitError{code: 2, err: fmt.Errorf("%q is a lock, not an election: %s", name, why)}
}

// noElection is the error (status 2) of leader given a name that no
// election has: no lock of that name, nor a family covering it. Nil when
// there is one, or when the store cannot tell (the election's own read
// then says why).
func noElection(ctx context.Context, locks *sleeplock.Locks, name string) error {
	if _, err := locks.State(ctx, name); !errors.Is(err, sleeplock.ErrNotFound) {
		return nil
	}
	return &exitError{code: 2, err: fmt.Errorf("no election %q: nobody has campaigned under that name (\"sleeplock state\" lists the locks; \"leader --watch\" waits for one)", name)}
}

// leaderJSON is the JSON form of an election's state or change.
type leaderJSON struct {
	Event   string    `json:"event"`
	ID      string    `json:"id,omitempty"`
	Value   string    `json:"value,omitempty"`
	Token   int64     `json:"token,omitempty"`
	Since   time.Time `json:"since,omitzero"`
	Waiting int       `json:"waiting,omitempty"`
}

func printLeader(out io.Writer, ev election.Event, asJSON bool) {
	l := ev.Leader
	if asJSON {
		b, _ := json.Marshal(leaderJSON{Event: ev.Type.String(), ID: l.ID, Value: l.Value, Token: ev.Token, Since: l.Since, Waiting: l.Waiting})
		fmt.Fprintln(out, string(b))
		return
	}
	if ev.Type == election.Vacant {
		fmt.Fprintln(out, "vacant: no leader")
		return
	}
	fmt.Fprintf(out, "%s: %s", ev.Type, l.ID)
	if l.Value != "" {
		fmt.Fprintf(out, " (%s)", l.Value)
	}
	fmt.Fprintf(out, " token %d", ev.Token)
	if !l.Since.IsZero() {
		fmt.Fprintf(out, " since %s", l.Since.Local().Format(time.RFC3339))
	}
	fmt.Fprintln(out)
}
