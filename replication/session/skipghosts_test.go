package session_test

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/session"
)

// TestSkipGhostsLeavesTheMirrorEmpty: a client with SkipGhosts gets the
// same packets (moves acknowledged, events delivered) but decodes no ghost:
// its mirror stays empty while the zone's table sees every packet
// delivered, so the server cannot tell.
func TestSkipGhostsLeavesTheMirrorEmpty(t *testing.T) {
	reg := session.DefaultRegistry()
	w := newWorld(t, withClientConfig(func(c *session.ClientConfig) { c.Registry = reg; c.SkipGhosts = true }))
	z := newGhostZone(t, reg, 20)
	w.ghosts = z.tab
	w.onGhostFate = z.tab.OnFate
	w.connect(5 * time.Second)
	if err := w.srv.SendEvent(0, []byte("still here")); err != nil {
		t.Fatal(err)
	}
	for w.now < 5*time.Second {
		z.tick(t, w.now)
		w.step(5 * time.Millisecond)
	}
	if n := w.cli.Mirror().Len(); n != 0 {
		t.Fatalf("mirror holds %d ghosts with SkipGhosts", n)
	}
	if len(w.cliH.events) != 1 || string(w.cliH.events[0].Payload) != "still here" {
		t.Fatalf("events: %v", w.cliH.events)
	}
	if w.cli.Stats().Counters.PacketsIn == 0 || z.tab.Stats().Creates == 0 {
		t.Fatalf("no traffic: client %+v, table %+v", w.cli.Stats().Counters, z.tab.Stats())
	}
}
