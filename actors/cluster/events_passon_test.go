package cluster

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// appliedLog is the game of every zone of every node in a test: it
// records each echo-lane ordered event a zone applied, in the order they
// were applied across the nodes, as "payload@zone(owner)" — "(NOT
// OWNER)" when the zone did not own the player then.
type appliedLog struct {
	mu  sync.Mutex
	got []string
}

func (l *appliedLog) HandleEvent(c *zone.EventContext, player uint64, e *msg.Event) {
	if e.Class != event.Ordered || e.Lane != zone.EchoLane {
		return
	}
	z := c.Zone()
	owner := "owner"
	if !z.Handoffs().Owns(player) {
		owner = "NOT OWNER"
	}
	l.mu.Lock()
	l.got = append(l.got, fmt.Sprintf("%s@%s(%s)", e.Payload, z.ID(), owner))
	l.mu.Unlock()
}

func (l *appliedLog) applied() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// waitApplied waits until log holds n events after its first base, at
// most 5 s, and returns those; it fails saying what was applied and what
// the zones counted dropped.
func (l *appliedLog) waitApplied(t *testing.T, nodes [3]*benchNode, base, n int, what string) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := l.applied()[base:]
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			var dropped []string
			for i, nd := range nodes {
				dropped = append(dropped, fmt.Sprintf("n%d away %d, early %d, duplicate %d", i+1,
					nd.m.EventsAwayDropped.Load(), nd.m.EventsEarlyDropped.Load(), nd.m.EventsDuplicate.Load()))
			}
			t.Fatalf("timed out after 5s waiting for %s: %d events applied %q, want %d (dropped: %s)",
				what, len(got), got, n, strings.Join(dropped, "; "))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sendInput sends to, from gateway sys, one Input of player's in event
// numbering gen: moves numbered seqs, and echo-lane events numbered
// from..thru ("e<n>"), as a connection does.
func sendInput(sys *actor.ActorSystem, to *actor.PID, player, gen uint64, seqs []uint64, from, thru uint64) {
	in := msg.NewInput()
	in.Player, in.EventGen = player, gen
	for _, s := range seqs {
		in.Moves = append(in.Moves, move.Move{Seq: s, Dt: 1, Forward: 1})
	}
	for s := from; s <= thru; s++ {
		in.AddSeq(event.Ordered, zone.EchoLane, 0, fmt.Appendf(nil, "e%d", s), s)
	}
	sys.Root.Send(to, in)
}

