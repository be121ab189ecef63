// Package cli is the sleeplock command line: one function per subcommand,
// each with its own flag set, so that cmd/sleeplock stays a thin main.
//
// Conventions, the same for every subcommand: flags may come before or
// after the positional arguments ("release NAME --ref R" is "release --ref
// R NAME"); "--" ends the flags, everything after it is positional; the
// store flags may also come before the command. A bad command line or
// value is reported once on stderr with status 2 and changes nothing.
// "sleeplock help" and "sleeplock COMMAND -h" print help on stdout with
// status 0. A command cut short by its context exits 128 + the signal of
// a *SignalError cause (else 130); one that ends as it should when its
// context ends (serve, state --watch, leader --watch) exits 0.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/sleeplock/sleeplock"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, out, errOut io.Writer) error
}

var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, args []string, out, errOut io.Writer) error) struct{} {
	commands[name] = command{summary, run}
	return struct{}{}
}

// usageError is an error in the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// helpRequest is what parse returns for -h: Main prints the command's help
// on stdout. It matches flag.ErrHelp.
type helpRequest struct{ fs *flag.FlagSet }

func (e *helpRequest) Error() string { return flag.ErrHelp.Error() }
func (e *helpRequest) Unwrap() error { return flag.ErrHelp }

// exitError carries an exit status chosen by the command (sleeplock run
// exits with its child's status). When err is set, Main prints it first.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return fmt.Sprintf("exit status %d", e.code)
}

func (e *exitError) Unwrap() error { return e.err }

// StatusInterrupted is the exit status of a command cut short by its
// context: 128 + SIGINT, as shells report an interrupted command.
const StatusInterrupted = 130

// SignalError is the cause to give a command's context when a signal ends
// it (context.WithCancelCause): Main then exits 128 + the signal's number,
// as shells report a command ended by a signal.
type SignalError struct{ Signal syscall.Signal }

func (e *SignalError) Error() string { return e.Signal.String() }

// interruptedStatus is the exit status of a command whose context ended:
// 128 + the signal of a *SignalError cause, else StatusInterrupted.
func interruptedStatus(ctx context.Context) int {
	var se *SignalError
	if errors.As(context.Cause(ctx), &se) {
		return 128 + int(se.Signal)
	}
	return StatusInterrupted
}

// Version is sleeplock's release: the version of the cmd/sleeplock module
// in scripts/modules (the release test checks that they agree). A binary
// installed with go install …@version says the version it was built from.
const Version = "0.2.0"

// globalFlags take a value and may come before the command ("sleeplock
// --store sqlite:/tmp/x.db state"); they are handed to the command.
var globalFlags = []string{"store", "schema", "prefix"}

// storeless are the commands that take no store flags.
var storeless = map[string]bool{"demo": true, "version": true, "help": true}

// splitGlobal moves the global flags before the command to the command's
// own arguments.
func splitGlobal(args []string) (cmd string, rest []string, err error) {
	var global []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		if !slices.Contains(globalFlags, name) {
			break
		}
		if !hasValue {
			if len(args) < 2 {
				return "", nil, usagef("flag needs an argument: --%s", name)
			}
			value, args = args[1], args[1:]
		}
		global = append(global, "--"+name+"="+value)
		args = args[1:]
	}
	if len(args) == 0 {
		if len(global) > 0 {
			return "", nil, usagef("no command after %s", strings.Join(global, " "))
		}
		return "", nil, nil
	}
	if len(global) > 0 && storeless[args[0]] {
		return "", nil, usagef("%s takes no store flags, got %s", args[0], strings.Join(global, " "))
	}
	return args[0], append(global, args[1:]...), nil
}

