package session_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/session"
)

// pauseServer runs the client alone for d, as while the server's process
// is stopped (SIGSTOP, a VM's pause, a long GC): the client keeps sampling
// input and sending, and every datagram it sends is lost (a stopped
// process's socket buffer fills and the kernel drops the rest).
func (w *world) pauseServer(d time.Duration, input func(int) int) {
	w.t.Helper()
	for end := w.now + d; w.now < end; {
		w.now += 5 * time.Millisecond
		for out, _ := w.cli.Poll(w.now, w.buf[:0]); len(out) > 0; out, _ = w.cli.Poll(w.now, w.buf[:0]) {
		}
		for w.cli.InputDue(w.now) {
			if _, err := w.cli.Input(walking(input(int(w.cli.Stats().Predictor.Predicted)))); err != nil {
				w.t.Fatal(err)
			}
		}
	}
}

// TestPausedServerResumesItsLinks: a server stopped for 17 s (twice the
// notify window at the client's 30 Hz) while its client keeps sending takes
// the client's first packet after the pause — authenticated, far past the
// window (notify's AcceptFar) — and the link carries on: every move and
// event sent before, during and after the pause arrives once, in order.
// Without AcceptFar every packet after the pause was refused (ErrTooFar)
// until the idle timeout closed the session.
func TestPausedServerResumesItsLinks(t *testing.T) {
	link := netsim.Config{Latency: 20 * time.Millisecond}
	w := newWorld(t, withLink(link, link), withZone(), withToken(func(p *handshake.TokenParams) {
		p.Timeout = 60 * time.Second // longer than the pause: the session must not time out
	}))
	w.connect(time.Second)
	same := func(i int) int { return i }
	for i := 0; i < 30; i++ {
		if i == 10 {
			w.drive(2*time.Second, walking)
			w.pauseServer(17*time.Second, same)
			w.forgeFar()
		}
		if err := w.cli.SendEvent(0, payload("c2s", 0, i)); err != nil {
			t.Fatal(err)
		}
		if err := w.srv.SendEvent(0, payload("s2c", 0, i)); err != nil {
			t.Fatal(err)
		}
		if i > 10 {
			w.drive(100*time.Millisecond, walking)
		}
	}
	w.drive(3*time.Second, walking)
	w.run(2*time.Second, 5*time.Millisecond)
	if w.cli.State() != handshake.StateConnected || w.srv.State() != handshake.StateConnected {
		t.Fatalf("after the pause: client %v (%v), server %v (%v)", w.cli.State(), w.cli.Err(), w.srv.State(), w.srv.Reason())
	}
	ns := w.srv.Stats().Notify
	if ns.FarAccepted != 1 || ns.TooFar != 0 {
		t.Fatalf("server notify: FarAccepted %d, TooFar %d; want 1, 0 (the pause is %d packets, the window %d)",
			ns.FarAccepted, ns.TooFar, 17*30, notify.DefaultAckWindow)
	}
	checkOrdered(t, "server", w.srvH.events, "c2s", 1, 30)
	checkOrdered(t, "client", w.cliH.events, "s2c", 1, 30)
	checkMoves(t, w.srvH.moves, 200, 0) // ≈ 7 s of input at 30 Hz: the client holds input while its move window is full
	if lost := w.srv.Stats().Moves.Lost; lost != 0 {
		t.Fatalf("server counted %d moves lost", lost)
	}
	last := w.srvH.moves[len(w.srvH.moves)-1].Seq
	if w.cli.LastAck() != last || last != w.cli.Stats().Moves.Added || w.cli.Control() != w.z.state {
		t.Fatalf("not recovered: client acked %d, server applied up to %d, client sampled %d",
			w.cli.LastAck(), last, w.cli.Stats().Moves.Added)
	}
}

// forgeFar takes the client's next packet after a pause and offers the
// server a copy with its sequence moved far ahead first: notify lets it
// through to the AEAD (AcceptFar), whose tag fails under that nonce, so it
// commits nothing; then the genuine packet goes on its way.
func (w *world) forgeFar() {
	t := w.t
	t.Helper()
	var p []byte
	var err error
	for end := w.now + time.Second; len(p) == 0 && err == nil && w.now < end; {
		w.now += 5 * time.Millisecond
		p, err = w.cli.Poll(w.now, w.buf[:0])
	}
	if err != nil || len(p) < 3 {
		t.Fatalf("client's first packet after the pause: %d bytes, %v", len(p), err)
	}
	p = bytes.Clone(p)
	// A client that has not heard from its server for a while sends the
	// long form (it may have been rebound): the header follows the prefix.
	h := p
	if k, _ := handshake.Classify(p); k == handshake.KindRouted {
		h = p[session.RoutedPrefixSize:]
	}
	// The header's first bits (LSB first): type (2), width code (2: 1,0 is
	// the 16-bit form, which a sender a pause ahead of its acks uses),
	// the sequence's low 16 bits.
	if h[0]>>2&3 != 1 {
		t.Fatalf("first packet after the pause uses width code %d, want the 16-bit form", h[0]>>2&3)
	}
	seq := uint16(h[0]>>4) | uint16(h[1])<<4 | uint16(h[2]&0xf)<<12
	bit := 14
	for ; bit >= 9 && seq>>bit&1 == 1; bit-- {
	}
	if bit < 9 {
		t.Fatalf("sequence %#x: no clear bit to move it ahead by a window or more", seq)
	}
	forged := bytes.Clone(p)
	forged[len(p)-len(h)+(4+bit)/8] ^= 1 << ((4 + bit) % 8)
	before := w.srv.Stats()
	if _, err := w.srv.Receive(w.now, forged, w.from); err == nil {
		t.Fatal("server accepted a forged far sequence")
	}
	after := w.srv.Stats()
	// Refused by its tag (AuthFailed), not by notify: the path a far
	// packet takes.
	if after.Notify.FarAccepted != before.Notify.FarAccepted || after.Accepted != before.Accepted ||
		after.Rejected() != before.Rejected()+1 || after.AuthFailed != before.AuthFailed+1 {
		t.Fatalf("forged far sequence: FarAccepted %d→%d, accepted %d→%d, rejected %d→%d, auth failed %d→%d; want one rejection by the tag",
			before.Notify.FarAccepted, after.Notify.FarAccepted, before.Accepted, after.Accepted,
			before.Rejected(), after.Rejected(), before.AuthFailed, after.AuthFailed)
	}
	w.pipe.AtoB.Send(w.now, p)
}
