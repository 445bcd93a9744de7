package zone

import (
	"fmt"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// pausedOffers: offers time out after 400 ms (resent every 50 ms, the
// default), Commits are given up on after 300 ms and forgotten 300 ms
// later; four NPCs and a second player stand in x0z0 to show that
// nothing moves while it is paused.
var pausedOffers = sim.Config{TickRate: 50, NPCs: 4, Handoff: handoff.Config{OfferTimeout: 400 * time.Millisecond,
	CommitGiveUp: 300 * time.Millisecond, MaxAge: 100 * time.Millisecond, ForwardTTL: 400 * time.Millisecond}}

// pauseReasons are the owners a zone may be paused by, each alone.
var pauseReasons = []struct {
	name string
	by   PauseReason
}{{"manual (a census)", PauseManual}, {"lease hold", PauseLease}, {"handover (a drain)", PauseHandover}}

// stillness is what must not change in a paused zone: its tick count and
// every owned entity's position and last applied move.
type stillness struct {
	tick uint64
	ents map[uint64]sim.EntityInfo
}

func (f *fixture) stillness(zone string) stillness {
	f.t.Helper()
	s := stillness{ents: map[uint64]sim.EntityInfo{}}
	f.inspectZone(zone, func(z *sim.Zone) {
		s.tick = z.Tick()
		z.Entities(func(e sim.EntityInfo) {
			if e.Owned {
				s.ents[e.ID] = e
			}
		})
	})
	return s
}

// stillSince reports what moved in zone since s (nil: nothing).
func (f *fixture) stillSince(zone string, s stillness) error {
	f.t.Helper()
	now := f.stillness(zone)
	if now.tick != s.tick {
		return fmt.Errorf("zone %s ticked from %d to %d while paused", zone, s.tick, now.tick)
	}
	for id, e := range s.ents {
		n, ok := now.ents[id]
		if !ok { // it left (a kept Leave taken): it did not move
			continue
		}
		if n.State.Pos != e.State.Pos || n.LastApplied != e.LastApplied {
			return fmt.Errorf("entity %d moved while paused: %v (move %d) → %v (move %d)", id, e.State.Pos, e.LastApplied, n.State.Pos, n.LastApplied)
		}
	}
	return nil
}

// inFlight is x0z0's handoffs in flight (handoff.Machine.InFlight).
func (f *fixture) inFlight() int {
	n := 0
	f.inspectZone("x0z0", func(z *sim.Zone) { n = z.Handoffs().InFlight() })
	return n
}

// count is how many of peer's messages from the i-th on are of kind.
func count(peer *peerStandIn, from int, kind handoff.Kind) int {
	n := 0
	for _, m := range peer.copy()[from:] {
		if m.leave == nil && m.kind == kind {
			n++
		}
	}
	return n
}

// walkPlayer2 sends x0z0 player 2's moves seq..seq+n-1 (forward, 30 Hz).
func (f *fixture) walkPlayer2(seq uint64, n int) {
	in := msg.NewInput()
	in.Player = 2
	for i := range n {
		in.Moves = append(in.Moves, move.Move{Seq: seq + uint64(i), Dt: 32, Forward: 127})
	}
	f.sys.Root.Send(f.world.PID("x0z0"), in)
}

// A zone paused while it hands a player to a neighbour that never
// answers (its Offer, or the Accept, lost: x1z0 is a stand-in that
// answers nothing). The player's Leave came meanwhile and is kept until
// the handoff settles. Paused by a census or a drain, the zone must go on
// resending the Offer, abort it at OfferTimeout and then take the kept
// Leave, all while paused; paused by a lease's hold it must not resend
// (the node may have lost the zone) but still abort at OfferTimeout,
// keeping the Leave for the let-go. Either way nothing moves: no tick, no
// move applied, no entity moved. Before, the handoff's timers ran only in
// a tick: the Offer stayed open as long as the pause (a census waited its
// whole bound on it).
//
// Player 3's connection left to follow a Redirect (its grace 100 ms, the
// offer's timeout 400 ms): paused by a census or a drain the zone ends the
// player at the grace's end, by a lease's hold after the let-go.
func TestLostOfferSettlesWhilePaused(t *testing.T) {
	defer func(g time.Duration) { redirectGrace = g }(redirectGrace)
	redirectGrace = 100 * time.Millisecond
	for _, r := range pauseReasons {
		t.Run(r.name, func(t *testing.T) {
			defer verifyNoLeaks(t)()
			f, peer, stop := startWithStandIn(t, pausedOffers, Params{Spawn: at})
			defer stop()
			f.offerToStandIn(peer) // joins player 1 and teleports it: frozen
			f.join(2, "x0z0")
			f.join(3, "x0z0")
			f.walkPlayer2(1, 4)
			f.sys.Root.Send(f.world.PID("x0z0"), &msg.Leave{Player: 1, Conn: f.dpid, Reason: handshake.ReasonClientQuit})
			f.sys.Root.Send(f.world.PID("x0z0"), &msg.Leave{Player: 3, Conn: f.dpid, Reason: handshake.ReasonRedirected})
			f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: true, By: r.by})
			f.syncZone("x0z0")
			if f.inFlight() != 1 || f.world.Metrics().Leaves.Load() != 0 {
				t.Fatalf("at the pause: %d in flight, %d left; want the offer open, the Leave kept", f.inFlight(), f.world.Metrics().Leaves.Load())
			}
			mark := len(peer.copy())
			still := f.stillness("x0z0")
			f.walkPlayer2(5, 8) // queued, not applied: paused
			waitFor(t, 3*time.Second, "the lost offer aborted while paused", func() bool {
				return f.inFlight() == 0 && count(peer, mark, handoff.KindAbort) == 1
			}, func() string {
				return fmt.Sprintf("%d in flight, messages since the pause %+v", f.inFlight(), peer.copy()[mark:])
			})
			lease := r.by == PauseLease
			wantResends(t, count(peer, mark, handoff.KindOffer), "Offers", lease)
			if lease {
				f.syncZone("x0z0")
				if n := f.world.Metrics().Leaves.Load(); n != 0 {
					t.Fatalf("%d left during the lease's hold: want the kept Leave and the Redirect's grace kept for the let-go", n)
				}
			} else {
				waitFor(t, 2*time.Second, "the kept Leave taken and the redirected player ended while paused", func() bool { return f.world.Metrics().Leaves.Load() == 2 })
			}
			if err := f.stillSince("x0z0", still); err != nil {
				t.Fatal(err)
			}
			f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: false, By: r.by})
			waitFor(t, 2*time.Second, "the Leave taken and player 2's moves applied once resumed", func() bool {
				s := f.stillness("x0z0")
				return f.world.Metrics().Leaves.Load() == 2 && s.ents[2].LastApplied == 12
			})
		})
	}
}