// Main runs the command line args and returns the exit status: 0 on
// success, 2 for a bad command line, a bad value or a bad config file
// (whatever is wrong in it), 128+N when a signal N
// ended ctx before the command finished (130 when ctx ended otherwise), 1
// for other errors. sleeplock run has statuses of its own (help run).
func Main(ctx context.Context, args []string, out, errOut io.Writer) int {
	name, rest, err := splitGlobal(args)
	if err != nil {
		fmt.Fprintf(errOut, "sleeplock: %v (run \"sleeplock help\" for the commands)\n", err)
		return 2
	}
	switch name {
	case "":
		usage(errOut)
		return 2
	case "-h", "-help", "--help":
		name = "help"
	case "-version", "--version", "-V":
		name = "version"
	}
	if name == "help" {
		return help(ctx, rest, out, errOut)
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(errOut, "sleeplock: unknown command %q%s (run \"sleeplock help\" for the commands)\n", name, didYouMean(name))
		return 2
	}
	err = c.run(ctx, rest, out, errOut)
	var ue *usageError
	var ee *exitError
	var hr *helpRequest
	switch {
	case err == nil:
		return 0
	case errors.As(err, &hr):
		hr.fs.SetOutput(out)
		hr.fs.Usage()
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(errOut, "sleeplock %s: %s (run \"sleeplock help %s\" for its usage)\n", name, message(err), name)
		return 2
	case errors.As(err, &ee):
		if ee.err != nil {
			fmt.Fprintf(errOut, "sleeplock %s: %s\n", name, message(ee.err))
		}
		return ee.code
	case ctx.Err() != nil:
		fmt.Fprintf(errOut, "sleeplock %s: interrupted: %s\n", name, message(err))
		return interruptedStatus(ctx)
	case errors.Is(err, sleeplock.ErrInvalid), isConfigError(err):
		fmt.Fprintf(errOut, "sleeplock %s: %s\n", name, message(err))
		return 2
	default:
		fmt.Fprintf(errOut, "sleeplock %s: %s\n", name, message(err))
		return 1
	}
}

// isConfigError reports whether err is about a config file (apply's
// FILE): a bad file is a bad value, status 2, whatever is wrong in it (an
// unknown key as a bad slot count).
func isConfigError(err error) bool {
	var ce *sleeplock.ConfigError
	return errors.As(err, &ce)
}

