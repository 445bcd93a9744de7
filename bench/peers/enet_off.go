//go:build !enet

package main

import "errors"

// Built without the enet tag (`make peers` adds it when pkg-config finds
// libenet): the ENet rows are reported as not run.
const enetAvailable = false

var errNoENet = errors.New("not built with -tags enet (needs cgo and Debian's libenet-dev: apt-get install -y libenet-dev)")

func startENet(serveOpts) (server, error)          { return nil, errNoENet }
func newENetClients(clientOpts) (clientSet, error) { return nil, errNoENet }
