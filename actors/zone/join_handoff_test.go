package zone

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// newerLogin starts a second connection of player id (another driver) and
// sends its fresh Join (no record, numbered from 1) to zone.
func (f *fixture) newerLogin(id uint64, zone string) (*driver, *actor.PID) {
	f.t.Helper()
	d := newDriver(nil)
	p := d.add(id, f.world.PID(zone))
	pid := f.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return d }))
	f.sys.Root.Send(f.world.PID(zone), &msg.Join{Player: id, Conn: pid, Ghosts: pid, Views: &p.views, EventGen: 0xb0b})
	return d, pid
}

// newerPlays checks that the newer login (driver d at pid) was not kicked
// and that its first move is applied.
func (f *fixture) newerPlays(d *driver, pid *actor.PID, id uint64) {
	f.t.Helper()
	d.mu.Lock()
	np := d.players[id]
	kicked := np.kicked
	d.mu.Unlock()
	if kicked {
		f.t.Fatal("the newer login was kicked")
	}
	f.sys.Root.Send(pid, &driverStep{dt: 30})
	waitFor(f.t, 3*time.Second, "the newer login's move applied", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return np.applied == 1
	})
}

// waitRouted waits until driver d routes player id to zone (the Redirect
// its old zone sends when it passes the login's Join on: the driver may
// take it after the new owner has taken the player over).
func (f *fixture) waitRouted(d *driver, id uint64, zone string) {
	f.t.Helper()
	var route *actor.PID
	waitFor(f.t, 3*time.Second, "the newer login routed to "+zone, func() bool {
		d.mu.Lock()
		route = d.players[id].route
		d.mu.Unlock()
		return route.Equal(f.world.PID(zone))
	}, func() string { return fmt.Sprintf("routed to %v", route) })
}

// waitTakenHere waits until zone owns player id through conn (a
// takeover for the newer login once the handoff failed).
func (f *fixture) waitTakenHere(id uint64, zone string, conn *actor.PID) {
	f.t.Helper()
	var got string
	waitFor(f.t, 3*time.Second, zone+" to take the player over for the newer login once the offer timed out", func() bool {
		f.inspectZone(zone, func(z *sim.Zone) {
			if e, ok := z.Entity(id); ok && e.Owned {
				got = e.Conn
			}
		})
		return got == msg.ConnName(conn)
	}, func() string { return "owned through " + got })
}

// waitOwnedOnceThrough waits until player id has one owner, through conn.
func (f *fixture) waitOwnedOnceThrough(id uint64, conn *actor.PID) {
	f.t.Helper()
	var c census
	waitFor(f.t, 3*time.Second, "the player owned once through the newer login", func() bool {
		c = f.census()
		return len(c.owners[id]) == 1 && c.players[id].Conn == msg.ConnName(conn)
	}, func() string { return fmt.Sprintf("owners %v, players %+v", c.owners, c.players) })
}

// handoffHeld waits for player id's join to x0z0, holds x1z0 and starts
// the player's handoff there: the Offer waits in x1z0's mailbox, the
// player frozen in x0z0, until the returned release.
func (f *fixture) handoffHeld(id uint64) (release func()) {
	f.t.Helper()
	waitFor(f.t, 2*time.Second, "join", func() bool { return f.world.Metrics().Joins.Load() == 1 })
	release = f.holdZone("x1z0")
	f.sys.Root.Send(f.world.PID("x0z0"), &Teleport{Entity: id, Pos: [3]float32{500, 0, 0}})
	return release
}

// waitOwnedThrough waits until player id is owned in zone alone, through conn.
func (f *fixture) waitOwnedThrough(id uint64, zone string, conn *actor.PID) {
	f.t.Helper()
	var c census
	waitFor(f.t, 3*time.Second, "the player owned in "+zone+" through the newer login", func() bool {
		c = f.census()
		o := c.owners[id]
		return len(o) == 1 && o[0] == zone && c.players[id].Conn == msg.ConnName(conn)
	}, func() string {
		return "owners " + strings.Join(c.owners[id], ",") + ", conn " + c.players[id].Conn
	})
}

