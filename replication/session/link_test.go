package session_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/session"
)

// impaired is the bad link: 20 % loss, 100 ms ± 30 ms, 5 % reorder,
// 1 % duplication, each direction on its own random stream.
var impaired = netsim.Config{
	Loss: 0.2, Latency: 100 * time.Millisecond, Jitter: 30 * time.Millisecond,
	Reorder: 0.05, Duplicate: 0.01, AllowJitterReorder: true,
}

// drive runs the world for d with the client sampling input every frame.
// input returns the move for the i-th sample.
func (w *world) drive(d time.Duration, input func(i int) move.Move) {
	w.t.Helper()
	for end := w.now + d; w.now < end; {
		w.step(5 * time.Millisecond)
		for w.cli.InputDue(w.now) {
			if _, err := w.cli.Input(input(int(w.cli.Stats().Predictor.Predicted))); err != nil {
				w.t.Fatal(err)
			}
		}
	}
}

// walking is a varied but deterministic input pattern.
func walking(i int) move.Move {
	m := move.Move{Forward: int8(i % 127), Strafe: int8(-(i % 50)), Yaw: uint16(i * 300)}
	if i%45 == 0 {
		m.Buttons = move.ButtonJump
	}
	return m
}

// checkMoves asserts the server applied moves 1..n exactly once, in order,
// with at most gaps moves missing (lost for good from a full window).
func checkMoves(t *testing.T, got []move.Move, minN int, gaps uint64) {
	t.Helper()
	var prev, missing uint64
	for _, m := range got {
		if m.Seq <= prev {
			t.Fatalf("move %d after %d: not exactly once in order", m.Seq, prev)
		}
		missing += m.Seq - prev - 1
		prev = m.Seq
		want := walking(int(m.Seq - 1))
		if m.Forward != want.Forward || m.Strafe != want.Strafe || m.Yaw != want.Yaw || m.Buttons != want.Buttons {
			t.Fatalf("move %d decoded as %+v, sent %+v", m.Seq, m, want)
		}
	}
	if len(got) < minN {
		t.Fatalf("server applied %d moves, want at least %d", len(got), minN)
	}
	if missing > gaps {
		t.Fatalf("%d moves never applied, want at most %d", missing, gaps)
	}
}

