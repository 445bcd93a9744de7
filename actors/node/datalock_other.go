//go:build !unix

package node

// lockDataDir does not lock where flock is missing: run one zoned per data
// dir there (see datalock_unix.go for why it matters).
func lockDataDir(string) (func(), error) { return func() {}, nil }
