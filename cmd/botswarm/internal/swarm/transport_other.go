//go:build !linux

package swarm

// epollTransport exists only on Linux.
type epollTransport struct{ chanTransport }

func newEpollTransport() (*epollTransport, error) { return nil, errUnsupported }
