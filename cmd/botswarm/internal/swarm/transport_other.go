//go:build !linux

package swarm

// epollTransport exists only on Linux.
type epollTransport struct{ chanTransport }

func newEpollTransport() (*epollTransport, error) { return nil, errUnsupported }

// sharedTransport (recvmmsg/sendmmsg through golang.org/x/net) is built
// for Linux only.
type sharedTransport struct{ chanTransport }

func newSharedTransport(bool) (*sharedTransport, error) { return nil, errUnsupported }
