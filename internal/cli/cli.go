// Package cli is the sleeplock command line: one function per subcommand,
// each with its own flag set, so that cmd/sleeplock stays a thin main.
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

// exitError carries an exit status chosen by the command (sleeplock run
// exits with its child's status).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Main runs the command line args and returns the exit status: 0 on
// success, 2 for a bad command line, 1 for other errors.
func Main(ctx context.Context, args []string, out, errOut io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(errOut)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(errOut, "sleeplock: unknown command %q\n\n", args[0])
		usage(errOut)
		return 2
	}
	err := c.run(ctx, args[1:], out, errOut)
	var ue *usageError
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(errOut, "sleeplock %s: %v\n", args[0], err)
		return 2
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintf(errOut, "sleeplock %s: %v\n", args[0], err)
		return 1
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sleeplock COMMAND [flags]")
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
	fmt.Fprintln(w, `Run "sleeplock COMMAND -h" for a command's flags.`)
}

// flags returns a flag set that reports errors instead of exiting.
func flags(name string, errOut io.Writer, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("sleeplock "+name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintf(errOut, "usage: sleeplock %s %s\n", name, synopsis)
		if strings.Contains(synopsis, "[flags]") {
			fmt.Fprintln(errOut, "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parse parses args, turning flag errors into usage errors.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err.Error()}
	}
	return nil
}
