package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ghostwire/ghostwire/actors/zone"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// A cross-process Commit that reaches a node whose lease of the zone is
// held (its renewal overdue, in flight: Leases.SetHold) is not taken
// while the hold lasts: the node writes no player record for it and its
// zone sends no CommitAck. Both come once the renewal lands and lets the
// zone go. The zone keeps the Commit (actors/zone paused.go); the record
// write is held by the node's write fence (Players.SetFence(Leases.Valid),
// as actors/node wires it), which closes before the hold begins (the
// fence at TTL − TTL/3 since the last renewal, the hold at TTL − TTL/12)
// and opens no earlier than its let-go, so the bridge itself need not
// ask the hold (Bridge onZoneBatchIn). Real nodes: an embedded
// nats-server, protoactor, the zones, bridges, leases and record writers.
func TestHeldNodeTakesNoCommitUntilLetGo(t *testing.T) {
	const ttl = time.Minute // the renewal loops' own ticks (TTL/6) come after the test
	nc := natsServer(t)
	w, err := world.Grid("pair", 2, 1, 1000, [2]float64{-1000, -500})
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := ghost.NewRegistry(ghost.DefaultBounds())
	_ = reg.Register(ghost.PlayerClass(nil), ghost.NPCClass(nil))
	start := time.Now()
	now := func() time.Duration { return time.Since(start) }
	spawn := func(id uint64, r world.Rect) [3]float32 {
		return [3]float32{float32(r.Min[0]+r.Max[0]) / 2, 0, float32(r.Min[1]+r.Max[1]) / 2}
	}
	// n2's leases run on a clock the test moves, their renewals of x1z0
	// through a KV that can hold a renewal's answer.
	clock := new(atomic.Int64)
	t0 := time.Unix(1_000_000, 0)
	var hkv *holdKV
	holds := make(chan bool, 4)
	var players *Players
	var playersKV jetstream.KeyValue
	mk := func(name, own string) *benchNode {
		conn, err := nats.Connect(nc.ConnectedUrl())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		n := &benchNode{sys: quietSystem(), m: new(zone.Metrics)}
		var kv jetstream.KeyValue = zonesBucket(t, conn, ttl)
		if name == "n2" {
			hkv = newHoldKV(kv, own)
			kv = hkv
		}
		if n.leases, err = NewLeases(context.Background(), kv, name, ttl, nil, nil); err != nil {
			t.Fatal(err)
		}
		cfg := Config{World: "pair", Node: name, NC: conn, Sys: n.sys, Leases: n.leases, Registry: reg, Now: now}
		if name == "n2" {
			n.leases.now = func() time.Time { return t0.Add(time.Duration(clock.Load())) }
			js, _ := jetstream.New(conn)
			if playersKV, err = js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "players"}); err != nil {
				t.Fatal(err)
			}
			players = NewPlayers(playersKV, name, nil)
			players.SetFence(n.leases.Valid)
			players.SetFenceWait(n.leases.WaitValid)
			t.Cleanup(players.Close)
			cfg.Players = players
			sys := n.sys
			n.leases.SetHold(func(z string, on bool) { // as actors/node membership.hold
				sys.Root.Send(actor.NewPID(sys.Address(), zone.ActorName(z)), &zone.Pause{Paused: on, By: zone.PauseLease})
				holds <- on
			})
		}
		if _, err := n.leases.Claim(context.Background(), own); err != nil {
			t.Fatal(err)
		}
		if n.zones, err = zone.StartZones(n.sys, w, sim.Config{}, zone.Params{Now: now, Metrics: n.m, Spawn: spawn}, []string{own}); err != nil {
			t.Fatal(err)
		}
		if n.bridge, err = NewBridge(cfg); err != nil {
			t.Fatal(err)
		}
		if err := n.bridge.Serve(own); err != nil {
			t.Fatal(err)
		}
		other := map[string]string{"x0z0": "x1z0", "x1z0": "x0z0"}[own]
		if _, err := n.sys.Root.SpawnNamed(n.bridge.ProxyProps(other), zone.ActorName(other)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			n.bridge.Close()
			n.zones.Stop()
			n.sys.Shutdown()
			n.leases.Close(context.Background())
		})
		return n
	}
	n1, n2 := mk("n1", "x0z0"), mk("n2", "x1z0")
	waitFor(t, 5*time.Second, "both nodes to see both owners", func() bool {
		_, a := n1.leases.Owner("x1z0")
		_, b := n2.leases.Owner("x0z0")
		return a && b
	})
	const player = 77
	record := func() string {
		e, err := playersKV.Get(context.Background(), PlayerKey(player))
		if err != nil {
			return ""
		}
		return string(e.Value())
	}
	phaseAt := func(n *benchNode) (ph handoff.Phase, owned bool) {
		if err := n.zones.Inspect(2*time.Second, func(z *sim.Zone) {
			ph, _, _ = z.Handoffs().Status(player)
			owned = z.Handoffs().Owns(player)
		}); err != nil {
			t.Fatal(err)
		}
		return ph, owned
	}

	x0 := n1.zones.PID("x0z0")
	c := newLoginConn(n1.sys, x0)
	n1.sys.Root.Send(x0, c.join(n1.sys, player))
	c.play(t, n1.sys, player, 1, 3, "join on n1")
	// x1z0 takes the Offer; x0z0, held, has its Accept waiting.
	releaseX1 := holdZone(t, n2)
	n1.sys.Root.Send(x0, &zone.Teleport{Entity: player, Pos: [3]float32{500, 0, 0}})
	waitFor(t, 5*time.Second, "x0z0 to offer the player", func() bool {
		ph, _ := phaseAt(n1)
		return ph == handoff.PhaseOffering
	})
	releaseX0 := holdZone(t, n1)
	releaseX1()
	waitFor(t, 5*time.Second, "x1z0 to accept the offer", func() bool {
		var ok bool
		if err := n2.zones.Inspect(2*time.Second, func(z *sim.Zone) { _, ok = z.Handoffs().Reserved(player) }); err != nil {
			t.Fatal(err)
		}
		return ok
	})
	// n2's renewal of x1z0 overdue, in flight: the zone held.
	hkv.armed.Store(true)
	clock.Store(int64(ttl - ttl/12 + time.Second))
	n2.leases.RenewNow()
	select {
	case on := <-holds:
		if !on {
			t.Fatal("let go before any hold")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("x1z0 not held 5 s after its renewal went overdue")
	}
	<-hkv.applied
	// The Commit comes: no record, no CommitAck while held.
	releaseX0()
	waitFor(t, 5*time.Second, "the Commit's record write to wait for the lease", func() bool {
		if r := record(); r != "" {
			t.Fatalf("the held node wrote the player's record: %q", r)
		}
		return players.FenceWaits.Load() >= 1
	})
	if r := record(); r != "" {
		t.Fatalf("the held node wrote the player's record: %q", r)
	}
	if ph, _ := phaseAt(n1); ph != handoff.PhaseCommitting {
		t.Fatalf("x0z0 is %v while the new owner is held: want Committing (no CommitAck)", ph)
	}
	if _, owned := phaseAt(n2); owned {
		t.Fatal("the held x1z0 took the player")
	}
	// The renewal lands: the zone let go, the record written, the player
	// taken and acknowledged.
	close(hkv.release)
	select {
	case on := <-holds:
		if on {
			t.Fatal("held twice")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("x1z0 not let go 5 s after its renewal landed")
	}
	waitFor(t, 10*time.Second, "x1z0 to take the player and x0z0 to see its CommitAck", func() bool {
		_, owned := phaseAt(n2)
		ph, _ := phaseAt(n1)
		return owned && ph != handoff.PhaseCommitting && record() != ""
	})
}