// A player logs in afresh (a relaunch: its older connection still joined)
// while its zone is handing it to a neighbour. The zone cannot take it
// over while the player is frozen (nor spawn it: it is here), and it used
// to refuse the Join and kick the client. It must keep the Join until the
// handoff settles: completed, the Join goes on to the new owner, which
// takes the player over for the newer login, and the newer connection is
// redirected there; aborted, the Join is taken here.
func TestLoginDuringAHandoffReachesTheNewOwner(t *testing.T) {
	defer verifyNoLeaks(t)()
	f := startFixture(t, pairWorld(t), slowOffers, nil, at)
	defer f.stop()
	f.join(1, "x0z0")
	release := f.handoffHeld(1)
	defer release()
	newer, newerPID := f.newerLogin(1, "x0z0")
	defer func() { f.sys.Root.StopFuture(newerPID).Wait() }()
	f.syncZone("x0z0")
	f.inspectZone("x0z0", func(z *sim.Zone) {
		if e, ok := z.Entity(1); !ok || !e.Frozen {
			t.Errorf("the player is not frozen in x0z0 when the newer login's Join comes: %+v", e)
		}
	})
	release()
	waitFor(t, 3*time.Second, "x1z0 owning the player", func() bool { return f.world.Metrics().HandoffsIn.Load() == 1 })
	f.waitOwnedThrough(1, "x1z0", newerPID)
	// It plays there: its moves (numbered from 1) are applied.
	f.newerPlays(newer, newerPID, 1)
	if n := f.world.Metrics().JoinsRejected.Load(); n != 0 {
		t.Fatalf("%d joins refused", n)
	}
	f.waitRouted(newer, 1, "x1z0")
}

// The same Join when the handoff fails (the neighbour does not answer
// within OfferTimeout): the player is owned here again and the zone takes
// it over for the newer login, as it would have before the handoff began.
// (Still standing in the neighbour's ground, it is offered again at once:
// the newer login goes with it once the neighbour answers.)
func TestLoginDuringAFailedHandoffIsTakenHere(t *testing.T) {
	defer verifyNoLeaks(t)()
	f := startFixture(t, pairWorld(t), sim.Config{TickRate: 50}, nil, at)
	defer f.stop()
	f.join(1, "x0z0")
	release := f.handoffHeld(1)
	defer release()
	newer, newerPID := f.newerLogin(1, "x0z0")
	defer func() { f.sys.Root.StopFuture(newerPID).Wait() }()
	f.waitTakenHere(1, "x0z0", newerPID)
	release()
	f.waitOwnedOnceThrough(1, newerPID)
	f.newerPlays(newer, newerPID, 1)
}

// A relaunch mid-handoff: the newer login's Join and the older
// connection's Leave (Duplicate: the gateway ends it) both come while the
// player is frozen, in either order. Whether the handoff completes or
// fails, the player plays on through the newer login: its Join is taken
// first (over the older connection's), and the older's Leave is then that
// connection's, not the player's.
func TestRelaunchDuringAHandoffKeepsTheNewerLogin(t *testing.T) {
	for _, tc := range []struct {
		name       string
		leaveFirst bool
		fail       bool // the neighbour does not answer within OfferTimeout
	}{
		{name: "join then leave, handed off"},
		{name: "leave then join, handed off", leaveFirst: true},
		{name: "join then leave, handoff failed", fail: true},
		{name: "leave then join, handoff failed", leaveFirst: true, fail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer verifyNoLeaks(t)()
			cfg := slowOffers
			if tc.fail {
				cfg = sim.Config{TickRate: 50}
			}
			f := startFixture(t, pairWorld(t), cfg, nil, at)
			defer f.stop()
			f.join(1, "x0z0")
			release := f.handoffHeld(1)
			defer release()
			older := &msg.Leave{Player: 1, Conn: f.dpid, Reason: handshake.ReasonDuplicate}
			if tc.leaveFirst {
				f.sys.Root.Send(f.world.PID("x0z0"), older)
			}
			newer, newerPID := f.newerLogin(1, "x0z0")
			defer func() { f.sys.Root.StopFuture(newerPID).Wait() }()
			if !tc.leaveFirst {
				f.sys.Root.Send(f.world.PID("x0z0"), older)
			}
			f.syncZone("x0z0")
			if tc.fail {
				f.waitTakenHere(1, "x0z0", newerPID)
			}
			release()
			f.waitOwnedOnceThrough(1, newerPID)
			if n := f.world.Metrics().Leaves.Load(); n != 0 {
				t.Fatalf("%d leaves: the older connection's Leave took the newer login's player out", n)
			}
			f.newerPlays(newer, newerPID, 1)
			if n := f.world.Metrics().Leaves.Load(); n != 0 {
				t.Fatalf("%d leaves after the newer login's move", n)
			}
		})
	}
}

