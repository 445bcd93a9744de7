package session_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/session"
)

// TestStateFollowsTheSession: the State a Server keeps of its handshake
// Session (read by Due, NextDeadlineWith, Done, State and Receive instead
// of the Session's line) is the Session's own after every call, through
// every way the Session changes: the first authenticated packet (pending →
// connected), the client's Disconnect (closed), Close and Redirect of a
// pending session and its timeout (closed), a Disconnect's copies
// (draining, then closed), a connected session's timeout, on lossy links
// and at random moments. Each run checks after each call (and the worlds
// of every test after each Receive and Poll: world.checkState), and the
// test fails unless the runs together took every one of those changes;
// and a Server made on a Session already closed starts closed.
func TestStateFollowsTheSession(t *testing.T) {
	type change struct{ from, to handshake.State }
	seen := map[change]int{}
	for seed := uint64(1); seed <= 60; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x57a7e))
		loss := netsim.Config{Loss: float64(r.IntN(3)) * 0.1}
		w := newWorld(t, withSeed(seed), withLink(loss, loss))
		var last handshake.State
		check := func(what string) {
			t.Helper()
			if w.srv == nil {
				return
			}
			kept, own := session.SessionStates(w.srv)
			if kept != own {
				t.Fatalf("seed %d at %v after %s: the server keeps State %v, its Session is %v", seed, w.now, what, kept, own)
			}
			if kept != last {
				seen[change{last, kept}]++
				last = kept
			}
		}
		// serverOnly runs the server alone for d: the client is silent.
		serverOnly := func(d time.Duration) {
			w.now += d
			for {
				out, _ := w.srv.Poll(w.now, nil, nil)
				check("a poll with the client silent")
				if len(out) == 0 {
					return
				}
			}
		}
		// Until the server exists, its session is pending; then a random
		// life: steps, a Close, a Redirect, the client's quit, silence.
		for w.srv == nil && w.now < time.Second {
			w.step(time.Millisecond)
		}
		if w.srv == nil {
			t.Fatalf("seed %d: no grant", seed)
		}
		last = handshake.StatePending
		check("the grant")
		for range 200 {
			if last == handshake.StateClosed {
				break
			}
			switch k := r.IntN(100); {
			case k < 2:
				w.srv.Close(w.now, handshake.ReasonKicked)
				check("Close")
			case k < 4:
				_ = w.srv.Redirect(w.now, targetAddr, redirectToken(t, seed))
				check("Redirect")
			case k < 6:
				w.cli.Close(w.now)
				check("the client's Close")
			case k < 8:
				serverOnly(11 * time.Second) // past the token's 10 s timeout
			default:
				w.step(time.Duration(1+r.IntN(60)) * time.Millisecond)
				check("a step")
			}
		}
	}
	// A Session no longer pending when the Server is made (NewServer takes
	// any server session): the Server starts from its State, not from
	// the zero State (pending).
	sess := serverSession(t)
	sess.Close(handshake.ReasonServerShutdown)
	srv, err := session.NewServer(sess, session.DefaultServerConfig(), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if kept, own := session.SessionStates(srv); kept != own || !srv.Done() {
		t.Errorf("a Server made on a closed Session keeps State %v (its Session: %v), Done %v", kept, own, srv.Done())
	}
	for _, c := range []change{
		{handshake.StatePending, handshake.StateConnected},
		{handshake.StatePending, handshake.StateClosed},
		{handshake.StateConnected, handshake.StateDraining},
		{handshake.StateDraining, handshake.StateClosed},
		{handshake.StateConnected, handshake.StateClosed},
	} {
		if seen[c] == 0 {
			t.Errorf("no run took the server's session from %v to %v (seen: %v)", c.from, c.to, seen)
		}
	}
}