// help runs "sleeplock help [COMMAND]".
func help(ctx context.Context, args []string, out, errOut io.Writer) int {
	switch {
	case len(args) == 0:
		usage(out)
		return 0
	case len(args) > 1:
		fmt.Fprintf(errOut, "sleeplock help: give one command, got %q\n", args)
		return 2
	case args[0] == "help", args[0] == "-h", args[0] == "-help", args[0] == "--help":
		fmt.Fprintln(out, "usage: sleeplock help [COMMAND]")
		fmt.Fprintln(out)
		fmt.Fprintln(out, "Print the commands, or the usage and flags of COMMAND (as \"sleeplock COMMAND -h\").")
		return 0
	}
	if _, ok := commands[args[0]]; !ok {
		fmt.Fprintf(errOut, "sleeplock help: unknown command %q%s\n", args[0], didYouMean(args[0]))
		return 2
	}
	// Every command parses its flags before it does anything, so
	// "COMMAND -h" prints its help and changes nothing.
	return Main(ctx, []string{args[0], "-h"}, out, errOut)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sleeplock [--store STORE] COMMAND [flags] [ARGS…]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands)+1)
	for n := range commands {
		names = append(names, n)
	}
	names = append(names, "help")
	sort.Strings(names)
	for _, n := range names {
		summary := "print the commands, or a command's usage and flags"
		if c, ok := commands[n]; ok {
			summary = c.summary
		}
		fmt.Fprintf(w, "  %-9s %s\n", n, summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The store (before or after the command):")
	fmt.Fprintln(w, "  --store STORE   sqlite:PATH, postgres://…, postgresql://…, host=… dbname=…,")
	fmt.Fprintln(w, "                  redis://… or rediss://… (TLS); default $SLEEPLOCK_STORE, else")
	fmt.Fprintln(w, "                  the SQLite file of this user, $XDG_STATE_HOME/sleeplock/locks.db")
	fmt.Fprintln(w, "                  (~/.local/state/sleeplock/locks.db), shared by this user's")
	fmt.Fprintln(w, "                  processes only; for every user of the host, give them all one")
	fmt.Fprintln(w, "                  sqlite:PATH in a directory they may all write (README, \"A store")
	fmt.Fprintln(w, "                  shared by the users of a host\"). Connecting to PostgreSQL or")
	fmt.Fprintln(w, "                  Redis gives up after 10s without an answer, unless the DSN sets")
	fmt.Fprintln(w, "                  its own bound: connect_timeout=SECONDS (PostgreSQL, per attempt)")
	fmt.Fprintln(w, "                  or dial_timeout=DURATION (Redis, e.g. redis://h:6379/0?dial_timeout=3s)")
	fmt.Fprintln(w, "  --schema NAME   PostgreSQL: the schema of sleeplock's tables; Redis: the keys'")
	fmt.Fprintln(w, "                  prefix (they start with NAME:); default sleeplock")
	fmt.Fprintln(w, "  --prefix NAME   Redis: the keys' prefix, as --schema (both given must agree)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "sleeplock help COMMAND" for a command's flags. Flags may follow the`)
	fmt.Fprintln(w, `arguments; "--" ends the flags. A duration (DUR) is seconds, as flock takes`)
	fmt.Fprintln(w, `them (5, 0.5), or a Go duration (5s, 1m30s). "sleeplock --version" prints the`)
	fmt.Fprintln(w, `version.`)
}

// cliError is a library error told in the command line's terms; it
// matches the library's error with errors.Is.
type cliError struct {
	msg string
	err error
}

func (e *cliError) Error() string { return e.msg }
func (e *cliError) Unwrap() error { return e.err }

// lockError gives a library error about the lock name in the command
// line's terms.
func lockError(name string, err error) error {
	if errors.Is(err, sleeplock.ErrNotFound) {
		return &cliError{fmt.Sprintf("no lock %q: define it with \"sleeplock define %s SLOTS\" (a family NAME/* covers every NAME/…)", name, name), err}
	}
	return err
}

// message is err's text in the command line's terms: the library's
// "sleeplock: " prefixes dropped (Main names the command once).
func message(err error) string {
	return strings.ReplaceAll(err.Error(), "sleeplock: ", "")
}

// flags returns a flag set that reports errors instead of exiting. It
// prints nothing itself: parse returns the error, which Main reports once,
// and Main prints the help (on stdout) when -h is given. errOut is kept
// for callers that print fs.Usage themselves.
func flags(name string, errOut io.Writer, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("sleeplock "+name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: sleeplock %s %s\n", name, synopsis)
		if c, ok := commands[name]; ok && c.summary != "" {
			fmt.Fprintf(w, "\n%s.\n", strings.ToUpper(c.summary[:1])+c.summary[1:])
		}
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(w, "\nflags (before or after the arguments; -- ends them):")
			printFlags(w, fs)
		}
		if h, ok := extraHelp[name]; ok {
			fmt.Fprintf(w, "\n%s", h)
		}
	}
	// Silence the flag package's own error and usage output: parse
	// reports errors, Main prints help. Tests and callers that want
	// fs.Usage on errOut may set the output back.
	fs.SetOutput(io.Discard)
	_ = errOut
	return fs
}

// extraHelp is printed after a command's flags.
var extraHelp = map[string]string{}

// alias makes name another name of the flag long (as flock spells it):
// both set the same value, and help prints them on one line.
func alias(fs *flag.FlagSet, long string, names ...string) {
	f := fs.Lookup(long)
	for _, n := range names {
		fs.Var(f.Value, n, "") // no usage: an alias
	}
}

// primary returns the flag that f is an alias of, or f.
func primary(fs *flag.FlagSet, f *flag.Flag) *flag.Flag {
	if f.Usage != "" {
		return f
	}
	p := f
	fs.VisitAll(func(g *flag.Flag) {
		if g.Usage != "" && g.Value == f.Value {
			p = g
		}
	})
	return p
}

// setFlags returns the names of the flags given, aliases under the name
// of their flag.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[primary(fs, f).Name] = true })
	return set
}

