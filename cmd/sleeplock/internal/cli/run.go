package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/store"
)

var _ = register("run", "run a command holding a slot of a lock (a counting, FIFO flock)", runRun)

const runSynopsis = "[flags] NAME [--] COMMAND [ARGS…]\n       sleeplock run [flags] NAME -c 'SHELL COMMAND'"

// Exit statuses of sleeplock run besides the command's own.
const (
	exitRefused  = 1   // refused at once (--no-wait, --wait 0), unless --conflict-exit-code
	exitTimeout  = 124 // --wait ran out, as timeout(1), unless --conflict-exit-code
	exitFailed   = 125 // sleeplock run itself failed (the store, the lock), as timeout(1) and env(1)
	exitNoExec   = 126 // the command cannot be run, as shells do
	exitNotFound = 127 // no such command, as shells do
)

func init() {
	extraHelp["run"] = `A lock that does not exist is defined with 1 slot (or --slots N), as flock
creates its file; with --shared (-s) and no --slots, with 1000000 slots, so
that readers share it as they share flock's shared lock. The command
holds one slot, --weight K slots, --shared one, --exclusive (-x) every
slot (flock's default, here a lock of one slot). The command starts at the first argument after NAME that
is not one of these flags; everything from there on is the command's, "--"
included ("--" before the command is optional; a "--" before NAME is a
bad command line, as it leaves no NAME). A run refused with status 2 or
125 before its command started leaves the store as it found it: NAME,
the flags and the weight are checked before a missing lock is defined.

Exit status:
  the command's     when it ran (128+N when signal N ended it); after a
                    forwarded SIGINT, SIGTERM or SIGHUP too
  1                 refused at once: --no-wait (-n) or --wait 0, as flock -n
  124               --wait ran out, as timeout(1)
  E                 both of the above with --conflict-exit-code E, as flock -E
  125               sleeplock run failed: the store, or a lock (or the family
                    that covers NAME) with other slots than --slots
  126, 127          the command cannot be run, or does not exist
  122               the lease was lost while the command ran, whatever the
                    command returned (it was ended, unless --keep-on-loss)
  2                 a bad command line or value (nothing was run)
  128+N             signal N came while waiting: nothing was held or run

The command's process group ends with the lease. The command runs in a
process group of its own, which a guard process leads from before the
command starts. While renewals fail, the group gets SIGTERM when the
lease's deadline is --grace away (default 5s, or a third of --ttl when
shorter) and SIGKILL when a tenth of --grace is; so it has ended before
the store can give the slot to anyone else. The deadline is measured on
this host's monotonic clock from before the last renewal that succeeded
was sent. A lease found lost (taken over, released by an operator), or a
sleeplock run that was stopped past the deadline and resumes, gets it
SIGKILL at once. --keep-on-loss lets the command run on (run still exits
122). When the command exits (after ^C too), what it left running in the
group gets SIGTERM, then SIGKILL after --grace, before the slot is given
back. When sleeplock run dies, even by kill -9, the guard ends the group:
SIGTERM, then SIGKILL after --grace, or SIGKILL at once on SQLite, which
gives a dead holder's slot back as soon as the group is gone (not before:
the hold names the guard's group).

What is covered is the process group: the command, its children, and
theirs, whatever their parents do. A process that leaves the group on
purpose (setsid, a daemon that detaches, a job-control shell's own jobs)
is out of reach: it is neither signalled nor waited for.

When the command has ended, run gives the lease back within 1s; a store
that does not answer by then (a server that hangs) keeps it until it
expires by --ttl, and run says so on stderr and exits all the same.

A --ref that another process holds is refused (status 125), since one
ref is one holder: either's release would free the hold. --reenter joins
that hold instead.

The command's environment:
  SLEEPLOCK_TOKEN   the lease's fencing token (grows with every grant)
  SLEEPLOCK_REF     the holder ref (--ref, default HOST:PID)
  SLEEPLOCK_LOCK    the lock's name
SIGINT, SIGTERM and SIGHUP are passed on to the command's process group.
`
}

// runSignals are forwarded to the command.
var runSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

