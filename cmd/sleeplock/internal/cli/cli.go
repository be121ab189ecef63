// Package cli is the sleeplock command line: one function per subcommand,
// each with its own flag set, so that cmd/sleeplock stays a thin main.
//
// Conventions, the same for every subcommand: flags may come before or
// after the positional arguments ("release NAME --ref R" is "release --ref
// R NAME"); "--" ends the flags, everything after it is positional. A bad
// command line is reported once on stderr with status 2 and changes
// nothing. "sleeplock help" and "sleeplock COMMAND -h" print help on
// stdout with status 0. A run cut short by its context (SIGINT) exits 130.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
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
// exits with its child's status).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// StatusInterrupted is the exit status of a command cut short by its
// context: 128 + SIGINT, as shells report an interrupted command.
const StatusInterrupted = 130

// Main runs the command line args and returns the exit status: 0 on
// success, 2 for a bad command line, 130 when ctx ended (an interrupt)
// before the command finished, 1 for other errors.
func Main(ctx context.Context, args []string, out, errOut io.Writer) int {
	if len(args) == 0 {
		usage(errOut)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) == 1 {
			usage(out)
			return 0
		}
		if len(args) > 2 {
			fmt.Fprintf(errOut, "sleeplock help: give one command, got %q\n", args[1:])
			return 2
		}
		if _, ok := commands[args[1]]; !ok {
			fmt.Fprintf(errOut, "sleeplock help: unknown command %q\n", args[1])
			return 2
		}
		// Every command parses its flags before it does anything, so
		// "COMMAND -h" prints its help and changes nothing.
		return Main(ctx, []string{args[1], "-h"}, out, errOut)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(errOut, "sleeplock: unknown command %q (run \"sleeplock help\" for the commands)\n", args[0])
		return 2
	}
	err := c.run(ctx, args[1:], out, errOut)
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
		fmt.Fprintf(errOut, "sleeplock %s: %v (run \"sleeplock help %s\" for its usage)\n", args[0], err, args[0])
		return 2
	case errors.As(err, &ee):
		return ee.code
	case ctx.Err() != nil:
		fmt.Fprintf(errOut, "sleeplock %s: interrupted: %v\n", args[0], err)
		return StatusInterrupted
	default:
		fmt.Fprintf(errOut, "sleeplock %s: %v\n", args[0], err)
		return 1
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sleeplock COMMAND [flags] [ARGS…]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "sleeplock help COMMAND" for a command's flags. Flags may follow the`)
	fmt.Fprintln(w, `arguments; "--" ends the flags.`)
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
			fs.PrintDefaults()
		}
	}
	// Silence the flag package's own error and usage output: parse
	// reports errors, Main prints help. Tests and callers that want
	// fs.Usage on errOut may set the output back.
	fs.SetOutput(io.Discard)
	_ = errOut
	return fs
}

// parse parses args, turning flag errors into usage errors. Flags and
// positional arguments may be interspersed ("NAME --ref R"); "--" ends the
// flags and is dropped. fs.Args() is the positional arguments in order.
func parse(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return &helpRequest{fs}
			}
			return &usageError{err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" && !isFlagValue(fs, args, used-1) {
			pos = append(pos, rest...) // after "--": all positional
			break
		}
		// fs.Parse stopped at a positional argument: keep it, go on
		// parsing the flags after it.
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	// Leave exactly the positional arguments in fs.Args().
	return fs.Parse(append([]string{"--"}, pos...))
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
