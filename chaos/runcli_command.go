//go:build linux

package chaos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// cliMarkers is how many marker files a CLI chaos run has: more than
// commands can ever be inside at once (loops), so that one is always free.
const cliMarkers = 128

// CLICommand is what each `sleeplock run` of a CLI chaos run runs
// (chaos/runcmd): it takes a marker, a file of Dir that it holds an
// exclusive flock(2) on, and starts a child that inherits the marker's
// descriptor: the kernel keeps the flock while any process of the
// command's tree that holds it lives, however the tree ends, kill -9
// included. So the markers held are the commands inside, children
// included. Under Dir's mutex (another flock) it takes its marker and
// counts the others held, and appends to Dir's ledger "enter PID INSIDE"
// (INSIDE: itself and the others); its child appends "child PID". It
// holds for a random time up to Hold, waits for its child (which holds
// as long), appends "exit PID" and exits 0.
//
// With Escape (the negative control) the child leaves the command's
// process group (setsid, as a daemon does) and holds for a minute, and
// the command does not wait for it: out of run's reach.
type CLICommand struct {
	Dir    string
	Hold   time.Duration
	Escape bool
}

// Run runs the command.
func (c CLICommand) Run() error {
	mutex, err := lockFile(filepath.Join(c.Dir, "mutex"), syscall.LOCK_EX)
	if err != nil {
		return err
	}
	marker, inside, err := c.enter()
	_ = mutex.Close() // the flock goes with it
	if err != nil {
		return err
	}
	defer func() { _ = marker.Close() }()
	if err := c.log("enter", os.Getpid(), inside); err != nil {
		return err
	}
	hold := c.Hold/4 + rand.N(c.Hold*3/4+1)
	childHold := hold
	if c.Escape {
		childHold = time.Minute
	}
	child := exec.Command(os.Args[0], "-child", "-dir", c.Dir, "-hold", childHold.String())
	child.ExtraFiles = []*os.File{marker} // its fd 3: the tree holds the marker
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: c.Escape}
	if err := child.Start(); err != nil {
		return err
	}
	time.Sleep(hold)
	if !c.Escape {
		if err := child.Wait(); err != nil {
			return fmt.Errorf("the child: %w", err)
		}
	}
	return c.log("exit", os.Getpid(), 0)
}

// Child is the command's child: it appends "child PID" to the ledger,
// holds the marker it inherited for the Hold it was given, and exits.
func (c CLICommand) Child() error {
	if err := c.log("child", os.Getpid(), 0); err != nil {
		return err
	}
	time.Sleep(c.Hold)
	return nil
}

// enter takes the first free marker, then counts the markers that others
// hold (the mutex keeps anyone else from taking one meanwhile, and a
// marker is held from its taking to its tree's end: so every marker
// counted was held, with this one, when the count began).
func (c CLICommand) enter() (*os.File, int, error) {
	var own *os.File
	ownIdx := -1
	for i := range cliMarkers {
		f, err := lockFile(c.marker(i), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			own, ownIdx = f, i
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, 0, err
		}
	}
	if own == nil {
		return nil, 0, fmt.Errorf("all %d markers held", cliMarkers)
	}
	inside := 1
	for i := range cliMarkers {
		if i == ownIdx {
			continue
		}
		f, err := lockFile(c.marker(i), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			_ = f.Close()
		case errors.Is(err, syscall.EWOULDBLOCK):
			inside++
		default:
			_ = own.Close()
			return nil, 0, err
		}
	}
	return own, inside, nil
}

func (c CLICommand) marker(i int) string {
	return filepath.Join(c.Dir, "marker."+strconv.Itoa(i))
}

// log appends "EVENT PID N" to the ledger (O_APPEND: one write, whole).
func (c CLICommand) log(ev string, pid, n int) error {
	f, err := os.OpenFile(filepath.Join(c.Dir, "ledger"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %d %d\n", ev, pid, n)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// lockFile opens (creating) file and takes flock(how) on it; closing the
// file (every descriptor of its description) gives the flock back.
func lockFile(file string, how int) (*os.File, error) {
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}
