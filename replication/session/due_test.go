package session_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/session"
)

// TestDueWhenPollSends: Server.Due never says false at an instant Poll
// then sends a packet at. The world harness checks Due before every
// server Poll; this drives it through every path Poll sends on, at random
// instants: play with loss, reordering and events both ways and a zone's
// ticks; keepalives due before the send slot (a slot of a second, a
// keepalive of 200 ms); a client gone silent while the server has events
// to send, until the server times out between two slots and sends its
// Disconnect copies.
func TestDueWhenPollSends(t *testing.T) {
	tests := []struct {
		name string
		cfg  func(*session.ServerConfig)
	}{
		{name: "defaults", cfg: func(*session.ServerConfig) {}},
		{name: "keepalive inside the send slot", cfg: func(c *session.ServerConfig) {
			c.SendRate, c.KeepAlive = 1, 200*time.Millisecond
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(3) {
				link := netsim.Config{Loss: 0.15, Latency: 20 * time.Millisecond, Jitter: 10 * time.Millisecond,
					Reorder: 0.05, ReorderDelay: 30 * time.Millisecond}
				w := newWorld(t, withSeed(seed+1), withZone(), withLink(link, link))
				tc.cfg(&w.scfg)
				w.connect(5 * time.Second)
				rng := rand.New(seeded(seed + 50))
				for i := range 600 {
					if i%9 == 0 {
						w.cli.SendEvent(0, payload("c2s", 0, i))
					}
					if i%13 == 0 {
						w.srv.SendEvent(1, payload("s2c", 1, i))
					}
					w.step(time.Duration(1+rng.IntN(40)) * time.Millisecond)
				}
				for end := w.now + 3*time.Second; w.now < end; { // idle: keepalives
					w.step(time.Duration(1+rng.IntN(100)) * time.Millisecond)
				}
				// The client goes silent; the server keeps sending events
				// until it times out.
				for end := w.now + 15*time.Second; w.now < end && w.srv.State() != handshake.StateClosed; {
					if rng.IntN(20) == 0 {
						w.srv.SendEvent(1, payload("s2c", 1, 0))
					}
					w.now += time.Millisecond
					w.serverToClient()
				}
				if w.srv.State() != handshake.StateClosed {
					t.Fatalf("seed %d: server %v after the client went silent, want closed", seed, w.srv.State())
				}
			}
		})
	}
}
