package main

import "testing"

// freePort's ports lie below the kernel's ephemeral range, which a node's
// port must stay clear of while the node is down (a bot's new socket took
// one in CI), and bind.
func TestFreePortBelowEphemeralRange(t *testing.T) {
	lo := ephemeralLow()
	for _, network := range []string{"udp", "tcp"} {
		if lo-10000 <= 1000 { // no room below the range here: the kernel's port
			if p, err := freePort(network); err != nil || !portFree(network, p) {
				t.Fatalf("%s: the fallback's port %d (%v) does not bind", network, p, err)
			}
			continue
		}
		for range 20 {
			p, err := freePort(network)
			if err != nil {
				t.Fatal(err)
			}
			if p < 10000 || p >= lo {
				t.Fatalf("%s port %d: want one in [10000, %d)", network, p, lo)
			}
			if !portFree(network, p) {
				t.Fatalf("%s port %d does not bind", network, p)
			}
		}
	}
}
