//go:build unix

package release_test

import (
	"os"
	"syscall"
	"testing"
)

// lockCache holds an exclusive lock on the file at path until the test
// ends: one release test at a time takes its versions in and out of the
// module cache.
func lockCache(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
}