// dashed is a flag's name as README spells it: --name, or -n for one
// letter.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// printFlags prints fs's flags as README spells them, each with its
// aliases.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if f.Usage == "" {
			return // an alias, printed with its flag
		}
		typ, text := flag.UnquoteUsage(f)
		switch f.Value.(type) {
		case durationValue, *waitValue:
			if typ == "value" {
				typ = "DUR"
			}
		}
		names := []string{dashed(f.Name)}
		fs.VisitAll(func(g *flag.Flag) {
			if g.Usage == "" && g.Value == f.Value {
				names = append(names, dashed(g.Name))
			}
		})
		if typ != "" {
			for i := range names {
				names[i] += " " + typ
			}
		}
		fmt.Fprintf(w, "  %s\n    \t%s", strings.Join(names, ", "), strings.ReplaceAll(text, "\n", "\n    \t"))
		switch f.DefValue {
		case "", "0", "false", "0s":
		default:
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// negativeNumber matches an argument such as "-1": a value, never a flag
// (no flag's name is a number), so that "define foo -1" reports the bad
// value, not an unknown flag.
var negativeNumber = regexp.MustCompile(`^-[0-9][0-9.]*$`)

// parse parses args, turning flag errors into usage errors. Flags and
// positional arguments may be interspersed ("NAME --ref R"); "--" ends the
// flags and is dropped; a negative number ("-1") is a positional argument
// unless it is a flag's value. fs.Args() is the positional arguments in
// order.
func parse(fs *flag.FlagSet, args []string) error {
	var pos []string
	for len(args) > 0 {
		// Hand the flag package the arguments up to the next negative
		// number, which it would take for a flag.
		cut := len(args)
		for i, a := range args {
			if isFlagValue(fs, args, i) {
				continue
			}
			if a == "--" {
				break
			}
			if negativeNumber.MatchString(a) {
				cut = i
				break
			}
		}
		p, err := parseSegment(fs, args[:cut])
		if err != nil {
			return err
		}
		pos = append(pos, p...)
		if cut == len(args) {
			break
		}
		pos = append(pos, args[cut])
		args = args[cut+1:]
	}
	// Leave exactly the positional arguments in fs.Args().
	return fs.Parse(append([]string{"--"}, pos...))
}

// parseSegment parses the flags of args, which has no negative number
// outside "--", and returns its positional arguments.
func parseSegment(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &helpRequest{fs}
			}
			return nil, &usageError{flagMessage(err)}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" && !isFlagValue(fs, args, used-1) {
			return append(pos, rest...), nil // after "--": all positional
		}
		// fs.Parse stopped at a positional argument: keep it, go on
		// parsing the flags after it.
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagWord matches a flag as the flag package writes it in its errors
// ("flag provided but not defined: -wiat", "invalid value … for flag
// -wait: …", "flag needs an argument: -wait").
var flagWord = regexp.MustCompile(`(not defined: |for flag |needs an argument: )-{1,2}([^\s:=]+)`)

// flagMessage is the flag package's error err with each flag spelled as
// help spells it (--wait, -n), never "-wait".
func flagMessage(err error) string {
	return flagWord.ReplaceAllStringFunc(err.Error(), func(m string) string {
		sub := flagWord.FindStringSubmatch(m)
		return sub[1] + dashed(sub[2])
	})
}

// isFlagValue reports whether args[i] was consumed as the value of the
// flag before it ("--ref --"), rather than being the "--" that ends flags.
func isFlagValue(fs *flag.FlagSet, args []string, i int) bool {
	if i == 0 {
		return false
	}
	prev := args[i-1]
	if len(prev) < 2 || prev[0] != '-' || prev == "--" || strings.Contains(prev, "=") {
		return false
	}
	f := fs.Lookup(strings.TrimLeft(prev, "-"))
	if f == nil {
		return false
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return false
	}
	// prev is a flag taking a value; but prev may itself be the value of
	// the flag before it ("--ref --stale --"): count back.
	return !isFlagValue(fs, args, i-1)
}

// nameAfterDashDash reports whether args, the arguments parse read into
// fs, have a "--" (not a flag's value) before their first positional
// argument: the form "[flags] NAME [--] COMMAND" then has no NAME, only
// a command.
func nameAfterDashDash(fs *flag.FlagSet, args []string) bool {
	for i, a := range args {
		switch {
		case isFlagValue(fs, args, i):
		case a == "--":
			return true
		case len(a) > 1 && a[0] == '-' && !negativeNumber.MatchString(a):
		default:
			return false
		}
	}
	return false
}
