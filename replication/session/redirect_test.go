package session_test

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/session"
)

var targetAddr = netip.MustParseAddrPort("10.0.0.2:7777")

// redirectToken mints the token a gateway would: same player, the target
// only, 30 s.
func redirectToken(t *testing.T, seed uint64) []byte {
	t.Helper()
	var key [handshake.KeySize]byte
	seeded(seed).Read(key[:])
	tok, err := handshake.IssueToken(key, handshake.TokenParams{
		PlayerID: 42, ProtocolID: protoID, Expiry: 30 * time.Second, Timeout: 10 * time.Second,
		ServerAddrs: []netip.AddrPort{targetAddr},
	}, t0, seeded(seed+1))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestRedirectArrivesDespiteLoss: at 30 % loss each way the client takes
// the Redirect (copies resent until acknowledged) and acknowledges it with
// its Disconnect; the server closes with ReasonRedirected, or — when every
// acknowledgement was lost — with ServerShutdown after RedirectTimeout,
// which the client, already gone, never needs.
func TestRedirectArrivesDespiteLoss(t *testing.T) {
	lossy := netsim.Config{Loss: 0.3, Latency: 50 * time.Millisecond, Jitter: 10 * time.Millisecond}
	acked := 0
	for seed := uint64(1); seed <= 20; seed++ {
		w := newWorld(t, withLink(lossy, lossy), withSeed(seed), withZone())
		w.connect(5 * time.Second)
		w.drive(500*time.Millisecond, walking)
		tok := redirectToken(t, seed)
		if err := w.srv.Redirect(w.now, targetAddr, tok); err != nil {
			t.Fatal(err)
		}
		if !w.srv.Redirecting() {
			t.Fatal("not redirecting")
		}
		if err := w.srv.Redirect(w.now, targetAddr, tok); !errors.Is(err, session.ErrClosed) {
			t.Fatalf("second Redirect: %v", err)
		}
		w.drive(session.DefaultRedirectTimeout+500*time.Millisecond, walking)
		r, ok := w.cli.Redirect()
		if !ok || r.Server != targetAddr || !bytes.Equal(r.Token, tok) {
			t.Fatalf("seed %d: client %v err %v: no redirect taken", seed, w.cli.State(), w.cli.Err())
		}
		var re *session.RedirectError
		if w.cli.State() != handshake.StateClosed || !errors.As(w.cli.Err(), &re) || w.cli.Stats().Redirected != 1 {
			t.Fatalf("seed %d: client %v %v", seed, w.cli.State(), w.cli.Err())
		}
		if n := w.cli.Stats().DisconnectOut; n != session.DefaultDisconnectCopies {
			t.Fatalf("seed %d: %d acknowledgement copies", seed, n)
		}
		if !w.srv.Done() {
			t.Fatalf("seed %d: server %v not done", seed, w.srv.State())
		}
		switch w.srv.Reason() {
		case handshake.ReasonRedirected:
			acked++
		case handshake.ReasonServerShutdown:
		default:
			t.Fatalf("seed %d: server closed with %v", seed, w.srv.Reason())
		}
		// Copies stop with the acknowledgement: at most one per interval.
		if n := w.srv.Stats().RedirectOut; n == 0 || n > uint64(session.DefaultRedirectTimeout/session.DefaultRedirectInterval)+1 {
			t.Fatalf("seed %d: %d Redirect copies", seed, n)
		}
	}
	if acked < 18 {
		t.Fatalf("only %d of 20 redirects acknowledged", acked)
	}
}

// TestRedirectOldClientGetsServerShutdown: a client that does not know the
// Redirect (it drops the packet as garbage) is disconnected cleanly with
// ServerShutdown after RedirectTimeout, as before redirects existed.
func TestRedirectOldClientGetsServerShutdown(t *testing.T) {
	w := newWorld(t, withZone())
	w.connect(time.Second)
	w.ignoreS2C = func(p []byte) bool {
		k, err := handshake.Classify(p)
		return err == nil && k == handshake.KindRedirect
	}
	w.drive(200*time.Millisecond, walking)
	if err := w.srv.Redirect(w.now, targetAddr, redirectToken(t, 3)); err != nil {
		t.Fatal(err)
	}
	w.drive(session.DefaultRedirectTimeout-10*time.Millisecond, walking)
	if w.cli.State() != handshake.StateConnected {
		t.Fatalf("old client %v before the redirect timeout", w.cli.State())
	}
	w.drive(200*time.Millisecond, walking)
	var de *session.DisconnectError
	if !errors.As(w.cli.Err(), &de) || de.Reason != handshake.ReasonServerShutdown {
		t.Fatalf("old client: %v %v, want ServerShutdown", w.cli.State(), w.cli.Err())
	}
	if !w.srv.Done() || w.srv.Reason() != handshake.ReasonServerShutdown {
		t.Fatalf("server %v %v", w.srv.State(), w.srv.Reason())
	}
	if _, ok := w.cli.Redirect(); ok {
		t.Fatal("redirect taken by a client that ignores it")
	}
}

// While redirecting the server sends nothing but Redirect copies, and a
// Close still wins.
func TestRedirectThenClose(t *testing.T) {
	w := newWorld(t, withZone())
	w.connect(time.Second)
	w.ignoreS2C = func([]byte) bool { return true }
	if err := w.srv.Redirect(w.now, netip.AddrPort{}, nil); !errors.Is(err, session.ErrConfig) {
		t.Fatalf("bad redirect: %v", err)
	}
	before := w.srv.Stats()
	if err := w.srv.Redirect(w.now, targetAddr, redirectToken(t, 4)); err != nil {
		t.Fatal(err)
	}
	w.drive(300*time.Millisecond, walking)
	after := w.srv.Stats()
	if after.DataOut != before.DataOut || after.AckOut != before.AckOut || after.RedirectOut < 5 {
		t.Fatalf("while redirecting: data %d→%d ack %d→%d redirects %d", before.DataOut, after.DataOut,
			before.AckOut, after.AckOut, after.RedirectOut)
	}
	w.srv.Close(w.now, handshake.ReasonKicked)
	w.run(200*time.Millisecond, 5*time.Millisecond)
	if !w.srv.Done() || w.srv.Reason() != handshake.ReasonKicked {
		t.Fatalf("server %v %v", w.srv.State(), w.srv.Reason())
	}
}
