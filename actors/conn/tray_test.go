package conn

import (
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// recTray is a zone's tray that records each put.
type recTray struct {
	mu     sync.Mutex
	puts   [][]any
	urgent []bool
	closed bool
}

func (t *recTray) Put(_ any, ms []any, urgent bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.puts = append(t.puts, append([]any(nil), ms...))
	t.urgent = append(t.urgent, urgent)
	return true
}

func (t *recTray) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

// TestShardPutsInTrayInOrder: a zone with a tray gets a round's inputs,
// Joins and Leaves in one put at the round's end, in the order made and
// with no message; urgent only when something must not wait for its tick
// (a Leave, an input with events). A closed tray's round goes as
// messages, in order, and the shard looks the tray up again after.
func TestShardPutsInTrayInOrder(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	x := record(t, 1)
	s, _ := benchShard(t, x, 1)
	s.pool.sys = sys
	z := &zoneRec{}
	pz, _ := sys.ProcessRegistry.Add(z, "zone-t")
	tr := &recTray{}
	msg.RegisterTray(sys, pz.Id, tr)
	defer msg.UnregisterTray(sys, pz.Id, tr)
	input := func(player uint64, events bool) *msg.Input {
		in := msg.NewInput()
		in.Player = player
		if events {
			in.Events = append(in.Events, msg.Event{Payload: []byte("e")})
		}
		return in
	}
	player := func(m any) uint64 {
		switch m := m.(type) {
		case *msg.Input:
			return m.Player
		case *msg.Leave:
			return 100 + m.Player
		}
		return 0
	}

	s.toZone(pz, input(1, false))
	s.toZone(actor.NewPID(pz.Address, pz.Id), input(2, false))
	s.sendInputs()
	s.toZone(pz, input(3, false))
	s.toZone(pz, &msg.Leave{Player: 3})
	s.toZone(pz, input(4, true))
	s.sendInputs()
	s.toZone(pz, input(5, true))
	s.sendInputs()
	want := [][]uint64{{1, 2}, {3, 103, 4}, {5}}
	wantUrgent := []bool{false, true, true}
	if len(tr.puts) != len(want) {
		t.Fatalf("%d puts, want %d", len(tr.puts), len(want))
	}
	for i, p := range tr.puts {
		var got []uint64
		for _, m := range p {
			got = append(got, player(m))
		}
		if len(got) != len(want[i]) {
			t.Fatalf("put %d: %v, want %v", i, got, want[i])
		}
		for j := range got {
			if got[j] != want[i][j] {
				t.Fatalf("put %d: %v, want %v", i, got, want[i])
			}
		}
		if tr.urgent[i] != wantUrgent[i] {
			t.Fatalf("put %d urgent %v, want %v", i, tr.urgent[i], wantUrgent[i])
		}
	}
	if len(z.got) != 0 {
		t.Fatalf("the zone got %d messages beside its tray", len(z.got))
	}

	tr.Close()
	s.toZone(pz, input(6, false))
	s.toZone(pz, &msg.Leave{Player: 6})
	s.sendInputs()
	if len(z.got) != 2 || player(z.got[0]) != 6 || player(z.got[1]) != 106 {
		t.Fatalf("after the tray closed the zone got %d messages, want player 6's Input, then its Leave", len(z.got))
	}
	if len(s.trays) != 0 {
		t.Fatalf("%d trays kept after one closed", len(s.trays))
	}
	tr.Close()
	s.toZone(pz, input(8, false)) // alone: no Leave after it sends it
	s.sendInputs()
	if len(z.got) != 3 || player(z.got[2]) != 8 {
		t.Fatalf("a closed tray's lone input: the zone got %d messages, want it as the third", len(z.got))
	}
	tr2 := &recTray{}
	msg.RegisterTray(sys, pz.Id, tr2) // the zone restarted
	s.toZone(pz, input(7, false))
	s.sendInputs()
	if len(tr2.puts) != 1 || player(tr2.puts[0][0]) != 7 {
		t.Fatalf("the new tray got %d puts, want player 7's input", len(tr2.puts))
	}
}
