package node

import "errors"

// errLockUnsupported: the data dir's file system has no flock (some network
// file systems answer ENOLCK or EOPNOTSUPP). zoned then runs without the
// lock (lockDataDir), saying so, rather than not at all.
var errLockUnsupported = errors.New("the data dir's file system does not support locks")
