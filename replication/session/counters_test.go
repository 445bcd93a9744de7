package session_test

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/session"
)

// TestPacketsOutCountsEveryDatagram: PacketsOut is the sum of the kinds
// (data, ack-only, Disconnect, Redirect, a client's connect requests), not a
// counter of its own; each end's must equal the datagrams its Polls
// returned, through a connect, play, a Redirect and the client's
// Disconnect that acknowledges it.
func TestPacketsOutCountsEveryDatagram(t *testing.T) {
	w := newWorld(t, withZone())
	sent := map[string]uint64{}
	w.capture = func(dir string, _ []byte) { sent[dir]++ }
	w.connect(5 * time.Second)
	w.drive(2*time.Second, walking)
	if err := w.srv.Redirect(w.now, targetAddr, redirectToken(t, 5)); err != nil {
		t.Fatal(err)
	}
	w.drive(session.DefaultRedirectTimeout+500*time.Millisecond, walking)
	cs, ss := w.cli.Stats(), w.srv.Stats()
	if cs.Requests == 0 || cs.DataOut == 0 || cs.AckOut == 0 || cs.DisconnectOut == 0 {
		t.Fatalf("client sent no request, data, ack-only or Disconnect: %+v", cs.Counters)
	}
	if ss.DataOut == 0 || ss.AckOut == 0 || ss.RedirectOut == 0 {
		t.Fatalf("server sent no data, ack-only or Redirect: %+v", ss.Counters)
	}
	if cs.PacketsOut != sent["c2s"] {
		t.Errorf("client PacketsOut %d, its Polls returned %d datagrams", cs.PacketsOut, sent["c2s"])
	}
	if ss.PacketsOut != sent["s2c"] {
		t.Errorf("server PacketsOut %d, its Polls returned %d datagrams", ss.PacketsOut, sent["s2c"])
	}
}
