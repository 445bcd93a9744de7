//go:build unix

package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// dataLockFile is the lock a zoned with an embedded NATS holds in its data
// dir for its life.
const dataLockFile = "zoned.lock"

// lockDataDir takes the data dir for this process: two embedded
// nats-servers writing one JetStream store corrupt it (each rewrites the
// other's blocks), and nothing in nats-server stops the second. The lock
// is an flock, so a killed zoned leaves none behind; the file names the
// holder's pid for the error.
func lockDataDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o750); err != nil { // as Start makes it
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, dataLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil && len(b) > 0 {
			holder = strings.TrimSpace(string(b))
		}
		f.Close()
		return func() {}, lockError(err, dir, holder)
	}
	// The pid is for a person reading the error; the lock is the flock.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}

// lockError is what a failed flock of dir's lock means: another zoned holds
// it (holder: the pid it wrote), the file system cannot lock
// (errLockUnsupported), or something else.
func lockError(err error, dir, holder string) error {
	switch {
	case errors.Is(err, unix.EWOULDBLOCK):
		if holder != "" {
			holder = " (pid " + holder + ")"
		}
		return fmt.Errorf("data dir %s is in use by another zoned%s: its embedded NATS store cannot be shared; give each zoned its own --data", dir, holder)
	case errors.Is(err, unix.ENOLCK), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOTSUP):
		return fmt.Errorf("%w (%s: %v): run one zoned on it at a time", errLockUnsupported, dir, err)
	}
	return fmt.Errorf("data dir lock in %s: %w", dir, err)
}