// A player logs in afresh at the edges of a handoff: after its zone (x0z0)
// has had the Offer accepted and sent the Commit, before the CommitAck
// ("committing"), and once the handoff is done while x0z0 still forwards
// to the new owner ("forwarding"). x0z0 no longer owns the player either
// way; it used to refuse the Join while committing (the client kicked)
// and, while forwarding, spawn the player afresh beside its new owner (two
// owners). The Join must go on to the new owner, which takes the player
// over for the newer login, and the newer connection be redirected there.
func TestLoginAtAHandoffsEdgesReachesTheNewOwner(t *testing.T) {
	for _, tc := range []struct {
		name  string
		phase handoff.Phase
	}{
		{name: "committing", phase: handoff.PhaseCommitting},
		{name: "forwarding", phase: handoff.PhaseForwarding},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer verifyNoLeaks(t)()
			f := startFixture(t, pairWorld(t), slowOffers, nil, at)
			defer f.stop()
			f.join(1, "x0z0")
			release := f.handoffHeld(1)
			defer release()
			releaseFrom := func() {}
			if tc.phase == handoff.PhaseCommitting {
				// x0z0 held, once it has sent the Offer, while x1z0 takes
				// it: the Accept waits in x0z0's mailbox, then the Commit
				// in x1z0's.
				waitFor(t, 3*time.Second, "the player frozen in x0z0", func() bool {
					frozen := false
					f.inspectZone("x0z0", func(z *sim.Zone) {
						e, ok := z.Entity(1)
						frozen = ok && e.Frozen
					})
					return frozen
				})
				releaseFrom = f.holdZone("x0z0")
				defer releaseFrom()
				release()
				release = f.holdZone("x1z0")
				defer release()
			} else {
				release()
				waitFor(t, 3*time.Second, "x1z0 owning the player", func() bool { return f.world.Metrics().HandoffsIn.Load() == 1 })
			}
			newer, newerPID := f.newerLogin(1, "x0z0")
			defer func() { f.sys.Root.StopFuture(newerPID).Wait() }()
			releaseFrom() // the Accept (a handoff message) comes before the Join
			f.syncZone("x0z0")
			f.inspectZone("x0z0", func(z *sim.Zone) {
				if ph, _, _ := z.Handoffs().Status(1); ph != tc.phase {
					t.Errorf("the player is %s in x0z0 when the newer login's Join comes, want %s", ph, tc.phase)
				}
			})
			if n := f.world.Metrics().JoinsRejected.Load(); n != 0 {
				t.Fatalf("%d joins refused", n)
			}
			release()
			f.waitOwnedThrough(1, "x1z0", newerPID)
			f.newerPlays(newer, newerPID, 1)
			f.waitRouted(newer, 1, "x1z0")
			f.waitOwnedOnceThrough(1, newerPID)
		})
	}
}

// The player's own connection joins again from its record (a record
// lookup: the connection's zone went quiet) once its zone has handed it
// away, the record still naming that zone at the epoch before the handoff.
// x0z0 used to refuse the restore (the record is older than the handoff)
// and the connection looked the record up again, ≈ 1 s each time, until
// the new owner's write landed. The Join must go on to the new owner,
// which keeps the player's live state (the record is older).
func TestRejoinAtAHandoffsEdgeFromAnOlderRecord(t *testing.T) {
	defer verifyNoLeaks(t)()
	f := startFixture(t, pairWorld(t), slowOffers, nil, at)
	defer f.stop()
	f.handedToX1z0()
	f.rejoinInX0z0(1)
	f.syncZone("x0z0")
	if n := f.world.Metrics().JoinsRejected.Load(); n != 0 {
		t.Fatalf("%d joins refused", n)
	}
	f.syncZone("x1z0")
	c := f.census()
	if o := c.owners[1]; len(o) != 1 || o[0] != "x1z0" || c.players[1].Conn != msg.ConnName(f.dpid) {
		t.Fatalf("owners %v through %s, want x1z0 alone through %v", o, c.players[1].Conn, f.dpid)
	}
	if pos := c.players[1].State.Pos; pos[0] < 0 {
		t.Fatalf("the player at %v in x1z0: put back from the older record, not its live state", pos)
	}
}