func TestImpairedLinkDeliversEverythingExactlyOnceInOrder(t *testing.T) {
	const lanes, perLane = 4, 150
	w := newWorld(t, withLink(impaired, impaired), withZone())
	w.connect(5 * time.Second)
	sent := 0
	for d := 0; d < 60; d++ { // 60 s: the events trickle in with the moves
		for i := 0; i < 10 && sent < lanes*perLane; i++ {
			lane, idx := sent%lanes, sent/lanes
			if err := w.cli.SendEvent(lane, payload("c2s", lane, idx)); err != nil {
				t.Fatal(err)
			}
			if err := w.srv.SendEvent(lane, payload("s2c", lane, idx)); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		w.drive(time.Second, walking)
		if w.cli.State() != handshake.StateConnected || w.srv.State() != handshake.StateConnected {
			t.Fatalf("at %v: client %v (%v), server %v (%v)", w.now, w.cli.State(), w.cli.Err(), w.srv.State(), w.srv.Reason())
		}
	}
	w.run(5*time.Second, 5*time.Millisecond) // drain
	checkOrdered(t, "server", w.srvH.events, "c2s", lanes, perLane)
	checkOrdered(t, "client", w.cliH.events, "s2c", lanes, perLane)
	checkMoves(t, w.srvH.moves, 60*30-40, 0)
	if lost := w.srv.Stats().Moves.Lost; lost != 0 {
		t.Fatalf("%d moves lost", lost)
	}
	// The prediction converged: once input stops, the client's state is the
	// server's.
	if got, want := w.cli.Control(), w.z.state; got != want {
		t.Fatalf("predicted %+v, server %+v", got, want)
	}
	cs, ss := w.cli.Stats(), w.srv.Stats()
	if cs.Notify.Dropped == 0 || ss.Notify.Dropped == 0 || cs.Replayed == 0 && ss.Replayed == 0 {
		t.Fatalf("the link was not impaired: client %+v server %+v", cs.Counters, ss.Counters)
	}
	t.Logf("client: sent %d pkts, %d B; RTT %v; loss %.3f; server: sent %d pkts, %d B, corrections %d",
		cs.PacketsOut, cs.BytesOut, cs.RTT, cs.Loss, ss.PacketsOut, ss.BytesOut, ss.Control.Corrections)
}

func TestSurvives95PercentLossAndRecovers(t *testing.T) {
	good := netsim.Config{Latency: 40 * time.Millisecond}
	bad := good
	bad.Loss = 0.95
	w := newWorld(t, withLink(good, good), withZone())
	w.connect(time.Second)
	w.pipe.AtoB.SetConfig(bad)
	w.pipe.BtoA.SetConfig(bad)
	for i := 0; i < 20; i++ {
		w.cli.SendEvent(0, payload("c2s", 0, i))
		w.srv.SendEvent(0, payload("s2c", 0, i))
	}
	for s := 0; s < 60; s++ {
		w.drive(time.Second, walking)
		if w.cli.State() != handshake.StateConnected || w.srv.State() != handshake.StateConnected {
			t.Fatalf("dropped after %d s at 95%% loss: client %v (%v), server %v (%v)",
				s, w.cli.State(), w.cli.Err(), w.srv.State(), w.srv.Reason())
		}
	}
	w.pipe.AtoB.SetConfig(good)
	w.pipe.BtoA.SetConfig(good)
	for i := 20; i < 40; i++ {
		w.cli.SendEvent(0, payload("c2s", 0, i))
		w.srv.SendEvent(0, payload("s2c", 0, i))
	}
	w.drive(5*time.Second, walking)
	w.run(2*time.Second, 5*time.Millisecond)
	checkOrdered(t, "server", w.srvH.events, "c2s", 1, 40)
	checkOrdered(t, "client", w.cliH.events, "s2c", 1, 40)
	// At 95 % loss the client's move window fills before any copy arrives:
	// the client then holds input (the player stands still) rather than
	// dropping moves, so every move it sampled is applied once, in order.
	if held, dropped := w.cli.Stats().Moves.Held, w.cli.Stats().Moves.Dropped; held == 0 || dropped != 0 {
		t.Fatalf("client held %d samples and dropped %d moves: at 95 %% loss the window must fill and hold", held, dropped)
	}
	if lost := w.srv.Stats().Moves.Lost; lost != 0 {
		t.Fatalf("server counted %d moves lost", lost)
	}
	checkMoves(t, w.srvH.moves, 300, 0)
	last := w.srvH.moves[len(w.srvH.moves)-1].Seq
	if w.cli.LastAck() != last || last != w.cli.Stats().Moves.Added || w.cli.Control() != w.z.state {
		t.Fatalf("not recovered: client acked %d, server applied up to %d, client sampled %d",
			w.cli.LastAck(), last, w.cli.Stats().Moves.Added)
	}
}

func TestKeepAliveWhenIdle(t *testing.T) {
	link := netsim.Config{Latency: 30 * time.Millisecond}
	w := newWorld(t, withLink(link, link))
	w.connect(time.Second)
	w.run(time.Second, 10*time.Millisecond) // settle the handshake's acks
	c0, s0 := w.cli.Stats().Counters, w.srv.Stats().Counters
	w.run(60*time.Second, 10*time.Millisecond) // 6× the timeout, nothing to say
	if w.cli.State() != handshake.StateConnected || w.srv.State() != handshake.StateConnected {
		t.Fatalf("idle connection dropped: client %v (%v), server %v", w.cli.State(), w.cli.Err(), w.srv.State())
	}
	c1, s1 := w.cli.Stats().Counters, w.srv.Stats().Counters
	for _, d := range []struct {
		who  string
		a, b session.Counters
	}{{"client", c0, c1}, {"server", s0, s1}} {
		acks, data := d.b.AckOut-d.a.AckOut, d.b.DataOut-d.a.DataOut
		// One keepalive per second (KeepAlive), nothing else.
		if acks < 59 || acks > 61 || data != 0 {
			t.Fatalf("%s sent %d keepalives and %d data packets in 60 idle seconds, want 60 and 0", d.who, acks, data)
		}
	}
	// No keepalive while traffic flows.
	a0 := w.cli.Stats().AckOut
	w.drive(5*time.Second, walking)
	if a := w.cli.Stats().AckOut - a0; a != 0 {
		t.Fatalf("client sent %d keepalives while sending moves", a)
	}
}

func TestTimeoutWhenPeerSilent(t *testing.T) {
	link := netsim.Config{Latency: 30 * time.Millisecond}
	w := newWorld(t, withLink(link, link))
	w.connect(time.Second)
	dead := netsim.Config{Loss: 1}
	w.pipe.AtoB.SetConfig(dead)
	w.pipe.BtoA.SetConfig(dead)
	cut := w.now
	w.run(9*time.Second, 10*time.Millisecond)
	if w.cli.State() != handshake.StateConnected || w.srv.State() != handshake.StateConnected {
		t.Fatal("timed out before the 10 s timeout")
	}
	w.run(2*time.Second, 10*time.Millisecond)
	if w.cli.State() != handshake.StateClosed || !errors.Is(w.cli.Err(), session.ErrTimeout) {
		t.Fatalf("client %v (%v) %v after the cut, want closed with ErrTimeout", w.cli.State(), w.cli.Err(), w.now-cut)
	}
	if !w.srv.Done() || w.srv.Reason() != handshake.ReasonTimeout {
		t.Fatalf("server %v, reason %v, want done with Timeout", w.srv.State(), w.srv.Reason())
	}
	// Both sent their Disconnect(Timeout) copies into the void.
	if w.srv.Stats().DisconnectOut != session.DefaultDisconnectCopies {
		t.Fatalf("server sent %d Disconnect copies", w.srv.Stats().DisconnectOut)
	}
}

func TestDisconnectReasonsDespiteLoss(t *testing.T) {
	lossy := netsim.Config{Loss: 0.3, Latency: 50 * time.Millisecond, Jitter: 10 * time.Millisecond}
	for seed := uint64(1); seed <= 10; seed++ {
		// Server kicks the client.
		w := newWorld(t, withLink(lossy, lossy), withSeed(seed))
		w.connect(5 * time.Second)
		w.srv.Close(w.now, handshake.ReasonKicked)
		w.run(time.Second, 5*time.Millisecond)
		var de *session.DisconnectError
		if !errors.As(w.cli.Err(), &de) || de.Reason != handshake.ReasonKicked || w.cli.State() != handshake.StateClosed {
			t.Fatalf("seed %d: client %v, err %v; want closed by Kicked", seed, w.cli.State(), w.cli.Err())
		}
		if !w.srv.Done() || w.srv.Reason() != handshake.ReasonKicked {
			t.Fatalf("seed %d: server %v %v", seed, w.srv.State(), w.srv.Reason())
		}
		// Client quits.
		w = newWorld(t, withLink(lossy, lossy), withSeed(seed+100))
		w.connect(5 * time.Second)
		w.cli.Close(w.now)
		if err := w.cli.SendEvent(0, []byte("late")); !errors.Is(err, session.ErrClosed) {
			t.Fatalf("SendEvent while draining: %v", err)
		}
		w.run(time.Second, 5*time.Millisecond)
		if w.cli.State() != handshake.StateClosed || w.cli.Err() != nil {
			t.Fatalf("seed %d: client %v %v", seed, w.cli.State(), w.cli.Err())
		}
		if !w.srv.Done() || w.srv.Reason() != handshake.ReasonClientQuit {
			t.Fatalf("seed %d: server %v reason %v, want ClientQuit", seed, w.srv.State(), w.srv.Reason())
		}
		if n := w.cli.Stats().DisconnectOut; n != session.DefaultDisconnectCopies {
			t.Fatalf("seed %d: %d copies, want %d", seed, n, session.DefaultDisconnectCopies)
		}
	}
}