type runFlags struct {
	slots      int
	wait       waitValue
	noWait     bool
	conflict   int
	ttl        time.Duration
	grace      time.Duration
	ref, kind  string
	quiet      bool
	keepOnLoss bool
	reenter    bool
	shell      string
	weight     int
	shared     bool
	exclusive  bool
}

// sharedSlots are the slots of a lock that run --shared defines: readers
// are as many as come, as with flock's shared lock, and --exclusive takes
// them all.
const sharedSlots = 1_000_000

// waitValue is --wait: a duration ("10m", "1.5s") or, as flock -w, a
// number of seconds ("5", ".007"). set tells an explicit 0 from none.
type waitValue struct {
	d   time.Duration
	set bool
}

func (w *waitValue) String() string {
	if w == nil || !w.set {
		return ""
	}
	return w.d.String()
}

func (w *waitValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("a wait must not be negative, got %q", s)
	}
	w.d, w.set = d, true
	return nil
}

// runFlagSet is run's flags, written into f.
func runFlagSet(errOut io.Writer, f *runFlags) (*flag.FlagSet, storeFlags) {
	fs := flags("run", errOut, runSynopsis)
	sf := addStoreFlags(fs, errOut)
	fs.IntVar(&f.slots, "slots", 0, "`N` slots: define the lock with N slots if it does not exist (default 1); an existing lock with other slots is an error")
	fs.Var(&f.wait, "wait", "give up after waiting `DUR` (10m, or seconds as flock -w: 5), exit status 124; 0 refuses at once, as -n (default: wait as long as it takes)")
	fs.BoolVar(&f.noWait, "no-wait", false, "do not wait: exit at once (status 1, or --conflict-exit-code) when no slot is free")
	fs.IntVar(&f.conflict, "conflict-exit-code", 0, "exit with status `E` when refused at once or when --wait runs out, as flock -E (without it: 1 when refused, 124 when --wait runs out)")
	durationVar(fs, &f.ttl, "ttl", sleeplock.DefaultTTL, "lease TTL (`DUR`: 30s, or seconds: 30; at least 1s), renewed every third of it while sleeplock runs; bounds a hung sleeplock (a dead one gives its slot back at once)")
	durationVar(fs, &f.grace, "grace", 0, "while renewals fail, SIGTERM the command `DUR` before the lease expires, SIGKILL a tenth of DUR before (default 5s, or a third of --ttl when shorter; at most half of --ttl)")
	fs.BoolVar(&f.keepOnLoss, "keep-on-loss", false, "let the command run on when the lease is lost or about to expire unrenewed (run still exits 122)")
	fs.StringVar(&f.ref, "ref", "", "holder `REF` that others see (default HOST:PID); a ref that another process holds is refused, unless --reenter")
	fs.BoolVar(&f.reenter, "reenter", false, "join the hold of another process whose --ref is the same, rather than refuse: either's release ends the hold")
	fs.StringVar(&f.kind, "kind", "", "`KIND` of holder (\"build\", \"deploy\"), shown when others are refused")
	fs.BoolVar(&f.quiet, "q", false, "quiet: print nothing but errors (nothing while waiting or when refused)")
	fs.StringVar(&f.shell, "c", "", "run `COMMAND` with $SHELL -c (else /bin/sh), as flock -c")
	fs.IntVar(&f.weight, "weight", 0, "hold `K` slots of the lock as one hold (default 1); K larger than the lock's slots is an error")
	fs.BoolVar(&f.shared, "shared", false, "hold one slot, shared with other readers, as flock -s (a new lock gets 1000000 slots)")
	fs.BoolVar(&f.exclusive, "exclusive", false, "hold every slot of the lock, as flock -x: no other holder runs beside it")
	// flock's spellings, so that its command lines work as they are.
	alias(fs, "no-wait", "n", "nonblock", "nb")
	alias(fs, "wait", "w", "timeout")
	alias(fs, "conflict-exit-code", "E")
	alias(fs, "c", "command")
	alias(fs, "shared", "s")
	alias(fs, "exclusive", "x", "e")
	return fs, sf
}

