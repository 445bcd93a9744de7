package session_test

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/session"
)

func TestNATRebindingKeepsTheConnection(t *testing.T) {
	link := netsim.Config{Latency: 20 * time.Millisecond}
	w := newWorld(t, withLink(link, link), withZone())
	w.connect(time.Second)
	var c2s [][]byte
	w.capture = func(dir string, p []byte) {
		if dir == "c2s" {
			c2s = append(c2s, bytes.Clone(p))
		}
	}
	w.drive(2*time.Second, walking)
	if w.cli.Stats().NoConnection != 0 || w.srv.Stats().Moved != 0 {
		t.Fatal("rebinding machinery ran without a rebinding")
	}
	old := w.from
	w.from = netip.MustParseAddrPort("198.51.100.7:61000") // the NAT picked a new port and address
	for i := 0; i < 10; i++ {
		w.cli.SendEvent(0, payload("c2s", 0, i))
		w.srv.SendEvent(0, payload("s2c", 0, i))
	}
	w.drive(3*time.Second, walking)
	if w.srv.Addr() != w.from {
		t.Fatalf("server still at %v, client at %v", w.srv.Addr(), w.from)
	}
	st := w.srv.Stats()
	if st.Moved != 1 || w.noConnOut == 0 || w.cli.Stats().NoConnection == 0 {
		t.Fatalf("moved %d times, %d NoConnection sent, %d received", st.Moved, w.noConnOut, w.cli.Stats().NoConnection)
	}
	checkOrdered(t, "server", w.srvH.events, "c2s", 1, 10)
	checkOrdered(t, "client", w.cliH.events, "s2c", 1, 10)
	checkMoves(t, w.srvH.moves, 120, 0)
	// Short form again once the server is heard, and routed by the new
	// address: no more NoConnection hints.
	hints := w.cli.Stats().NoConnection
	h0 := w.cli.Stats().HeaderBytesOut
	p0 := w.cli.Stats().DataOut + w.cli.Stats().AckOut
	w.drive(2*time.Second, walking)
	if w.cli.Stats().NoConnection != hints {
		t.Fatalf("NoConnection hints kept coming: %d → %d", hints, w.cli.Stats().NoConnection)
	}
	cs := w.cli.Stats()
	if per := float64(cs.HeaderBytesOut-h0) / float64(cs.DataOut+cs.AckOut-p0); per > 19 {
		t.Fatalf("client still spends %.1f header bytes per packet: not back to the short form", per)
	}
	// An old packet replayed from the old address cannot pull the session back.
	for _, p := range c2s[len(c2s)-20:] {
		if moved, err := w.srv.Receive(w.now, p, old); moved || err == nil {
			t.Fatalf("replay from the old address: moved %v, err %v", moved, err)
		}
	}
	if w.srv.Addr() != w.from {
		t.Fatal("a replayed packet moved the session")
	}
}

// flips returns every single-bit corruption of p.
func flips(p []byte) [][]byte {
	var out [][]byte
	for i := 0; i < 8*len(p); i++ {
		q := bytes.Clone(p)
		q[i/8] ^= 1 << (i % 8)
		out = append(out, q)
	}
	return out
}