// The player's connection joins again from its record once its zone
// (x0z0) has handed it away, the record newer than that handoff: the new
// owner (x1z0) took the player at epoch 2, its node died, and the record
// (written at that epoch or later) puts the player back in x0z0's ground.
// That restore is not the handoff's: joinAway passes a Join on only with
// a record older than the handoff (TestRejoinAtAHandoffsEdgeFromAnOlderRecord),
// and x0z0 must restore this one as onJoin restores any, at the record's
// position and above its epoch. Passed on, it went to the dead owner and
// the player was owned nowhere.
func TestRejoinAtAHandoffsEdgeFromANewerRecord(t *testing.T) {
	for _, tc := range []struct {
		name  string
		epoch uint32 // the record's; the handoff's new owner took epoch 2
	}{
		{name: "the new owner's epoch", epoch: 2},
		{name: "a later epoch", epoch: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer verifyNoLeaks(t)()
			f := startFixture(t, pairWorld(t), slowOffers, nil, at)
			defer f.stop()
			f.join(1, "x0z0")
			release := f.handoffHeld(1)
			release()
			waitFor(t, 3*time.Second, "x1z0 owning the player", func() bool { return f.world.Metrics().HandoffsIn.Load() == 1 })
			var owned handoff.Epoch
			f.inspectZone("x1z0", func(z *sim.Zone) { _, owned, _ = z.Handoffs().Status(1) })
			if owned != 2 {
				t.Fatalf("x1z0 owns the player at epoch %d, want 2", owned)
			}
			f.world.Remove("x1z0") // its node died
			f.rejoinInX0z0(handoff.Epoch(tc.epoch))
			f.waitTakenHere(1, "x0z0", f.dpid)
			f.waitOwnedOnceThrough(1, f.dpid)
			if n := f.world.Metrics().JoinsRejected.Load(); n != 0 {
				t.Fatalf("%d joins refused", n)
			}
			f.inspectZone("x0z0", func(z *sim.Zone) {
				e, _ := z.Entity(1)
				if e.State.Pos != rejoinedAt {
					t.Errorf("the player at %v in x0z0, want the record's %v", e.State.Pos, rejoinedAt)
				}
				if ph, ep, _ := z.Handoffs().Status(1); ph != handoff.PhaseOwned || ep <= handoff.Epoch(tc.epoch) {
					t.Errorf("the player %s at epoch %d in x0z0, want owned above the record's %d", ph, ep, tc.epoch)
				}
			})
		})
	}
}

// handedToX1z0 joins player 1 in x0z0 and teleports it across the border,
// returning once x1z0 has taken it: x0z0 forwards.
func (f *fixture) handedToX1z0() {
	f.t.Helper()
	f.join(1, "x0z0")
	waitFor(f.t, 2*time.Second, "join", func() bool { return f.world.Metrics().Joins.Load() == 1 })
	f.sys.Root.Send(f.world.PID("x0z0"), &Teleport{Entity: 1, Pos: [3]float32{500, 0, 0}})
	waitFor(f.t, 3*time.Second, "x1z0 owning the player", func() bool { return f.world.Metrics().HandoffsIn.Load() == 1 })
}

// rejoinInX0z0 sends x0z0, while it forwards player 1, the player's Join
// restoring it from a record at epoch, at a position in x0z0's ground.
func (f *fixture) rejoinInX0z0(epoch handoff.Epoch) {
	f.t.Helper()
	f.syncZone("x0z0")
	f.inspectZone("x0z0", func(z *sim.Zone) {
		if ph, _, _ := z.Handoffs().Status(1); ph != handoff.PhaseForwarding {
			f.t.Errorf("the player is %s in x0z0 when the rejoin comes, want forwarding", ph)
		}
	})
	f.drv.mu.Lock()
	views := &f.drv.players[1].views
	f.drv.mu.Unlock()
	f.sys.Root.Send(f.world.PID("x0z0"), &msg.Join{Player: 1, Conn: f.dpid, Ghosts: f.dpid, Views: views,
		Restore: &handoff.Checkpoint{Entity: 1, Epoch: epoch, Control: move.ControlState{Pos: rejoinedAt}, Conn: msg.ConnName(f.dpid)}})
}

// rejoinedAt is where rejoinInX0z0's record puts the player: in x0z0.
var rejoinedAt = [3]float32{-300, 0, 0}
