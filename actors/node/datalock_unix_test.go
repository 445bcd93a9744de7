//go:build unix

package node

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A held lock names its holder; a file system without locks is
// errLockUnsupported (zoned warns and runs); anything else is an error of
// its own, not taken for either.
func TestLockError(t *testing.T) {
	held := lockError(unix.EWOULDBLOCK, "/d", "42")
	if errors.Is(held, errLockUnsupported) || !strings.Contains(held.Error(), "in use by another zoned (pid 42)") {
		t.Errorf("EWOULDBLOCK: %v", held)
	}
	if e := lockError(unix.EWOULDBLOCK, "/d", ""); strings.Contains(e.Error(), "pid") {
		t.Errorf("EWOULDBLOCK without a pid in the file: %v", e)
	}
	for _, errno := range []unix.Errno{unix.ENOLCK, unix.EOPNOTSUPP, unix.ENOTSUP} {
		if e := lockError(errno, "/d", ""); !errors.Is(e, errLockUnsupported) {
			t.Errorf("%v: %v, want errLockUnsupported", errno, e)
		}
	}
	if e := lockError(unix.EBADF, "/d", ""); errors.Is(e, errLockUnsupported) || strings.Contains(e.Error(), "in use") || !errors.Is(e, unix.EBADF) {
		t.Errorf("EBADF: %v", e)
	}
}