// check refuses contradictory or bad values and fills in the defaults
// that depend on others; it returns the status for --wait running out.
func (f *runFlags) check(set map[string]bool) (timeoutCode int, err error) {
	switch {
	case set["slots"] && f.slots < 1:
		return 0, usagef("--slots %d: a lock has at least 1 slot", f.slots)
	case f.noWait && f.wait.set:
		return 0, usagef("--wait and --no-wait exclude each other")
	case f.conflict < 0 || f.conflict > 255:
		return 0, usagef("--conflict-exit-code %d: an exit status is 0 to 255", f.conflict)
	case f.conflict == exitLost:
		return 0, usagef("--conflict-exit-code %d: %d is the status of a lease lost while the command ran", f.conflict, exitLost)
	case f.ttl < MinTTL:
		return 0, checkTTL(f.ttl)
	case set["grace"] && (f.grace <= 0 || f.grace > f.ttl/2):
		return 0, usagef("--grace %v: want more than 0 and at most half of --ttl %v, so that renewals are tried before the command is ended", f.grace, f.ttl)
	case set["weight"] && f.weight < 1:
		return 0, usagef("--weight %d: a weight is at least 1 slot", f.weight)
	case f.shared && f.exclusive, f.shared && set["weight"], f.exclusive && set["weight"]:
		return 0, usagef("--weight, --shared and --exclusive exclude each other")
	case set["slots"] && f.weight > f.slots:
		return 0, usagef("--weight %d is more than --slots %d", f.weight, f.slots)
	}
	// Everything the library would refuse is refused here, before the
	// store is opened: run defines a missing lock before it acquires, and
	// a refusal must leave the store as it was. The library checks a kind
	// as a ref is checked, and says "invalid ref": name the flag.
	var bad *store.InvalidError
	for _, c := range []struct {
		flag string
		err  error
	}{
		{"--ref", store.CheckRef("ref", f.ref)},
		{"--kind", store.CheckRef("kind", f.kind)},
		{"--slots", checkIf(set["slots"], store.CheckSlots(f.slots))},
		{"--weight", checkIf(set["weight"], store.CheckWeight(f.weight))},
		{"--ttl", store.CheckTTL(f.ttl, 0, false)},
	} {
		if errors.As(c.err, &bad) {
			return 0, usagef("%s %s: %s", c.flag, bad.Value, bad.Rule)
		}
	}
	if f.wait.set && f.wait.d == 0 {
		f.noWait = true // as flock -w 0
	}
	if !set["grace"] {
		f.grace = min(DefaultGrace, f.ttl/3)
	}
	timeoutCode = exitTimeout
	if set["conflict-exit-code"] {
		timeoutCode = f.conflict
	} else {
		f.conflict = exitRefused
	}
	if f.ref == "" {
		host, _ := os.Hostname()
		f.ref = host + ":" + strconv.Itoa(os.Getpid())
	}
	return timeoutCode, nil
}

