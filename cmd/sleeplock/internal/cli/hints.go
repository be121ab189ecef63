package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sleeplock/sleeplock"
)

// sharedHint explains why run --shared was refused or waits on a lock of
// one slot, which readers cannot share (flock's shared lock has no such
// limit): such a lock was made by a run without --shared or by define.
// "" when slots is not 1.
func sharedHint(name string, slots int) string {
	if slots != 1 {
		return ""
	}
	return fmt.Sprintf("lock %q has 1 slot, so readers cannot share it (it was defined with 1, by define or by a run "+
		"without --shared); give it room for readers: sleeplock define %s %d --resize",
		name, shellQuote(name), sharedSlots)
}

// refusedSharedHint is sharedHint for the refusal err of a --shared run.
func refusedSharedHint(name string, err error) string {
	var b *sleeplock.BusyError
	if !errors.As(err, &b) {
		return ""
	}
	return sharedHint(name, b.Slots)
}

// shellSafe reports whether r needs no quoting in a POSIX shell word.
func shellSafe(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-:", r)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !shellSafe(r) {
			safe = false
			break
		}
	}
	if safe && s[0] != '-' {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
