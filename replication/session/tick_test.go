package session_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/netsim"
)

// TestEveryTickLeavesInItsOwnPacket: a zone ticking at the send rate (20
// Hz) hands the connection one control state per tick, each reaching it
// 0–20 ms after its tick (the zone's own work, the mailbox, a busy shard);
// the client samples moves at 30 Hz. Every tick's new ack must reach the
// client, in a packet of its own, at once: none may be superseded by the
// next tick's while it waits for a send slot. Before SetControl opened the
// slot, the slot timer ran at the tick rate with a phase of its own, and
// where that phase met the ticks' arrival jitter some slots saw no new tick
// and the next one two: an update skipped, a 100 ms gap for the client —
// botswarm's handoff-hitch p99 of 100 ms in ordinary play. The server still
// sends at most SendRate data packets a second, one per tick.
func TestEveryTickLeavesInItsOwnPacket(t *testing.T) {
	const (
		tick    = 50 * time.Millisecond
		spread  = 20 * time.Millisecond // how late a tick's state may reach the connection
		runFor  = 10 * time.Second
		latency = 5 * time.Millisecond
	)
	for _, phase := range []time.Duration{0, 7, 13, 21, 29, 37, 44} {
		phase *= time.Millisecond
		link := netsim.Config{Latency: latency}
		w := newWorld(t, withLink(link, link), withSeed(uint64(phase)+1))
		w.connect(time.Second)
		rng := rand.New(seeded(uint64(phase) + 99))

		var (
			z        zone
			seen     int // moves of w.srvH.moves applied by z
			nextTick = w.now - w.now%tick + tick + phase
			arrive   []pendingTick // ticks computed, not yet at the connection
			sent     []uint64      // each tick's new ack, in order
			got      = map[uint64]time.Duration{}
			setAt    = map[uint64]time.Duration{}
			lastAck  uint64
		)
		start := w.srv.Stats().Counters.DataOut
		begin := w.now
		end := begin + runFor
		for w.now < end {
			w.now += time.Millisecond
			for w.cli.InputDue(w.now) {
				if _, err := w.cli.Input(move.Move{Forward: 100, Yaw: uint16(w.now / time.Millisecond)}); err != nil {
					t.Fatal(err)
				}
			}
			for out, _ := w.cli.Poll(w.now, w.buf[:0]); len(out) > 0; out, _ = w.cli.Poll(w.now, w.buf[:0]) {
				w.pipe.AtoB.Send(w.now, out)
			}
			w.pipe.AtoB.Deliver(w.now, w.serverRecv)
			if w.now >= nextTick {
				// The zone applies every move that reached it before the tick.
				for _, m := range w.srvH.moves[seen:] {
					z.apply(m)
				}
				seen = len(w.srvH.moves)
				at := nextTick + time.Duration(rng.Int64N(int64(spread)))
				arrive = append(arrive, pendingTick{at: at, applied: z.applied, state: z.state})
				nextTick += tick
			}
			if w.now%(70*time.Millisecond) == 0 {
				// Events between ticks (echoes the zone sends as inputs
				// arrive) ride with the next tick's packet; they must not
				// take its place or delay it.
				if err := w.srv.SendEvent(0, []byte("echo")); err != nil {
					t.Fatal(err)
				}
			}
			for len(arrive) > 0 && arrive[0].at <= w.now {
				p := arrive[0]
				arrive = arrive[1:]
				if p.applied != 0 && (len(sent) == 0 || p.applied != sent[len(sent)-1]) {
					sent = append(sent, p.applied)
					setAt[p.applied] = w.now
				}
				w.srv.SetControl(p.applied, p.state)
			}
			for {
				out, err := w.srv.Poll(w.now, w.buf[:0], nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(out) == 0 {
					break
				}
				w.pipe.BtoA.Send(w.now, out)
			}
			w.pipe.BtoA.Deliver(w.now, func(p []byte) { w.cli.Receive(w.now, p) })
			if a := w.cli.LastAck(); a != lastAck {
				got[a], lastAck = w.now, a
			}
			if d := w.srv.NextDeadline(w.now); d <= w.now {
				t.Fatalf("phase %v: server idle at %v with NextDeadline %v", phase, w.now, d)
			}
		}
		if len(sent) < int(runFor/tick)*9/10 {
			t.Fatalf("phase %v: only %d ticks acknowledged new moves", phase, len(sent))
		}
		skipped, slowest := 0, time.Duration(0)
		for _, a := range sent[:len(sent)-1] { // the newest may still be on its way
			at, ok := got[a]
			if !ok {
				skipped++
				continue
			}
			if setAt[a] >= begin+time.Second/2 { // the connection's first packets aside
				slowest = max(slowest, at-setAt[a])
			}
		}
		// At once: the link's latency, and a millisecond step of this loop.
		if slowest > latency+time.Millisecond {
			t.Errorf("phase %v: a tick's ack took %v from the connection to the client (link %v)", phase, slowest, latency)
		}
		if skipped > 0 {
			t.Errorf("phase %v: %d of %d ticks' acks never reached the client (superseded by the next tick's while waiting for a send slot)",
				phase, skipped, len(sent))
		}
		data := w.srv.Stats().Counters.DataOut - start
		if limit := uint64(runFor/(time.Second/20)) + 2; data > limit {
			t.Errorf("phase %v: %d data packets in %v: more than SendRate allows (%d)", phase, data, runFor, limit)
		}
	}
}

type pendingTick struct {
	at      time.Duration
	applied uint64
	state   move.ControlState
}