func runRun(ctx context.Context, args []string, out, errOut io.Writer) error {
	var f runFlags
	fs, sf := runFlagSet(errOut, &f)
	name, command, err := parseRunArgs(fs, args, &f)
	if err != nil {
		return err
	}
	timeoutCode, err := f.check(setFlags(fs))
	if err != nil {
		return err
	}
	if err := store.CheckName(name); err != nil {
		return runFailed(ctx, err) // before the store is touched: run defines NAME
	}

	// Catch the signals from the start: one that arrives while waiting ends
	// the wait (nothing held), one that arrives later goes to the command.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, runSignals...)
	defer signal.Stop(sigs)

	gs := newGuardSlot(sf.freedAtDeath())
	g := gs.start(errOut, "sleeplock run")
	defer g.done() // when no command ran; supervise lets it go itself
	s, err := sf.openGuarded(ctx, gs)
	if err != nil {
		return runFailed(ctx, err)
	}
	locks := sleeplock.New(s, sleeplock.WithTTL(f.ttl))
	lv := &leaving{who: "sleeplock run", ttl: f.ttl, errOut: errOut}
	defer lv.close(locks)
	newSlots := f.slots
	if newSlots == 0 && f.shared {
		newSlots = -sharedSlots // only when the lock does not exist
	}
	if err := defineForRun(ctx, locks, name, newSlots, f.weight); err != nil {
		return runFailed(ctx, err)
	}
	lease, err := acquireForRun(ctx, locks, name, &f, timeoutCode, sigs, lv)
	if err != nil {
		return runFailed(ctx, err)
	}
	if lease.Reentered() && !f.reenter {
		// Not released: the hold is the other process's.
		return runFailed(ctx, heldByRef(ctx, locks, lease))
	}
	// From here on the lease is given back whatever happens, also when
	// the caller's context ended (a signal that we forward), within
	// releaseTimeout.
	release := func() error {
		return lv.release(ctx, lease, lease.Release)
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, out, errOut
	cmd.Env = append(os.Environ(),
		"SLEEPLOCK_LOCK="+name,
		"SLEEPLOCK_TOKEN="+strconv.FormatInt(lease.Token(), 10),
		"SLEEPLOCK_REF="+lease.Ref())
	res, err := supervise(cmd, supervision{Lease: lease, Grace: f.grace, KeepOnLoss: f.keepOnLoss, KeepOnLossFlag: true,
		FreedAtDeath: gs != nil, Guard: g, Signals: sigs, Who: "sleeplock run", ErrOut: errOut})
	if err != nil {
		_ = release()
		return startError("sleeplock run", command[0], err, errOut)
	}
	rerr := release()
	if res.Lost == nil {
		res.Lost = lostAtRelease(rerr, lease)
		if res.Lost != nil {
			fmt.Fprintf(errOut, "sleeplock run: lost the lease of %q while the command ran: %s\n", name, message(res.Lost))
		}
	}
	if res.Lost != nil {
		fmt.Fprintf(errOut, "sleeplock run: the command ended with status %d; exiting %d: the lease was lost while it ran\n", exitStatus(res.State), exitLost)
	}
	if code := res.Status(); code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// lostAtRelease is why the release at a command's end shows that the
// hold was no longer ours, unnoticed until then (nil when it was ours):
// its lock was deleted (delete --force), or it was gone (taken over,
// expired, released by its ref). A reentered lease's ErrNotHeld is not a
// loss: the hold is the other process's, which may have released it.
func lostAtRelease(rerr error, lease sleeplock.Lease) error {
	switch {
	case errors.Is(rerr, sleeplock.ErrNotFound):
		if err := lease.Err(); errors.Is(err, sleeplock.ErrLeaseLost) {
			return err
		}
		return fmt.Errorf("%w: lock %q was deleted while the command ran", sleeplock.ErrLeaseLost, lease.Name())
	case errors.Is(rerr, sleeplock.ErrNotHeld) && !lease.Reentered():
		return fmt.Errorf("%w: no longer held when the command ended", sleeplock.ErrLeaseLost)
	}
	return nil
}

// heldByRef is the error of a run whose --ref another process holds the
// lock under already: the ref, the lock, and what the store tells of that
// hold (its kind, since when, its token, and the pid of the default ref
// HOST:PID).
func heldByRef(ctx context.Context, locks *sleeplock.Locks, lease sleeplock.Lease) error {
	what := ""
	if st, err := locks.StateDetail(ctx, lease.Name()); err == nil {
		for _, h := range st.Holders {
			if h.Ref != lease.Ref() {
				continue
			}
			if h.Kind != "" {
				what += ", kind " + h.Kind
			}
			if !h.Acquired.IsZero() {
				what += ", since " + h.Acquired.Local().Format(time.TimeOnly)
			}
			what += ", token " + strconv.FormatInt(h.Token, 10)
		}
	}
	if host, pid, ok := strings.Cut(lease.Ref(), ":"); ok && host != "" {
		if _, err := strconv.Atoi(pid); err == nil {
			what += ", pid " + pid + " on " + host
		}
	}
	return fmt.Errorf("ref %q holds lock %q already in another process (%s): give another --ref, or --reenter to join its hold",
		lease.Ref(), lease.Name(), strings.TrimPrefix(what, ", "))
}

// runFailed gives an error of sleeplock run itself its exit status: 2 for
// a bad value, 125 for the rest, never the status of a refusal.
func runFailed(ctx context.Context, err error) error {
	var ue *usageError
	var ee *exitError
	switch {
	case errors.As(err, &ue), errors.As(err, &ee):
		return err
	case errors.Is(err, sleeplock.ErrInvalid):
		return &usageError{message(err)}
	case ctx.Err() != nil:
		return err // interrupted: Main gives it 128+signal
	}
	return &exitError{code: exitFailed, err: err}
}

// defineForRun defines name with slots (1 when 0, -slots when negative)
// unless it exists; a lock with other slots than --slots (positive) is an
// error, and so is a family covering name with other slots than --slots:
// run never defines a member of a family apart from it. A weight (--weight,
// 0 when not given) above the slots it would define is refused before it
// defines anything: the acquisition would be refused, and a refused run
// leaves the store as it was.
func defineForRun(ctx context.Context, locks *sleeplock.Locks, name string, slots, weight int) error {
	st, err := locks.State(ctx, name)
	if !errors.Is(err, sleeplock.ErrNotFound) {
		if err != nil || slots <= 0 || st.Slots == slots {
			return err // it exists (or a family covers it), or the store failed
		}
		if fam, ok := coveringFamily(ctx, locks, name); ok && fam.Slots == st.Slots {
			return fmt.Errorf("lock %q is a member of family %q of %s, not %d: drop --slots, resize the family with \"sleeplock define '%s' %d --resize\", or define %q apart first with \"sleeplock define %s %d\"",
				name, fam.Name, slotCount(fam.Slots), slots, fam.Name, slots, name, name, slots)
		}
		// Defined apart: Define reports the conflict.
	}
	slots = max(slots, -slots, 1)
	if weight > slots {
		return fmt.Errorf("lock %q does not exist, and run would define it with %s, fewer than --weight %d: give --slots N (at least %d), or define it first with \"sleeplock define %s %d\"",
			name, slotCount(slots), weight, weight, shellQuote(name), weight)
	}
	err = locks.Define(ctx, name, slots)
	var conflict *sleeplock.ConflictError
	if errors.As(err, &conflict) {
		return fmt.Errorf("lock %q has %s, not %d: drop --slots, or resize it with \"sleeplock define %s %d --resize\"",
			name, slotCount(conflict.Slots), conflict.Requested, name, conflict.Requested)
	}
	return err
}

// checkIf is err when cond holds, else nil.
func checkIf(cond bool, err error) error {
	if cond {
		return err
	}
	return nil
}

// coveringFamily is the most specific family that covers name, if any.
func coveringFamily(ctx context.Context, locks *sleeplock.Locks, name string) (sleeplock.State, bool) {
	var found sleeplock.State
	ok := false
	store.FamilyOf(name, func(pattern string) bool {
		if st, err := locks.State(ctx, pattern); err == nil && st.Family {
			found, ok = st, true
		}
		return !ok
	})
	return found, ok
}

// slotCount is "1 slot" or "N slots".
func slotCount(n int) string {
	if n == 1 {
		return "1 slot"
	}
	return strconv.Itoa(n) + " slots"
}

// dashDashFirst reports whether fs.Parse(args), which left rest, stopped
// at a "--" of its own (not the value of a flag) rather than at the first
// positional argument: "--" came before any NAME.
func dashDashFirst(fs *flag.FlagSet, args, rest []string) bool {
	used := len(args) - len(rest)
	return used > 0 && args[used-1] == "--" && !isFlagValue(fs, args, used-1)
}

// parseRunArgs parses the flags and returns the lock name and the command,
// as flock does: flags, NAME, then the command from the first argument
// that is not a flag of ours ("--" before it is optional); everything
// from the command on is the command's, "--" included. With -c the
// command is "sh -c COMMAND".
func parseRunArgs(fs *flag.FlagSet, args []string, f *runFlags) (string, []string, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", nil, &helpRequest{fs}
		}
		return "", nil, &usageError{flagMessage(err)}
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return "", nil, usagef("no lock name: give NAME, then the command")
	}
	if dashDashFirst(fs, args, rest) {
		return "", nil, usagef("no lock name: \"--\" ends run's flags and starts the command, so give NAME before it (run [flags] NAME -- COMMAND), got %q", rest)
	}
	name, rest := rest[0], rest[1:]
	if len(rest) > 0 && rest[0] != "--" && strings.HasPrefix(rest[0], "-") && rest[0] != "-" {
		// Flags of ours after NAME, up to the command or "--".
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", nil, &helpRequest{fs}
			}
			return "", nil, &usageError{flagMessage(err)}
		}
		rest = fs.Args() // fs.Parse dropped the "--" that ended them
	} else if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	switch {
	case f.shell != "" && len(rest) > 0:
		return "", nil, usagef("give the command with -c or after NAME, not both (got -c %q and %q)", f.shell, rest)
	case f.shell != "":
		sh := os.Getenv("SHELL")
		if sh == "" {
			sh = "/bin/sh"
		}
		return name, []string{sh, "-c", f.shell}, nil
	case len(rest) == 0:
		return "", nil, usagef("no command to run: give it after NAME, or with -c 'COMMAND'")
	}
	return name, rest, nil
}

