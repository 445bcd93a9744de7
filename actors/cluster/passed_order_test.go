package cluster

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// orderSeen is the game of every zone of every node in a test: for each
// unordered event a player sends it records the zone that handled it and
// the newest move of the player's that zone had received by then (applied
// or queued).
type orderSeen struct {
	mu  sync.Mutex
	got []string
}

func (s *orderSeen) HandleEvent(c *zone.EventContext, player uint64, e *msg.Event) {
	if e.Class != event.Unordered || len(e.Payload) != 2 || e.Payload[0] != 'o' {
		return
	}
	info, _ := c.Zone().Entity(player)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, fmt.Sprintf("%s: event %d after move %d", c.Zone().ID(), e.Payload[1], info.LastApplied+uint64(info.Queued)))
}

func (s *orderSeen) since(base int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got[base:])
}

// A player handed from x1z0 (n2) to a zone on another node whose
// connection still sends to x1z0 (its Route not there yet): x1z0 passes
// each Input on through n2's proxy, its moves in a Forward and its events
// behind it (actors/zone eventsAway). At the owner each Input's events
// must be handled after its own moves and before the next Input's, as
// they are when the connection sends to the owner itself, and as they are
// when the owner is a zone of x1z0's own process (actors/zone
// TestPassedOnInputsKeepTheirOrderAtTheOwner). Before, the receiving
// bridge handed the Forwards to the zone at the handoffs' priority and
// the passed-on Inputs at the default one: with the Inputs queued at the
// owner, every Forward went first, and the first Input's events were
// handled after the third Input's moves.
func TestPassedOnInputsKeepTheirOrderAcrossNodes(t *testing.T) {
	seen := &orderSeen{}
	nodes := lineNodesWith(t, func(_ int, p *zone.Params, _ *Config) { p.Events = seen })
	gw := nodes[0]
	old := actor.NewPID(gw.sys.Address(), zone.ActorName("x1z0"))
	for i, tc := range passOnTargets {
		t.Run(tc.name, func(t *testing.T) {
			player := uint64(990 + i)
			c := newLoginConn(gw.sys, old)
			gw.sys.Root.Send(old, c.join(gw.sys, player))
			c.play(t, gw.sys, player, 1, 3, "join on n2")
			gw.sys.Root.Send(old, &zone.Teleport{Entity: player, Pos: tc.into})
			owner := nodes[tc.node]
			waitFor(t, 5*time.Second, tc.zone+" to own the player", func() bool {
				_, owned := entityIn(t, owner, player)
				return owned
			})
			// The owner paused (no tick applies the moves: they stay
			// queued) and held (what comes for it queues in its mailbox).
			zpid := owner.zones.PID(tc.zone)
			owner.sys.Root.Send(zpid, &zone.Pause{Paused: true})
			entityIn(t, owner, player) // the Pause taken
			release := holdZone(t, owner)
			base := len(seen.since(0))
			forwarded, inputsIn := nodes[1].m.Forwarded.Load(), owner.bridge.Metrics().RemoteInputs.Load()
			for k := uint64(1); k <= 3; k++ {
				in := msg.NewInput()
				in.Player = player
				in.Moves = append(in.Moves, move.Move{Seq: 3 + k, Dt: 1, Forward: 1})
				in.Add(event.Unordered, 0, 0, []byte{'o', byte(k)})
				gw.sys.Root.Send(old, in)
			}
			waitFor(t, 5*time.Second, "x1z0 to pass the 3 Inputs on", func() bool { return nodes[1].m.Forwarded.Load()-forwarded >= 3 })
			// A marker behind them on the same proxy, stream and
			// subscription: once the owner's node has decoded it, the
			// passed-on items ahead of it are in the held zone's mailbox.
			marker := msg.NewInput()
			marker.Player = 1 << 40
			marker.Moves = append(marker.Moves, move.Move{Seq: 1, Dt: 1})
			nodes[1].sys.Root.Send(actor.NewPID(nodes[1].sys.Address(), zone.ActorName(tc.zone)), marker)
			waitFor(t, 5*time.Second, "the owner's node to take the passed-on Inputs and the marker", func() bool {
				return owner.bridge.Metrics().RemoteInputs.Load()-inputsIn >= 4
			})
			release()
			owner.sys.Root.Send(zpid, &zone.Pause{Paused: false})
			waitFor(t, 5*time.Second, "the 3 events handled", func() bool { return len(seen.since(base)) >= 3 })
			want := []string{
				tc.zone + ": event 1 after move 4",
				tc.zone + ": event 2 after move 5",
				tc.zone + ": event 3 after move 6",
			}
			if got := seen.since(base); !slices.Equal(got, want) {
				t.Fatalf("events handled at the owner:\n got %q\nwant %q", got, want)
			}
			var info sim.EntityInfo
			waitFor(t, 5*time.Second, "the 6 moves applied at "+tc.zone, func() bool {
				info, _ = entityIn(t, owner, player)
				return info.LastApplied == 6
			})
		})
	}
}

