//go:build !amd64

package conn

// prefetchRange is a no-op where there is no prefetch instruction in
// prefetch_amd64.s: the addresses are hints, nothing depends on them.
func prefetchRange(p, n uintptr) {}
