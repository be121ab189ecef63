package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/sleeplock/sleeplock"
)

var _ = register("define", "create a lock (or a family NAME/*) with SLOTS slots", runDefine)

func runDefine(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("define", errOut, "[flags] NAME SLOTS")
	sf := addStoreFlags(fs)
	resize := fs.Bool("resize", false, "if NAME is defined with other slots, resize it (holders keep their slots)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usagef("give NAME and SLOTS, got %q", fs.Args())
	}
	name := fs.Arg(0)
	slots, err := strconv.Atoi(fs.Arg(1))
	if err != nil || slots < 1 {
		return usagef("SLOTS must be a whole number from 1, got %q", fs.Arg(1))
	}
	s, err := sf.open(ctx)
	if err != nil {
		return err
	}
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	err = locks.Define(ctx, name, slots)
	var conflict *sleeplock.ConflictError
	switch {
	case err == nil:
		fmt.Fprintf(out, "%s has %s\n", name, slotCount(slots))
		return nil
	case errors.As(err, &conflict) && *resize:
		if err := locks.Resize(ctx, name, slots); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s resized to %s\n", name, slotCount(slots))
		return nil
	case errors.As(err, &conflict):
		return fmt.Errorf("lock %q has %s, not %d: give --resize to change them", name, slotCount(conflict.Slots), slots)
	default:
		return err
	}
}

var _ = register("apply", "define the locks of a YAML config file", runApply)

func init() {
	extraHelp["apply"] = `The file is YAML: a list of locks, each a name and its slots. A name
ending in /* is a family: it covers NAME/anything, each with those slots.

  locks:
    - name: payments
      slots: 3
    - name: chat/*      # chat/42, chat/43, … one slot each
      slots: 1

The whole file is read and checked before the store is touched; a bad
file (bad YAML, an unknown key, a bad value) is reported with its line and
exits 2, changing nothing. A lock that exists with other slots is an
error naming FILE:LINE (status 1, nothing defined): change the file, or
resize the lock with "sleeplock define NAME SLOTS --resize". Applying the
same file again changes nothing.
`
}

func runApply(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("apply", errOut, "[flags] FILE")
	sf := addStoreFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("give one config FILE, got %q", fs.Args())
	}
	// Read the whole file before touching the store: a bad file changes
	// nothing.
	file := fs.Arg(0)
	cfg, err := sleeplock.LoadConfig(file)
	if err != nil {
		return err // a *ConfigError names the file
	}
	s, err := sf.open(ctx)
	if err != nil {
		return err
	}
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	if err := locks.Apply(ctx, cfg); err != nil {
		// Name the file and the entry's line (FILE:LINE), as the
		// library's *ConfigError knows it.
		where := file
		var ce *sleeplock.ConfigError
		if errors.As(err, &ce) && ce.Line > 0 {
			where = file + ":" + strconv.Itoa(ce.Line)
		}
		var conflict *sleeplock.ConflictError
		if errors.As(err, &conflict) {
			return fmt.Errorf("%s: lock %q has %s, not %d: change the file, or resize it with \"sleeplock define %s %d --resize\"",
				where, conflict.Name, slotCount(conflict.Slots), conflict.Requested, shellQuote(conflict.Name), conflict.Requested)
		}
		if ce != nil {
			return err // a *ConfigError names the file and the line
		}
		return fmt.Errorf("%s: %w", where, err)
	}
	for _, l := range cfg.Locks {
		fmt.Fprintf(out, "%s has %s\n", l.Name, slotCount(l.Slots))
	}
	return nil
}

var _ = register("version", "print sleeplock's version (also --version)", runVersion)

func runVersion(_ context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("version", errOut, "")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(out, versionLine(bi))
	return nil
}

// versionLine is "sleeplock 0.2.0" (the module's release when go install
// built it from one: not a pseudo-version of a commit), then the commit when built from a
// clone (vcs.revision, "+modified" with uncommitted changes), then the Go
// version and platform.
func versionLine(bi *debug.BuildInfo) string {
	s := "sleeplock " + Version
	if bi != nil {
		if v := bi.Main.Version; strings.HasPrefix(v, "v") && !strings.ContainsAny(v, "-+") {
			s = "sleeplock " + v[1:]
		}
		var rev string
		var modified bool
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				rev = kv.Value
			case "vcs.modified":
				modified = kv.Value == "true"
			}
		}
		if rev != "" {
			s += " (commit " + rev
			if modified {
				s += "+modified"
			}
			s += ")"
		}
	}
	return s + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}
