package session_test

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/netsim"
)

// TestTailLossRecovers loses the only packet carrying an event on an idle
// connection: nothing else is sent for a while, so the loss must be found by
// the keepalives and acks alone, and the event resent promptly.
func TestTailLossRecovers(t *testing.T) {
	link := netsim.Config{Latency: 30 * time.Millisecond}
	dead := netsim.Config{Loss: 1, Latency: 30 * time.Millisecond}
	for _, dir := range []string{"c2s", "s2c"} {
		t.Run(dir, func(t *testing.T) {
			w := newWorld(t, withLink(link, link))
			w.connect(time.Second)
			w.run(3*time.Second, 5*time.Millisecond) // idle
			if dir == "c2s" {
				w.cli.SendEvent(0, payload("c2s", 0, 0))
				w.pipe.AtoB.SetConfig(dead)
			} else {
				w.srv.SendEvent(0, payload("s2c", 0, 0))
				w.pipe.BtoA.SetConfig(dead)
			}
			w.step(5 * time.Millisecond)
			w.pipe.AtoB.SetConfig(link)
			w.pipe.BtoA.SetConfig(link)
			start := w.now
			for w.now-start < 10*time.Second && len(w.srvH.events)+len(w.cliH.events) == 0 {
				w.step(5 * time.Millisecond)
			}
			took := w.now - start
			if len(w.srvH.events)+len(w.cliH.events) != 1 {
				t.Fatalf("event lost for good (cli %+v srv %+v)", w.cli.Stats().EventsSent, w.srv.Stats().EventsSent)
			}
			t.Logf("recovered after %v", took)
			if took > 500*time.Millisecond {
				t.Fatalf("tail loss took %v to repair, want ≤ 500 ms (a few RTTs)", took)
			}
		})
	}
}