// The same with the Commit lost: x0z0 has committed player 1 to the
// stand-in, which never acknowledges, and the player's Leave came after
// (passed on, and kept beside the unacknowledged Commit). Paused by a
// census or a drain, the zone goes on resending the Commit, gives it up
// at CommitGiveUp, forgets the handoff at ForwardTTL and ends the player
// itself (its last checkpoint handed on), all while paused; paused by a
// lease's hold it resends nothing and still gives up and forgets the
// handoff, and ends the player only after the let-go. Nothing moves.
func TestLostCommitSettlesWhilePaused(t *testing.T) {
	for _, r := range pauseReasons {
		t.Run(r.name, func(t *testing.T) {
			defer verifyNoLeaks(t)()
			var left leavings
			f, peer, stop := startWithStandIn(t, pausedOffers, Params{Spawn: at, Checkpoint: left.add})
			defer stop()
			offer := f.offerToStandIn(peer)
			f.join(2, "x0z0")
			f.walkPlayer2(1, 4)
			f.answerFor("x1z0", handoff.KindAccept, offer.epoch)
			waitFor(t, 2*time.Second, "the Commit", func() bool { return count(peer, 0, handoff.KindCommit) > 0 })
			f.sys.Root.Send(f.world.PID("x0z0"), &msg.Leave{Player: 1, Conn: f.dpid, Reason: handshake.ReasonClientQuit})
			f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: true, By: r.by})
			f.syncZone("x0z0")
			if f.inFlight() != 1 || f.world.Metrics().Leaves.Load() != 0 {
				t.Fatalf("at the pause: %d in flight, %d left; want the Commit unacknowledged, the Leave kept", f.inFlight(), f.world.Metrics().Leaves.Load())
			}
			mark := len(peer.copy())
			still := f.stillness("x0z0")
			f.walkPlayer2(5, 8)
			waitFor(t, 3*time.Second, "the lost Commit given up on and forgotten while paused", func() bool { return f.inFlight() == 0 },
				func() string {
					return fmt.Sprintf("%d in flight, messages since the pause %+v", f.inFlight(), peer.copy()[mark:])
				})
			lease := r.by == PauseLease
			wantResends(t, count(peer, mark, handoff.KindCommit), "Commits", lease)
			if lease {
				f.syncZone("x0z0")
				if n := f.world.Metrics().Leaves.Load(); n != 0 {
					t.Fatalf("the player ended during the lease's hold (%d left): want it kept for the let-go", n)
				}
			} else {
				waitFor(t, 2*time.Second, "the player ended here while paused", func() bool { return f.world.Metrics().LeftUnacked.Load() == 1 })
			}
			if err := f.stillSince("x0z0", still); err != nil {
				t.Fatal(err)
			}
			f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: false, By: r.by})
			waitFor(t, 2*time.Second, "the player ended and player 2's moves applied once resumed", func() bool {
				s := f.stillness("x0z0")
				return f.world.Metrics().LeftUnacked.Load() == 1 && s.ents[2].LastApplied == 12
			})
			if cps := left.copy(); len(cps) != 1 || cps[0].Entity != 1 || cps[0].Epoch != offer.epoch {
				t.Fatalf("last checkpoints %+v, want player 1's at epoch %d", cps, offer.epoch)
			}
		})
	}
}

// wantResends checks n, the messages of a kind resent while paused: none
// under a lease's hold (a copy would claim what the node may have lost),
// some under any other owner's pause.
func wantResends(t *testing.T, n int, what string, lease bool) {
	t.Helper()
	if lease && n != 0 {
		t.Errorf("%d %s resent while paused, want none (lease hold)", n, what)
	} else if !lease && n == 0 {
		t.Errorf("no %s resent while paused, want some", what)
	}
}
