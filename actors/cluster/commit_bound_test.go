package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// What waits behind a Commit's record write is bounded (maxBehind a
// player) and never overtakes the Commit: full, the oldest Teleport held
// gives way, else the newcomer is dropped, both counted. Before, anything
// past the bound went straight to the zone, ahead of the Commit (a Leave
// dropped by a zone that did not own the player yet, a Join spawning it
// afresh).
func TestHeldBehindACommitBoundedInOrder(t *testing.T) {
	sys := quietSystem()
	t.Cleanup(sys.Shutdown)
	b := &Bridge{cfg: Config{World: "w", Node: "n1", Sys: sys, MaxBatch: 512, Now: func() time.Duration { return time.Second }},
		m: new(Metrics), log: discard(), served: map[string]*nats.Subscription{}, links: map[string]*link{},
		locals: map[uint64]*msg.Join{}, warned: map[string]bool{}, bases: map[uint64]*viewBase{},
		outs: map[uint64]*actor.PID{}, ins: map[uint64]*arqIn{}}
	z := &probe{}
	if _, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return z }), zone.ActorName("z")); err != nil {
		t.Fatal(err)
	}
	tp := func(player uint64, i int) *zone.Teleport {
		return &zone.Teleport{Entity: player, Pos: [3]float32{float32(i)}}
	}
	leave := func(player uint64, i int) *msg.Leave {
		return &msg.Leave{Player: player, Reason: handshake.ReasonClientQuit, Conn: &actor.PID{Id: fmt.Sprint("c", i)}}
	}
	for _, tc := range []struct {
		name    string
		send    func(player uint64) []any // in the order they come
		kept    func(sent []any) []any    // behind the Commit, in order
		dropped uint64
	}{
		{
			name: "full: the oldest Teleports give way",
			send: func(p uint64) []any {
				s := []any{&msg.Join{Player: p}}
				for i := 1; i <= 14; i++ {
					s = append(s, tp(p, i))
				}
				return append(s, leave(p, 1), tp(p, 15), leave(p, 2))
			},
			kept:    func(s []any) []any { return append([]any{s[0]}, s[3:]...) }, // Teleports 1 and 2 gave way
			dropped: 2,
		},
		{
			name: "full of Joins and Leaves: the newcomer dropped",
			send: func(p uint64) []any {
				var s []any
				for i := range maxBehind {
					s = append(s, leave(p, i))
				}
				return append(s, &msg.Join{Player: p}, tp(p, 1))
			},
			kept:    func(s []any) []any { return s[:maxBehind] },
			dropped: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			player := uint64(len(tc.name))
			b.commits = map[uint64]recordCommit{player: {zone: "z", epoch: 3, at: time.Now()}}
			dropped, before := b.m.DroppedBehindCommit.Load(), z.count()
			items := tc.send(player)
			for i, m := range items {
				if !b.holdBehindCommit("z", m) {
					t.Fatalf("item %d (%T) not held: it goes to the zone ahead of the Commit", i, m)
				}
			}
			want := tc.kept(items)
			if d := b.m.DroppedBehindCommit.Load() - dropped; d != tc.dropped {
				t.Errorf("%d items dropped, want %d", d, tc.dropped)
			}
			if n := z.count() - before; n != 0 {
				t.Fatalf("%d items reached the zone while its Commit waited for the record", n)
			}
			env := &zone.HandoffEnvelope{Msg: handoff.Msg{Kind: handoff.KindCommit, Entity: player, Epoch: 2}}
			b.commitDone(player, "z", 3, true, env)
			waitFor(t, 2*time.Second, "the Commit and what waited behind it", func() bool { return z.count()-before >= 1+len(want) })
			z.mu.Lock()
			got := append([]any(nil), z.got[before:]...)
			z.mu.Unlock()
			if len(got) != 1+len(want) || got[0] != env {
				t.Fatalf("the zone got %d messages, the first %T; want the Commit, then %d", len(got), got[0], len(want))
			}
			for i := range want {
				if got[1+i] != want[i] {
					t.Errorf("behind the Commit, item %d is %#v, want %#v", i, got[1+i], want[i])
				}
			}
		})
	}
}

// A newer Commit of a player that takes the place of one still waiting
// for its record write keeps what waited behind that one, and delivers it
// behind itself, wherever it takes the player. Before, it went on at once
// to the first Commit's zone, which did not own the player.
func TestHeldBehindAReplacedCommitGoesWithTheNewer(t *testing.T) {
	sys := quietSystem()
	t.Cleanup(sys.Shutdown)
	b := &Bridge{cfg: Config{World: "w", Node: "n1", Sys: sys, MaxBatch: 512, Now: func() time.Duration { return time.Second }},
		m: new(Metrics), log: discard(), warned: map[string]bool{}}
	zones := map[string]*probe{"z": {}, "y": {}}
	for id, p := range zones {
		if _, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return p }), zone.ActorName(id)); err != nil {
			t.Fatal(err)
		}
	}
	for i, to := range []string{"z", "y"} {
		t.Run("to "+to, func(t *testing.T) {
			player := uint64(10 + i)
			first := &zone.HandoffEnvelope{Msg: handoff.Msg{Kind: handoff.KindCommit, Entity: player, Epoch: 2}}
			if got := b.commitFor(player, "z", 3, first); got != commitNew {
				t.Fatalf("first Commit: %d, want commitNew", got)
			}
			j := &msg.Join{Player: player}
			if !b.holdBehindCommit("z", j) {
				t.Fatal("the Join is not held behind the first Commit")
			}
			zc, yc := zones["z"].count(), zones["y"].count()
			newer := &zone.HandoffEnvelope{Msg: handoff.Msg{Kind: handoff.KindCommit, Entity: player, Epoch: 5}}
			if got := b.commitFor(player, to, 6, newer); got != commitNew {
				t.Fatalf("newer Commit: %d, want commitNew", got)
			}
			b.commitDone(player, "z", 3, true, first) // the first one's write: its entry is gone
			b.commitDone(player, to, 6, true, newer)
			// Root.Send posts at once: a marker sent now comes after
			// whatever commitDone sent.
			for id := range zones {
				sys.Root.Send(actor.NewPID(sys.Address(), zone.ActorName(id)), &marker{n: i})
			}
			waitFor(t, 2*time.Second, "the markers", func() bool { return zones["z"].marked(i) && zones["y"].marked(i) })
			p, before := zones[to], map[string]int{"z": zc, "y": yc}[to]
			p.mu.Lock()
			got := append([]any(nil), p.got[before:len(p.got)-1]...)
			p.mu.Unlock()
			if len(got) != 2 || got[0] != newer || got[1] != j {
				t.Fatalf("zone %s got %d messages (%v), want the newer Commit, then the Join", to, len(got), got)
			}
			if other := map[string]string{"z": "y", "y": "z"}[to]; zones[other].count() != map[string]int{"z": zc, "y": yc}[other]+1 {
				t.Fatalf("zone %s, whose Commit was replaced, got something", other)
			}
		})
	}
}

// marker is a message a test sends a probe after the ones it waits for.
type marker struct{ n int }

// marked reports whether p's last message is marker n.
func (p *probe) marked(n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.got) == 0 {
		return false
	}
	m, ok := p.got[len(p.got)-1].(*marker)
	return ok && m.n == n
}