// acquireForRun takes the slot: at once with --no-wait, else waiting (up
// to --wait) and telling on stderr its place in the queue. A signal while
// waiting ends the wait with status 128+signal.
func acquireForRun(ctx context.Context, locks *sleeplock.Locks, name string, f *runFlags, timeoutCode int, sigs <-chan os.Signal, lv *leaving) (sleeplock.Lease, error) {
	errOut := lv.errOut
	opts := []sleeplock.AcquireOption{sleeplock.Ref(f.ref), sleeplock.Kind(f.kind)}
	switch {
	case f.exclusive:
		opts = append(opts, sleeplock.Exclusive())
	case f.shared:
		opts = append(opts, sleeplock.Shared())
	case f.weight > 0:
		opts = append(opts, sleeplock.Weight(f.weight))
	}
	if f.noWait {
		lease, err := locks.TryAcquire(ctx, name, opts...)
		if errors.Is(err, sleeplock.ErrUnavailable) {
			if !f.quiet {
				fmt.Fprintf(errOut, "sleeplock run: %s\n", message(err))
				if h := refusedSharedHint(name, err); f.shared && h != "" {
					fmt.Fprintf(errOut, "sleeplock run: %s\n", h)
				}
			}
			return lease, &exitError{code: f.conflict}
		}
		return lease, err
	}
	actx, cancel := context.WithCancel(ctx)
	if f.wait.set {
		actx, cancel = context.WithTimeout(ctx, f.wait.d)
	}
	defer cancel()
	caught := make(chan os.Signal, 1)
	stop := make(chan struct{})
	joined := make(chan struct{})
	go func() {
		defer close(joined)
		select {
		case sig := <-sigs:
			caught <- sig
			cancel()
		case <-stop:
		}
	}()
	reported := make(chan struct{})
	if f.quiet {
		close(reported)
	} else {
		go func() {
			defer close(reported)
			reportQueue(actx, locks, name, f.ref, f.shared, errOut)
		}()
	}
	lease, err := locks.Acquire(actx, name, opts...)
	close(stop)
	<-joined
	cancel()
	<-reported
	if err == nil {
		select {
		case sig := <-caught: // granted as the signal came: give it back
			_ = lv.release(ctx, lease, lease.Release)
			return lease, signalExit("sleeplock run", sig, name, errOut)
		default:
			return lease, nil
		}
	}
	select {
	case sig := <-caught:
		return lease, signalExit("sleeplock run", sig, name, errOut)
	default:
	}
	if ctx.Err() != nil {
		// The caller's context ended: most likely a signal that we were
		// also told of, a moment later.
		select {
		case sig := <-sigs:
			return lease, signalExit("sleeplock run", sig, name, errOut)
		case <-time.After(100 * time.Millisecond):
		}
		return lease, ctx.Err()
	}
	if f.wait.set && errors.Is(err, context.DeadlineExceeded) {
		if !f.quiet {
			fmt.Fprintf(errOut, "sleeplock run: gave up waiting for %q after %v\n", name, f.wait.d)
		}
		return lease, &exitError{code: timeoutCode}
	}
	return lease, err
}

