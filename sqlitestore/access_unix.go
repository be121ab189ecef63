//go:build unix

package sqlitestore

import (
	"errors"
	"syscall"
)

// mayNotWrite returns the error of a file that exists and that this
// process may not write: its permissions deny it (EACCES) or its file
// system is read-only (EROFS). It asks access(2), which opens nothing:
// closing a descriptor of the database would drop the locks SQLite holds
// on it for this process's other connections. A file that cannot be
// written for another reason (EPERM: immutable) is not reported.
func mayNotWrite(path string) error {
	const wOK = 2 // W_OK
	err := syscall.Access(path, wOK)
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EROFS) {
		return err
	}
	return nil
}

// cannotWrite returns why path, or its WAL, cannot be written now (any
// error of access(2) but a missing file), or nil.
func cannotWrite(path string) error {
	const wOK = 2 // W_OK
	for _, f := range []string{path, path + "-wal"} {
		if err := syscall.Access(f, wOK); err != nil && !errors.Is(err, syscall.ENOENT) {
			return err
		}
	}
	return nil
}