// holdZone blocks node n's zone (an Inspect that waits) until the
// returned release is called; release also runs at the test's end.
func holdZone(t *testing.T, n *benchNode) (release func()) {
	t.Helper()
	var zid string
	if err := n.zones.Inspect(2*time.Second, func(z *sim.Zone) { zid = z.ID() }); err != nil {
		t.Fatal(err)
	}
	in, out := make(chan struct{}), make(chan struct{})
	fut := zone.RequestInspect(n.sys.Root, actor.NewPID(n.sys.Address(), zone.ActorName(zid)),
		func(*sim.Zone) { close(in); <-out }, 10*time.Second)
	select {
	case <-in:
	case <-time.After(5 * time.Second):
		t.Fatalf("zone %s not held", zid)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(out)
			if _, err := msg.Await(fut); err != nil {
				t.Errorf("zone %s: %v", zid, err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

func appliedBy(zoneID string, from, thru uint64) []string {
	var s []string
	for i := from; i <= thru; i++ {
		s = append(s, fmt.Sprintf("e%d@%s(owner)", i, zoneID))
	}
	return s
}

// A player's client, on gateway n1, sends ordered events to its zone,
// x1z0 on n2, all through a handoff of the player to a zone on another
// node, and goes on sending them to x1z0 after it (its Redirect not seen
// yet): x1z0 applies those it gets while it owns the player (frozen by
// its open offer too, their fence carried in the Commit), and passes on
// those it gets after, through n2's proxy and the new owner node's bridge,
// in the same ordered stream as the Commit (actors/zone eventsAway). Each
// must be applied exactly once, in order, by the zone that owns the
// player then: none by x1z0 after it handed the player away, and those
// passed on by the new owner, inside its fence, so that the client's
// resend of what it has not seen reported (docs/protocol.md §7.20) adds
// only what is new. Without the passing on, x1z0 dropped them
// (EventsAwayDropped) and only the resend brought them, minutes of a
// stale route later in a real client; applied at x1z0 (before the fence),
// they were applied outside the owner and again by it on the resend.
func TestEventsPassedOnAcrossNodesAppliedOnceByTheOwner(t *testing.T) {
	log := &appliedLog{}
	nodes := lineNodesWith(t, func(_ int, p *zone.Params, _ *Config) { p.Events = log })
	gw := nodes[0]
	old := actor.NewPID(gw.sys.Address(), zone.ActorName("x1z0"))
	for i, tc := range passOnTargets {
		t.Run(tc.name, func(t *testing.T) {
			player, gen := uint64(950+i), uint64(0xe5e5+i)
			base := len(log.applied())
			c := newLoginConn(gw.sys, old)
			c.gen = gen
			gw.sys.Root.Send(old, c.join(gw.sys, player))
			c.play(t, gw.sys, player, 1, 3, "join on n2")
			// Owned: e1, e2 applied by x1z0.
			sendInput(gw.sys, old, player, gen, nil, 1, 2)
			// The handoff starts, the new owner's zone held: x1z0 keeps
			// the player frozen and applies e3, e4, in the same stream
			// behind the Teleport.
			release := holdZone(t, nodes[tc.node])
			gw.sys.Root.Send(old, &zone.Teleport{Entity: player, Pos: tc.into})
			sendInput(gw.sys, old, player, gen, []uint64{4}, 3, 3)
			sendInput(gw.sys, old, player, gen, nil, 4, 4)
			log.waitApplied(t, nodes, base, 4, "e1–e4 at x1z0")
			if e, owned := entityIn(t, nodes[1], player); !owned || !e.Frozen {
				t.Fatalf("the player is not frozen in x1z0 while the new owner is held: %+v", e)
			}
			release()
			waitFor(t, 5*time.Second, tc.zone+" to own the player", func() bool {
				_, owned := entityIn(t, nodes[tc.node], player)
				return owned
			})
			// Handed away: the older route's e5–e7 go on to the owner.
			forwarded := nodes[1].m.Forwarded.Load()
			sendInput(gw.sys, old, player, gen, []uint64{5, 6}, 5, 6)
			sendInput(gw.sys, old, player, gen, nil, 7, 7)
			got := log.waitApplied(t, nodes, base, 7, "e5–e7 passed on to "+tc.zone)
			want := append(appliedBy("x1z0", 1, 4), appliedBy(tc.zone, 5, 7)...)
			if !slices.Equal(got, want) {
				t.Fatalf("applied %q, want %q: each once, in order, by the zone owning the player", got, want)
			}
			if n := nodes[1].m.Forwarded.Load() - forwarded; n < 2 {
				t.Errorf("x1z0 passed on %d Inputs, want 2 at least", n)
			}
			// The client, routed to the new owner, sends again what it
			// has not seen reported applied, and e8: the fence the Commit
			// carried and the passed-on events joined drops e3–e7.
			dups := nodes[tc.node].m.EventsDuplicate.Load()
			to := actor.NewPID(gw.sys.Address(), zone.ActorName(tc.zone))
			sendInput(gw.sys, to, player, gen, nil, 3, 8)
			got = log.waitApplied(t, nodes, base, 8, "e8 at "+tc.zone)
			if want = append(want, appliedBy(tc.zone, 8, 8)...); !slices.Equal(got, want) {
				t.Fatalf("after the resend of e3–e8 applied %q, want %q", got, want)
			}
			if d := nodes[tc.node].m.EventsDuplicate.Load() - dups; d != 5 {
				t.Errorf("%s dropped %d duplicates of the resend, want 5 (e3–e7)", tc.zone, d)
			}
			for i, nd := range nodes {
				if a, e := nd.m.EventsAwayDropped.Load(), nd.m.EventsEarlyDropped.Load(); a+e != 0 {
					t.Errorf("n%d dropped %d events of a player it did not own, %d of one it had reserved", i+1, a, e)
				}
			}
			if got := log.applied(); len(got) != base+8 {
				t.Errorf("%d more events applied after the resend: %q", len(got)-base-8, got[base+8:])
			}
		})
	}
}

// Ordered events the old zone passes on while the new owner's node is
// still writing the Commit's player record (a busy KV) reach that node
// behind the Commit, in the same ordered stream, and wait there with it
// (Bridge holdBehindCommit): sent on to the zone before the Commit, the
// zone, not owning the player yet, would drop them (EventsAwayDropped).
// Each is applied once, in order, by the new owner (its echo comes back
// from there, none from x1z0), and the client's resend after its Route
// adds only what is new.
func TestEventsPassedOnBehindASlowCommitAppliedByTheOwner(t *testing.T) {
	for i, tc := range passOnTargets {
		t.Run(tc.name, func(t *testing.T) {
			player, gen := uint64(970+i), uint64(0xc0de+i)
			s := lineNodesSlowCommit(t, tc.node, player)
			nodes, gw := s.nodes, s.nodes[0]
			x1z0 := actor.NewPID(gw.sys.Address(), zone.ActorName("x1z0"))
			c := newLoginConn(gw.sys, x1z0)
			c.gen = gen
			s.commitHeld(t, c, player, tc.into)
			sendInput(gw.sys, x1z0, player, gen, []uint64{4}, 1, 2)
			sendInput(gw.sys, x1z0, player, gen, nil, 3, 3)
			s.open(t, player, tc.zone)
			waitEchoed := func(n int, what string) []string {
				t.Helper()
				deadline := time.Now().Add(5 * time.Second)
				for {
					got := c.echoed()
					if len(got) >= n {
						return got
					}
					if time.Now().After(deadline) {
						t.Fatalf("timed out after 5s waiting for %s: echoed %q; x1z0 echoed %d, dropped %d as away; %s echoed %d, dropped %d as away; %d items held behind the Commit",
							what, got, nodes[1].m.EventsOut.Load(), nodes[1].m.EventsAwayDropped.Load(), tc.zone,
							nodes[tc.node].m.EventsOut.Load(), nodes[tc.node].m.EventsAwayDropped.Load(),
							nodes[s.at].bridge.Metrics().HeldBehindCommit.Load())
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			if got := waitEchoed(3, "e1–e3 applied by "+tc.zone); !slices.Equal(got, []string{"e1", "e2", "e3"}) {
				t.Fatalf("echoed %q, want [e1 e2 e3]: each once, in order", got)
			}
			if n := nodes[1].m.EventsOut.Load(); n != 0 {
				t.Errorf("x1z0 echoed %d events: applied after it handed the player away", n)
			}
			if held := nodes[s.at].bridge.Metrics().HeldBehindCommit.Load(); held < 2 {
				t.Errorf("%d items held behind the Commit, want the 2 Inputs at least", held)
			}
			// The client, routed to the new owner, resends e1–e3 and e4.
			c.routedTo(t, tc.zone, "the client")
			dups := nodes[tc.node].m.EventsDuplicate.Load()
			sendInput(gw.sys, actor.NewPID(gw.sys.Address(), zone.ActorName(tc.zone)), player, gen, nil, 1, 4)
			if got := waitEchoed(4, "e4"); !slices.Equal(got, []string{"e1", "e2", "e3", "e4"}) {
				t.Fatalf("after the resend echoed %q, want [e1 e2 e3 e4]", got)
			}
			if d := nodes[tc.node].m.EventsDuplicate.Load() - dups; d != 3 {
				t.Errorf("%s dropped %d duplicates of the resend, want 3 (e1–e3)", tc.zone, d)
			}
			for i, nd := range nodes {
				if a := nd.m.EventsAwayDropped.Load(); a != 0 {
					t.Errorf("n%d dropped %d events of a player it did not own", i+1, a)
				}
			}
		})
	}
}