// signalExit is the exit of who (sleeplock run, sleeplock elect) when
// signal sig came while it waited for name: 128+N, nothing held.
func signalExit(who string, sig os.Signal, name string, errOut io.Writer) error {
	fmt.Fprintf(errOut, "%s: %v while waiting for %q: nothing held\n", who, sig, name)
	if s, ok := sig.(syscall.Signal); ok {
		return &exitError{code: 128 + int(s)}
	}
	return &exitError{code: exitFailed}
}

// reportQueue prints the caller's place in the queue of name whenever it
// changes, until ctx ends.
func reportQueue(ctx context.Context, locks *sleeplock.Locks, name, ref string, shared bool, errOut io.Writer) {
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	last := -1
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := locks.StateDetail(ctx, name)
		if err == nil && ctx.Err() == nil {
			pos := -1
			for i, w := range st.Queue {
				if w.Ref == ref {
					pos = i
					break
				}
			}
			if pos >= 0 && pos != last {
				fmt.Fprintf(errOut, "sleeplock run: waiting for %q (%s, %d running): %d ahead of you\n",
					name, slotCount(st.Slots), st.Running, pos)
				if h := sharedHint(name, st.Slots); shared && last < 0 && h != "" {
					fmt.Fprintf(errOut, "sleeplock run: %s\n", h)
				}
				last = pos
			}
		}
		t.Reset(500 * time.Millisecond)
	}
}