// The wire's passed_on flag: an Input item marked passed on is handed to
// the zone as one (zone.PassedOn, at the handoffs' priority); one without
// it — an old peer's, which never sets it — is a plain Input, as before.
// The proxy marks exactly what a zone passed on.
func TestPassedOnFlagOnTheWire(t *testing.T) {
	b := &Bridge{cfg: Config{Now: func() time.Duration { return 0 }}, m: new(Metrics)}
	for _, passed := range []bool{false, true} {
		in := msg.NewInput()
		in.Player, in.EventGen = 7, 3
		in.Add(event.Unordered, 0, 0, []byte("x"))
		item := &pb.ZoneItem{Item: &pb.ZoneItem_Input{Input: new(pb.PlayerInput)}}
		fillInput(item.GetInput(), in, 1, passed)
		if item.GetInput().GetPassedOn() != passed {
			t.Fatalf("fillInput(passed %v) wrote passed_on %v", passed, item.GetInput().GetPassedOn())
		}
		wire, err := proto.Marshal(item)
		if err != nil {
			t.Fatal(err)
		}
		var back pb.ZoneItem
		if err := proto.Unmarshal(wire, &back); err != nil {
			t.Fatal(err)
		}
		m, err := b.decodeItem(&back, "n2")
		if err != nil {
			t.Fatal(err)
		}
		got, wrapped := zone.PassedOn(m)
		if !wrapped {
			got, _ = m.(*msg.Input)
		}
		if wrapped != passed || got == nil || got.Player != 7 || got.EventGen != 3 || len(got.Events) != 1 {
			t.Fatalf("passed_on %v decoded as %T (passed on: %v, input %+v)", passed, m, wrapped, got)
		}
		got.Release()
	}
	// An item reused for a plain Input after a passed-on one is plain.
	item := &pb.ZoneItem{Item: &pb.ZoneItem_Input{Input: &pb.PlayerInput{PassedOn: true}}}
	fillInput(item.GetInput(), msg.NewInput(), 1, false)
	if item.GetInput().GetPassedOn() {
		t.Fatal("a reused item kept passed_on for a plain Input")
	}
}

// Across nodes, the events the old zone passes on while the new owner
// keeps the player's Commit (its lease's hold: actors/zone paused.go) reach
// the new owner before the Commit is taken, marked passed on: they are
// the handed connection's, of the Offer's own generation, and are applied
// when the hold lets the Commit go — not held for a Join that never comes
// (a newer login's of that generation still are), and so dropped at
// earlyGrace (10 s), as before the flag.
func TestPassedOnEventsBeforeAKeptCommitAppliedAtItAcrossNodes(t *testing.T) {
	nodes := lineNodes(t)
	gw := nodes[0]
	old := actor.NewPID(gw.sys.Address(), zone.ActorName("x1z0"))
	for i, tc := range passOnTargets {
		t.Run(tc.name, func(t *testing.T) {
			player, gen := uint64(1990+i), uint64(0xabc+i)
			owner := nodes[tc.node]
			c := newLoginConn(gw.sys, old)
			c.gen = gen
			gw.sys.Root.Send(old, c.join(gw.sys, player))
			c.play(t, gw.sys, player, 1, 3, "join on n2")
			sendInput(gw.sys, old, player, gen, nil, 1, 2)
			waitFor(t, 5*time.Second, "e1, e2 echoed by x1z0", func() bool { return len(c.echoed()) == 2 })
			// The new owner takes the Offer; x1z0, held, has its Accept
			// waiting.
			releaseOwner := holdZone(t, owner)
			gw.sys.Root.Send(old, &zone.Teleport{Entity: player, Pos: tc.into})
			waitFor(t, 5*time.Second, "x1z0 to offer the player", func() bool {
				var ph handoff.Phase
				if err := nodes[1].zones.Inspect(2*time.Second, func(z *sim.Zone) { ph, _, _ = z.Handoffs().Status(player) }); err != nil {
					t.Fatal(err)
				}
				return ph == handoff.PhaseOffering
			})
			releaseOld := holdZone(t, nodes[1])
			releaseOwner()
			reserved := func() bool {
				var ok bool
				if err := owner.zones.Inspect(2*time.Second, func(z *sim.Zone) { _, ok = z.Handoffs().Reserved(player) }); err != nil {
					t.Fatal(err)
				}
				return ok
			}
			waitFor(t, 5*time.Second, tc.zone+" to accept the offer", reserved)
			// The owner's lease held: it keeps the Commit that comes.
			zpid := owner.zones.PID(tc.zone)
			owner.sys.Root.Send(zpid, &zone.Pause{Paused: true, By: zone.PauseLease})
			releaseOld()
			waitFor(t, 5*time.Second, "x1z0 to commit the player", func() bool {
				var ph handoff.Phase
				if err := nodes[1].zones.Inspect(2*time.Second, func(z *sim.Zone) { ph, _, _ = z.Handoffs().Status(player) }); err != nil {
					t.Fatal(err)
				}
				return ph == handoff.PhaseCommitting
			})
			// e3, e4 still sent to x1z0: passed on to the held owner.
			forwarded, inputsIn := nodes[1].m.Forwarded.Load(), owner.bridge.Metrics().RemoteInputs.Load()
			sendInput(gw.sys, old, player, gen, nil, 3, 3)
			sendInput(gw.sys, old, player, gen, nil, 4, 4)
			waitFor(t, 5*time.Second, "x1z0 to pass e3, e4 on", func() bool { return nodes[1].m.Forwarded.Load()-forwarded >= 2 })
			waitFor(t, 5*time.Second, "the owner's node to take them", func() bool {
				return owner.bridge.Metrics().RemoteInputs.Load()-inputsIn >= 2
			})
			if !reserved() {
				t.Fatalf("%s took the player while its lease was held", tc.zone)
			}
			owner.sys.Root.Send(zpid, &zone.Pause{Paused: false, By: zone.PauseLease})
			deadline := time.Now().Add(3 * time.Second)
			for len(c.echoed()) < 4 {
				if time.Now().After(deadline) {
					t.Fatalf("e3, e4 not applied by %s at the Commit after 3 s: echoed %q; %s dropped %d held inputs",
						tc.zone, c.echoed(), tc.zone, owner.m.HeldInputsDropped.Load())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if got, want := c.echoed(), []string{"e1", "e2", "e3", "e4"}; !slices.Equal(got, want) {
				t.Fatalf("echoed %q, want %q: each once, in order", got, want)
			}
		})
	}
}
