package zone

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// phaseOf is player id's handoff phase in zone.
func (f *fixture) phaseOf(zone string, id uint64) handoff.Phase {
	f.t.Helper()
	var ph handoff.Phase
	f.inspectZone(zone, func(z *sim.Zone) { ph, _, _ = z.Handoffs().Status(id) })
	return ph
}

// standInHands sends x0z0 the stand-in's (x1z0's) message of kind about
// player id at epoch, sent now: an Offer or Commit carries the player's
// state (in x0z0) and its Join.
func (f *fixture) standInHands(kind handoff.Kind, id uint64, epoch handoff.Epoch) {
	env := &HandoffEnvelope{Msg: handoff.Msg{Kind: kind, Entity: id, Epoch: epoch, From: "x1z0", To: "x0z0", Sent: f.clk.Now()}}
	if kind == handoff.KindOffer || kind == handoff.KindCommit {
		env.Msg.State = &handoff.Snapshot{Entity: id, Kind: uint8(sim.KindPlayer)}
		env.Msg.State.Control.Pos = [3]float32{-500, 0, 0}
		p := f.drv.add(id, f.world.PID("x0z0"))
		env.Join = &msg.Join{Player: id, Conn: f.dpid, Ghosts: f.dpid, Views: &p.views}
	}
	f.sys.Root.Send(f.world.PID("x0z0"), env)
}

// flushPeer returns once the stand-in has recorded every message x0z0
// sent it before x0z0 handled the messages sent to it so far: a marker
// queued behind them (one mailbox, in order).
func (f *fixture) flushPeer(peer *peerStandIn) {
	f.t.Helper()
	f.syncZone("x0z0")
	const marker = 1 << 40
	f.sys.Root.Send(actor.NewPID(f.sys.Address(), ActorName("x1z0")), &HandoffEnvelope{Msg: handoff.Msg{Kind: handoff.KindRoute, Entity: marker}})
	waitFor(f.t, 2*time.Second, "the stand-in's mailbox flushed", func() bool {
		for _, m := range peer.copy() {
			if m.kind == handoff.KindRoute {
				return true
			}
		}
		return false
	})
	peer.mu.Lock()
	defer peer.mu.Unlock()
	for i, m := range peer.got {
		if m.kind == handoff.KindRoute {
			peer.got = append(peer.got[:i], peer.got[i+1:]...)
			break
		}
	}
}

// placings counts the players Params.Placed was told of.
type placings struct {
	mu sync.Mutex
	n  map[uint64]int
}

func (p *placings) add(player uint64, _ string, _ uint64, _ bool, _ *handoff.Checkpoint) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = map[uint64]int{}
	}
	p.n[player]++
}

func (p *placings) of(player uint64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[player]
}

// A zone held by its lease (its renewal overdue: the node may be losing
// it) must acknowledge nothing a new owner would not have. An Accept of
// the zone's own open offer would commit the player to the neighbour and
// release it here: it is kept, and handled at the let-go (the Commit goes
// then). A census's or a drain's pause lets the handoff settle: the
// Accept is handled at once. Before, the held zone committed the player
// as it came.
func TestHeldZoneKeepsAnAcceptForTheLetGo(t *testing.T) {
	for _, r := range pauseReasons {
		t.Run(r.name, func(t *testing.T) {
			defer verifyNoLeaks(t)()
			f, peer, stop := startWithStandIn(t, slowOffers, Params{Spawn: at})
			defer stop()
			offer := f.offerToStandIn(peer)
			f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: true, By: r.by})
			mark := len(peer.copy())
			f.answerFor("x1z0", handoff.KindAccept, offer.epoch)
			f.answerFor("x1z0", handoff.KindAccept, offer.epoch) // a duplicate
			f.flushPeer(peer)
			commits, ph := count(peer, mark, handoff.KindCommit), f.phaseOf("x0z0", 1)
			if r.by != PauseLease {
				if commits != 1 || ph != handoff.PhaseCommitting {
					t.Fatalf("paused, not held: %d Commits sent, player 1 %v; want the Accept handled (1 Commit, committing)", commits, ph)
				}
				return
			}
			if commits != 0 || ph != handoff.PhaseOffering {
				t.Fatalf("held by the lease: %d Commits sent, player 1 %v; want the Accept kept (no Commit, still offering)", commits, ph)
			}
			f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: false, By: r.by})
			f.flushPeer(peer)
			commits, ph = count(peer, mark, handoff.KindCommit), f.phaseOf("x0z0", 1)
			if commits < 1 || ph != handoff.PhaseCommitting {
				t.Fatalf("after the let-go: %d Commits sent, player 1 %v; want the kept Accept handled (committing)", commits, ph)
			}
			if n := count(peer, mark, handoff.KindAbort); n != 0 {
				t.Fatalf("%d Aborts after the let-go: the duplicate Accept was not taken for one", n)
			}
		})
	}
}