// startError reports a command that could not be started with the status
// a shell would give.
func startError(who, name string, err error, errOut io.Writer) error {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(errOut, "%s: %s: command not found\n", who, name)
		return &exitError{code: exitNotFound}
	default:
		fmt.Fprintf(errOut, "%s: %s: cannot run: %v\n", who, name, err)
		return &exitError{code: exitNoExec}
	}
}

// releaseTimeout bounds the release of a lease (elect: the resignation of
// a term) on the way out of run and elect: a store that does not answer
// within it is left with the lease, which expires by its TTL.
const releaseTimeout = time.Second

// leaving is the way out of run or elect once a lease was held: its
// release (a term's resignation) within releaseTimeout, then the store's
// close, waited for until the release's deadline at most when the store
// did not take the lease back.
type leaving struct {
	who    string        // "sleeplock run"
	ttl    time.Duration // the lease's TTL
	errOut io.Writer
	by     time.Time // the deadline of the last release that failed, zero if none did
}

// release gives back lease by release (Release, or a term's Resign),
// within releaseTimeout even when ctx has ended. When the store did not
// take it back (no answer, or an error other than the hold's being gone
// already) it warns that the lease is left behind until its TTL runs out.
// It returns release's error.
func (lv *leaving) release(ctx context.Context, lease sleeplock.Lease, release func(context.Context) error) error {
	by := time.Now().Add(releaseTimeout)
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), by)
	defer cancel()
	err := release(rctx)
	if err == nil || errors.Is(err, sleeplock.ErrNotHeld) || errors.Is(err, sleeplock.ErrNotFound) {
		return err
	}
	lv.by = by
	why := message(err)
	if rctx.Err() != nil {
		why = "the store did not answer within " + releaseTimeout.String()
	}
	fmt.Fprintf(lv.errOut, "%s: warning: could not release %q (token %d): %s; the store keeps the lease until it expires by its TTL (%v)\n",
		lv.who, lease.Name(), lease.Token(), why, lv.ttl)
	return err
}

// close closes locks; after a release that failed, it waits for that
// until the release's deadline at most: a store that hangs does not hold
// the exit (pgx takes up to 15 s to close a connection whose query was
// cancelled), and the process's end closes what is left.
func (lv *leaving) close(locks *sleeplock.Locks) {
	if lv.by.IsZero() {
		_ = locks.Close()
		return
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = locks.Close()
	}()
	t := time.NewTimer(time.Until(lv.by))
	defer t.Stop()
	select {
	case <-closed:
	case <-t.C:
	}
}
