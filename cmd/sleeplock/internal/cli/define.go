package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/sleeplock/sleeplock"
	"go.yaml.in/yaml/v3"
)

var _ = register("define", "create a lock (or a family NAME/*) with SLOTS slots", runDefine)

func runDefine(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("define", errOut, "[flags] NAME SLOTS")
	sf := addStoreFlags(fs, errOut)
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

var _ = register("apply", "define the locks of a YAML config file (--resize, --prune: make the store match it)", runApply)

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
exits 2, changing nothing. The store is changed in one step, all or
nothing (one transaction, or one Redis script). A lock that exists with
other slots is an error naming FILE:LINE (status 1, nothing changed),
unless --resize: it is then resized (holders keep their slots, waiters get
the slots that became free). --prune deletes the locks and families the
file does not name, as "sleeplock delete" does: one that is held or
waited for refuses the whole apply (status 1, naming the lock and the
file), unless --force, which ends its holds and waiters. Applying the same
file again changes nothing. It prints what it did, a line per lock.
With --prune, a file that names no locks (empty, only comments, "locks:"
with nothing after it) is a bad file (2) that would delete every lock:
"locks: []" prunes every lock on purpose.
`
}

func runApply(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("apply", errOut, "[flags] FILE")
	sf := addStoreFlags(fs, errOut)
	resize := fs.Bool("resize", false, "resize the locks the file gives other slots (holders keep their slots)")
	prune := fs.Bool("prune", false, "delete the locks and families the file does not name (refused when one is in use)")
	force := fs.Bool("force", false, "with --prune, delete locks in use too: end their holds and waiters")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("give one config FILE, got %q", fs.Args())
	}
	if *force && !*prune {
		return usagef("--force goes with --prune")
	}
	var opts []sleeplock.ApplyOption
	if *resize {
		opts = append(opts, sleeplock.AllowResize())
	}
	switch {
	case *force:
		opts = append(opts, sleeplock.PruneInUse())
	case *prune:
		opts = append(opts, sleeplock.Prune())
	}
	// Read the whole file before touching the store: a bad file changes
	// nothing.
	file := fs.Arg(0)
	cfg, err := sleeplock.LoadConfig(file)
	if err != nil {
		return err // a *ConfigError names the file
	}
	if *prune && len(cfg.Locks) == 0 {
		if err := pruneAllOnPurpose(file); err != nil {
			return err
		}
	}
	s, err := sf.open(ctx)
	if err != nil {
		return err
	}
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	applied, err := locks.Apply(ctx, cfg, opts...)
	if err != nil {
		// Name the file and the entry's line (FILE:LINE), as the
		// library's *ConfigError knows it.
		where := file
		var ce *sleeplock.ConfigError
		if errors.As(err, &ce) && ce.Line > 0 {
			where = file + ":" + strconv.Itoa(ce.Line)
		}
		var conflict *sleeplock.ConflictError
		if errors.As(err, &conflict) {
			return fmt.Errorf("%s: lock %q has %s, not %d: change the file, or give --resize",
				where, conflict.Name, slotCount(conflict.Slots), conflict.Requested)
		}
		var inUse *sleeplock.InUseError
		if errors.As(err, &inUse) {
			// A pruned lock has no line: the lock and the file.
			return &cliError{fmt.Sprintf("%s: lock %q is not in the file and is in use (%s, %s): nothing changed; release them, or give --force to end them",
				file, inUse.Lock, count(inUse.Holders, "holder"), count(inUse.Waiters, "waiter")), inUse}
		}
		if ce != nil {
			return err // a *ConfigError names the file and the line
		}
		return fmt.Errorf("%s: %w", where, err)
	}
	for _, name := range applied.Deleted {
		fmt.Fprintf(out, "deleted %s\n", name)
	}
	if applied.Holds+applied.Waiters > 0 {
		fmt.Fprintf(out, "ended %s and %s\n", count(applied.Holds, "hold"), count(applied.Waiters, "waiter"))
	}
	for _, l := range cfg.Locks {
		if slices.Contains(applied.Resized, l.Name) {
			fmt.Fprintf(out, "%s resized to %s\n", l.Name, slotCount(l.Slots))
			continue
		}
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
// built it from one: not a pseudo-version of a commit), then the commit:
// when built from a clone, its VCS stamp (vcs.revision, "+modified" with
// uncommitted changes, and vcs.time), and when go install built a commit
// (…@COMMIT), the commit of its pseudo-version; then the Go version and
// platform. A build from a clone that Go did not stamp (in a go.work
// workspace Go stamps only with -buildvcs=true) says how to stamp it.
func versionLine(bi *debug.BuildInfo) string {
	s := "sleeplock " + Version
	var hint string
	if bi != nil {
		v := bi.Main.Version
		if strings.HasPrefix(v, "v") && !strings.ContainsAny(v, "-+") {
			s = "sleeplock " + v[1:]
		}
		var rev, when string
		var modified bool
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				rev = kv.Value
			case "vcs.modified":
				modified = kv.Value == "true"
			case "vcs.time":
				when = kv.Value
			}
		}
		if m := pseudoVersion.FindStringSubmatch(v); rev == "" && m != nil {
			rev = m[1]
		}
		switch {
		case rev != "":
			s += " (commit " + rev
			if modified {
				s += "+modified"
			}
			if when != "" {
				s += " of " + when
			}
			s += ")"
		case v == "(devel)":
			hint = " (no commit stamped: build with go install -buildvcs=true ./cmd/sleeplock)"
		}
	}
	return s + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + hint
}

// pseudoVersion matches the commit of a module's pseudo-version
// (v0.0.0-20260101000000-0123abcd0123, v0.2.1-0.20260101000000-0123abcd0123).
var pseudoVersion = regexp.MustCompile(`[-.]\d{14}-([0-9a-f]{12})(\+.*)?$`)

// pruneAllOnPurpose is nil when file, a valid config of no locks, says so
// with an explicit list ("locks: []"), and otherwise the error of a file
// that names no locks by mistake (empty, only comments, "locks:" with
// nothing after it): with --prune it would delete every lock.
func pruneAllOnPurpose(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return &sleeplock.ConfigError{File: file, Entry: -1, Err: err}
	}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) == nil && len(doc.Content) == 1 {
		if root := doc.Content[0]; root.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(root.Content); i += 2 {
				if root.Content[i].Value == "locks" && root.Content[i+1].Kind == yaml.SequenceNode {
					return nil
				}
			}
		}
	}
	return &sleeplock.ConfigError{File: file, Entry: -1, Err: errors.New(
		"the file is empty (no YAML document, or no \"locks:\" list): with --prune it would delete every lock; nothing changed. Write \"locks: []\" to prune every lock on purpose")}
}