// The same for a neighbour's Commit of a player to the held zone: taking
// it acquires the player, writes its record (Placed) and acknowledges it
// (CommitAck), each a claim. It is kept, its resent copies in one, and
// the player taken once at the let-go; a census's pause takes it at once.
func TestHeldZoneKeepsACommitForTheLetGo(t *testing.T) {
	for _, r := range pauseReasons {
		t.Run(r.name, func(t *testing.T) {
			defer verifyNoLeaks(t)()
			var placed placings
			f, peer, stop := startWithStandIn(t, slowOffers, Params{Spawn: at, Placed: placed.add})
			defer stop()
			f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: true, By: r.by})
			f.standInHands(handoff.KindCommit, 7, 3)
			f.standInHands(handoff.KindCommit, 7, 3) // resent
			f.flushPeer(peer)
			acks, ph := count(peer, 0, handoff.KindCommitAck), f.phaseOf("x0z0", 7)
			if r.by != PauseLease {
				if acks == 0 || ph != handoff.PhaseOwned || placed.of(7) != 1 {
					t.Fatalf("paused, not held: %d CommitAcks, player 7 %v, placed %d times; want it taken", acks, ph, placed.of(7))
				}
				return
			}
			if acks != 0 || ph != handoff.PhaseUnknown || placed.of(7) != 0 || f.world.Metrics().HandoffsIn.Load() != 0 {
				t.Fatalf("held by the lease: %d CommitAcks, player 7 %v, placed %d times; want the Commit kept (nothing acknowledged, not taken, no record)",
					acks, ph, placed.of(7))
			}
			f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: false, By: r.by})
			f.flushPeer(peer)
			acks, ph = count(peer, 0, handoff.KindCommitAck), f.phaseOf("x0z0", 7)
			if acks != 1 || ph != handoff.PhaseOwned || placed.of(7) != 1 || f.world.Metrics().HandoffsIn.Load() != 1 {
				t.Fatalf("after the let-go: %d CommitAcks, player 7 %v, placed %d times, %d handoffs in; want it taken once, acknowledged once",
					acks, ph, placed.of(7), f.world.Metrics().HandoffsIn.Load())
			}
		})
	}
}

// A neighbour's Offer to a held zone is not answered: an Accept would
// reserve the player here. Its sender resends it and, at its timeout,
// withdraws it; a copy that comes after the let-go is answered. A
// census's pause answers it at once.
func TestHeldZoneAnswersNoOffer(t *testing.T) {
	for _, r := range pauseReasons {
		t.Run(r.name, func(t *testing.T) {
			defer verifyNoLeaks(t)()
			f, peer, stop := startWithStandIn(t, slowOffers, Params{Spawn: at})
			defer stop()
			f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: true, By: r.by})
			f.standInHands(handoff.KindOffer, 8, 2)
			f.flushPeer(peer)
			var reserved bool
			f.inspectZone("x0z0", func(z *sim.Zone) { _, reserved = z.Handoffs().Reserved(8) })
			answers := count(peer, 0, handoff.KindAccept) + count(peer, 0, handoff.KindReject)
			if r.by != PauseLease {
				if answers != 1 || !reserved {
					t.Fatalf("paused, not held: %d answers, reserved %v; want the Offer accepted", answers, reserved)
				}
				return
			}
			if answers != 0 || reserved {
				t.Fatalf("held by the lease: %d answers, reserved %v; want the Offer unanswered", answers, reserved)
			}
			f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: false, By: r.by})
			f.flushPeer(peer)
			if n := count(peer, 0, handoff.KindAccept) + count(peer, 0, handoff.KindReject); n != 0 {
				t.Fatalf("after the let-go, before a resend: %d answers; want the dropped Offer left unanswered", n)
			}
			f.standInHands(handoff.KindOffer, 8, 2) // the sender's resend
			waitFor(t, 2*time.Second, "the resent Offer accepted", func() bool { return count(peer, 0, handoff.KindAccept) == 1 })
		})
	}
}
