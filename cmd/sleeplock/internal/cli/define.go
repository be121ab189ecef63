package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"

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
	if err != nil {
		return usagef("SLOTS must be a whole number, got %q", fs.Arg(1))
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
		fmt.Fprintf(out, "%s has %d slots\n", name, slots)
		return nil
	case errors.As(err, &conflict) && *resize:
		if err := locks.Resize(ctx, name, slots); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s resized to %d slots\n", name, slots)
		return nil
	case errors.As(err, &conflict):
		return fmt.Errorf("%w (give --resize to change its slots)", err)
	default:
		return err
	}
}

var _ = register("apply", "define the locks of a YAML config file", runApply)

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
	cfg, err := sleeplock.LoadConfig(fs.Arg(0))
	if err != nil {
		return err
	}
	s, err := sf.open(ctx)
	if err != nil {
		return err
	}
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	if err := locks.Apply(ctx, cfg); err != nil {
		return err
	}
	for _, l := range cfg.Locks {
		fmt.Fprintf(out, "%s has %d slots\n", l.Name, l.Slots)
	}
	return nil
}

var _ = register("version", "print sleeplock's version", runVersion)

func runVersion(_ context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("version", errOut, "")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	fmt.Fprintf(out, "sleeplock %s %s %s/%s\n", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// version is the module version the binary was built from ("go install
// …@v1.2.3"), or "(devel)" for a build from a work tree.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" {
		return "(devel)"
	}
	return bi.Main.Version
}
