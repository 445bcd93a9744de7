package session_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/session"
)

// forgetful runs the client alone for up to d against a server that no
// longer knows it (restarted, or the session dropped): every datagram the
// client sends is answered with NoConnection, as a gateway answers data for
// no connection. It returns how long the client stayed open.
func (w *world) forgetful(d time.Duration) time.Duration {
	w.t.Helper()
	start := w.now
	for end := w.now + d; w.now < end && w.cli.State() != handshake.StateClosed; {
		w.now += 5 * time.Millisecond
		var replies [][]byte
		for out, _ := w.cli.Poll(w.now, w.buf[:0]); len(out) > 0; out, _ = w.cli.Poll(w.now, w.buf[:0]) {
			if r, err := handshake.AppendNoConnection(nil, out); err == nil {
				replies = append(replies, r)
			}
		}
		for _, r := range replies {
			w.cli.Receive(w.now, r)
		}
		if dl := w.cli.NextDeadline(w.now); w.cli.State() != handshake.StateClosed && dl <= w.now {
			w.t.Fatalf("client at %v: NextDeadline %v not in the future", w.now, dl)
		}
	}
	return w.now - start
}

// TestForgottenConnectionClosesEarly: a client whose server answers only
// NoConnection naming its connection (the hints to its long form) closes
// after ForgottenAfter with ErrForgotten — an ErrTimeout, so whoever
// reconnects on a timeout reconnects — instead of waiting out its Timeout
// (60 s here) for a server that will never answer.
func TestForgottenConnectionClosesEarly(t *testing.T) {
	link := netsim.Config{Latency: 20 * time.Millisecond}
	long := withToken(func(p *handshake.TokenParams) { p.Timeout = 60 * time.Second })
	w := newWorld(t, withLink(link, link), long)
	w.connect(time.Second)
	w.drive(time.Second, walking)
	open := w.forgetful(20 * time.Second)
	err := w.cli.Err()
	if w.cli.State() != handshake.StateClosed || !errors.Is(err, session.ErrForgotten) || !errors.Is(err, session.ErrTimeout) {
		t.Fatalf("after %v of NoConnection: client %v (%v), want closed with ErrForgotten", open, w.cli.State(), err)
	}
	// The first hint answers a short-form packet (no id): it turns the
	// long form on, and the next one's hint names the connection.
	if want := session.DefaultForgottenAfter; open < want || open > want+500*time.Millisecond {
		t.Fatalf("closed %v after the server forgot it, want %v and a packet or two", open, want)
	}

	// ForgottenAfter 0: hints stay hints, the Timeout decides.
	w = newWorld(t, withLink(link, link), long, withClientConfig(func(c *session.ClientConfig) { c.ForgottenAfter = 0 }))
	w.connect(time.Second)
	w.drive(time.Second, walking)
	if open := w.forgetful(10 * time.Second); w.cli.State() != handshake.StateConnected {
		t.Fatalf("ForgottenAfter 0: client %v (%v) after %v of hints", w.cli.State(), w.cli.Err(), open)
	}
}

// TestHintsWhileTheServerAnswersCloseNothing: NoConnection hints — naming
// no connection (anyone who knows the client's address can send them) or
// naming this one (an on-path forger) — do not close a session whose server
// still answers: each authenticated packet starts the count again. Nor do
// hints naming no connection close one whose server went silent.
func TestHintsWhileTheServerAnswersCloseNothing(t *testing.T) {
	link := netsim.Config{Latency: 20 * time.Millisecond}
	w := newWorld(t, withLink(link, link))
	w.connect(time.Second)
	var named []byte
	w.capture = func(dir string, p []byte) {
		if k, _ := handshake.Classify(p); dir == "c2s" && k == handshake.KindRouted && named == nil {
			named, _ = handshake.AppendNoConnection(nil, p)
		}
	}
	anon, err := handshake.AppendNoConnection(nil, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ { // 10 s of hints, both kinds, every 100 ms
		w.drive(100*time.Millisecond, walking)
		w.cli.Receive(w.now, anon)
		if named != nil {
			w.cli.Receive(w.now, named)
		}
	}
	if named == nil {
		t.Fatal("the client never sent the long form (the hints turn it on)")
	}
	if w.cli.State() != handshake.StateConnected {
		t.Fatalf("after 10 s of hints with the server answering: client %v (%v)", w.cli.State(), w.cli.Err())
	}
	if n := w.cli.Stats().NoConnection; n < 100 {
		t.Fatalf("%d hints counted, want at least 100", n)
	}

	// A link down (nothing heard) and hints naming no connection, which an
	// off-path sender can forge: the Timeout decides, not the hints.
	w = newWorld(t, withLink(link, link), withToken(func(p *handshake.TokenParams) { p.Timeout = 60 * time.Second }))
	w.connect(time.Second)
	dead := netsim.Config{Loss: 1}
	w.pipe.AtoB.SetConfig(dead)
	w.pipe.BtoA.SetConfig(dead)
	for i := 0; i < 50; i++ {
		w.drive(100*time.Millisecond, walking)
		w.cli.Receive(w.now, anon)
	}
	if w.cli.State() != handshake.StateConnected {
		t.Fatalf("link down 5 s with anonymous hints: client %v (%v), want it waiting for its Timeout", w.cli.State(), w.cli.Err())
	}
}