func TestReplayedAndBitFlippedPacketsRejected(t *testing.T) {
	link := netsim.Config{Latency: 20 * time.Millisecond}
	w := newWorld(t, withLink(link, link), withZone())
	w.connect(time.Second)
	var c2s, s2c [][]byte
	w.capture = func(dir string, p []byte) {
		if dir == "c2s" {
			c2s = append(c2s, bytes.Clone(p))
		} else {
			s2c = append(s2c, bytes.Clone(p))
		}
	}
	for i := 0; i < 30; i++ {
		w.cli.SendEvent(i%3, payload("c2s", i%3, i/3))
		w.srv.SendEvent(i%3, payload("s2c", i%3, i/3))
		w.drive(100*time.Millisecond, walking)
	}
	w.capture = nil
	w.drive(time.Second, walking)

	// Replays: every packet each end ever sent, again.
	sAcc, cAcc := w.srv.Stats().Accepted, w.cli.Stats().Accepted
	sMoves, sEv, cEv := len(w.srvH.moves), len(w.srvH.events), len(w.cliH.events)
	for _, p := range c2s {
		if _, err := w.srv.Receive(w.now, p, w.from); err == nil {
			t.Fatal("server accepted a replayed packet")
		}
	}
	for _, p := range s2c {
		if err := w.cli.Receive(w.now, p); err == nil {
			t.Fatal("client accepted a replayed packet")
		}
	}
	ss, cs := w.srv.Stats(), w.cli.Stats()
	if ss.Accepted != sAcc || cs.Accepted != cAcc || len(w.srvH.moves) != sMoves ||
		len(w.srvH.events) != sEv || len(w.cliH.events) != cEv {
		t.Fatal("a replay changed state")
	}
	// A recent replay is a duplicate; an old one's truncated sequence number
	// reconstructs to a sequence it was not sealed under, so the tag fails.
	// Either way each is counted once.
	if ss.Rejected() != uint64(len(c2s)) || cs.Rejected() != uint64(len(s2c)) || ss.Replayed == 0 || cs.Replayed == 0 {
		t.Fatalf("replays counted %d/%d (server: %+v), %d/%d (client)", ss.Rejected(), len(c2s), ss.Counters, cs.Rejected(), len(s2c))
	}

	// Bit flips: hold the next packets of each end back, offer every
	// single-bit corruption of them first, then the original.
	for round := 0; round < 3; round++ {
		w.cli.SendEvent(0, payload("c2s", 0, 10+round))
		w.srv.SendEvent(0, payload("s2c", 0, 10+round))
		var heldC, heldS [][]byte
		w.capture = func(dir string, p []byte) {
			if dir == "c2s" {
				heldC = append(heldC, bytes.Clone(p))
			} else {
				heldS = append(heldS, bytes.Clone(p))
			}
		}
		dead := netsim.Config{Loss: 1}
		w.pipe.AtoB.SetConfig(dead)
		w.pipe.BtoA.SetConfig(dead)
		w.step(50 * time.Millisecond)
		w.capture = nil
		w.pipe.AtoB.SetConfig(link)
		w.pipe.BtoA.SetConfig(link)
		if len(heldC) == 0 || len(heldS) == 0 {
			t.Fatalf("round %d: nothing held (%d, %d)", round, len(heldC), len(heldS))
		}
		before := w.srv.Stats()
		cBefore := w.cli.Stats()
		n := 0
		for _, p := range heldC {
			for _, q := range flips(p) {
				n++
				if _, err := w.srv.Receive(w.now, q, w.from); err == nil {
					t.Fatalf("server accepted a bit-flipped packet")
				}
			}
		}
		for _, p := range heldS {
			for _, q := range flips(p) {
				if err := w.cli.Receive(w.now, q); err == nil {
					t.Fatalf("client accepted a bit-flipped packet")
				}
			}
		}
		after, cAfter := w.srv.Stats(), w.cli.Stats()
		if after.Accepted != before.Accepted || after.Rejected()-before.Rejected() != uint64(n) {
			t.Fatalf("%d flips: accepted %d, rejected %d", n, after.Accepted-before.Accepted, after.Rejected()-before.Rejected())
		}
		if cAfter.Accepted != cBefore.Accepted {
			t.Fatal("client state moved on a flipped packet")
		}
		// The originals still work: nothing was disturbed.
		for _, p := range heldC {
			if _, err := w.srv.Receive(w.now, p, w.from); err != nil {
				t.Fatalf("round %d: genuine packet refused after the flips: %v", round, err)
			}
		}
		for _, p := range heldS {
			if err := w.cli.Receive(w.now, p); err != nil {
				t.Fatalf("round %d: genuine packet refused after the flips: %v", round, err)
			}
		}
	}
	w.drive(time.Second, walking)
	checkOrdered(t, "server", w.srvH.events[:30], "c2s", 3, 10)
	checkOrdered(t, "client", w.cliH.events[:30], "s2c", 3, 10)
	if got := len(w.srvH.events); got != 33 {
		t.Fatalf("server got %d events, want 33", got)
	}
	checkMoves(t, w.srvH.moves, 100, 0)
	if w.cli.State() != handshake.StateConnected || w.srv.State() != handshake.StateConnected {
		t.Fatal("hostile packets broke the connection")
	}
}

func TestGarbageAndForeignPacketsCounted(t *testing.T) {
	w := newWorld(t)
	w.connect(time.Second)
	cases := []struct {
		name string
		pkt  []byte
		err  error
	}{
		{"empty", nil, handshake.ErrGarbage},
		{"short", []byte{0x00, 1, 2}, handshake.ErrGarbage},
		{"connect request", append([]byte{0x07}, make([]byte, 1199)...), handshake.ErrUnexpected},
		{"routed to another connection", append(append([]byte{0x23}, bytes.Repeat([]byte{9}, 8)...), make([]byte, 20)...), handshake.ErrWrongConn},
		{"forged data", append([]byte{0x00}, make([]byte, 40)...), nil},
	}
	for _, tc := range cases {
		_, err := w.srv.Receive(w.now, tc.pkt, w.from)
		if err == nil || (tc.err != nil && !errors.Is(err, tc.err)) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	st := w.srv.Stats()
	if st.Rejected() != uint64(len(cases)) || st.WrongConn != 1 || st.Unexpected != 1 {
		t.Fatalf("counters %+v", st.Counters)
	}
	if w.srv.State() != handshake.StateConnected {
		t.Fatal("garbage changed the state")
	}
	_ = session.ErrClosed
}

// TestLatePacketsWithinNotifyHorizonAccepted: the replay window
// (handshake.ReplayWindowSize) never refuses a packet notify would accept.
// With the largest reorder threshold notify allows (K = 32), packets held
// back and delivered newest first are accepted down to K−1 below the
// newest; the next older one is refused by notify (its horizon), not by
// the replay window, which must reach at least that far.
func TestLatePacketsWithinNotifyHorizonAccepted(t *testing.T) {
	const k = notify.MaxReorderThreshold
	w := newWorld(t, withZone(), withServerConfig(func(c *session.ServerConfig) { c.Notify.ReorderThreshold = k }))
	w.connect(time.Second)
	w.drive(200*time.Millisecond, walking)
	var held [][]byte
	w.capture = func(dir string, p []byte) {
		if dir == "c2s" {
			held = append(held, bytes.Clone(p))
		}
	}
	dead := netsim.Config{Loss: 1}
	w.pipe.AtoB.SetConfig(dead)
	for len(held) < k+1 {
		w.drive(10*time.Millisecond, walking)
	}
	w.capture = nil
	n := len(held)
	acc := w.srv.Stats().Accepted
	for i := n - 1; i >= n-k; i-- { // the newest, then each older one down to newest − (K−1)
		if _, err := w.srv.Receive(w.now, held[i], w.from); err != nil {
			t.Fatalf("packet %d below the newest refused: %v", n-1-i, err)
		}
	}
	if got := w.srv.Stats().Accepted - acc; got != k {
		t.Fatalf("accepted %d of %d late packets", got, k)
	}
	_, err := w.srv.Receive(w.now, held[n-k-1], w.from)
	if !errors.Is(err, notify.ErrStale) || errors.Is(err, handshake.ErrStale) {
		t.Fatalf("packet K below the newest: got %v, want notify's ErrStale (its horizon)", err)
	}
}
