package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sleeplock/sleeplock"
)

var _ = register("delete", "delete a lock (or a family NAME/* with its members)", runDelete)

func init() {
	extraHelp["delete"] = `A lock that is held or waited for is refused (status 1, nothing deleted),
with how many hold and wait: release them first (sleeplock release), or
give --force, which ends the holds as released by another (a sleeplock
run holding one ends its command and exits 122, the lost status) and
makes the waiters return "no lock". It prints what it ended.

A family NAME/* goes with its members in use; a member alone (chat/42) is
not a definition and cannot be deleted: delete its family, or release it.
A lock defined again later grants fencing tokens above every one it
granted before. A name that starts with "-" goes after "--":

  sleeplock delete -- -n
`
}

func runDelete(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flags("delete", errOut, "[flags] NAME")
	sf := addStoreFlags(fs, errOut)
	force := fs.Bool("force", false, "delete a lock in use: end its holds (lost to their holders) and its waiters")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("give one lock NAME, got %q", fs.Args())
	}
	name := fs.Arg(0)
	s, err := sf.open(ctx)
	if err != nil {
		return err
	}
	locks := sleeplock.New(s)
	defer func() { _ = locks.Close() }()
	var opts []sleeplock.DeleteOption
	if *force {
		opts = append(opts, sleeplock.Force())
	}
	d, err := locks.Delete(ctx, name, opts...)
	var inUse *sleeplock.InUseError
	switch {
	case errors.As(err, &inUse):
		return &cliError{fmt.Sprintf("lock %q is in use (%s, %s): nothing deleted; release them, or give --force to end them",
			inUse.Lock, count(inUse.Holders, "holder"), count(inUse.Waiters, "waiter")), err}
	case errors.Is(err, sleeplock.ErrNotFound):
		return &cliError{fmt.Sprintf("no lock %q to delete (a family member goes with its family NAME/*; see sleeplock state)", name), err}
	case err != nil:
		return err
	}
	if *force {
		fmt.Fprintf(out, "deleted %s: ended %s and %s\n", name, count(d.Holds, "hold"), count(d.Waiters, "waiter"))
		return nil
	}
	fmt.Fprintf(out, "deleted %s\n", name)
	return nil
}

// count is "1 hold", "2 holds".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
