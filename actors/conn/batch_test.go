package conn

import (
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// zoneRec is a zone as a process: it records what it is sent, in order.
type zoneRec struct {
	mu  sync.Mutex
	got []any
}

func (z *zoneRec) SendUserMessage(_ *actor.PID, m any) {
	z.mu.Lock()
	z.got = append(z.got, m)
	z.mu.Unlock()
}
func (z *zoneRec) SendSystemMessage(*actor.PID, any) {}
func (z *zoneRec) Stop(*actor.PID)                   {}

// TestInputsBatchedPerZone: a shard's inputs for one zone in one round go
// as one *msg.Inputs (a lone input as itself), at most maxBatch at a time;
// any other message to a zone first sends the inputs waiting for it, so a
// zone sees a connection's Leave after its inputs.
func TestInputsBatchedPerZone(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	x := record(t, 1)
	s, _ := benchShard(t, x, 1)
	s.pool.sys = sys
	za, zb := &zoneRec{}, &zoneRec{}
	pa, _ := sys.ProcessRegistry.Add(za, "zone-a")
	pb, _ := sys.ProcessRegistry.Add(zb, "zone-b")
	input := func(player uint64) *msg.Input {
		in := msg.NewInput()
		in.Player = player
		return in
	}
	s.toZone(pa, input(1))
	s.toZone(actor.NewPID(pa.Address, pa.Id), input(2)) // another PID of the same zone
	s.toZone(pb, input(3))
	s.toZone(pa, &msg.Leave{Player: 1})
	s.toZone(pa, input(4))
	s.sendInputs()
	players := func(m any) []uint64 {
		switch m := m.(type) {
		case *msg.Inputs:
			var ids []uint64
			for _, in := range m.List {
				ids = append(ids, in.Player)
			}
			return ids
		case *msg.Input:
			return []uint64{m.Player}
		}
		return nil
	}
	if len(za.got) != 3 {
		t.Fatalf("zone a got %d messages, want the batch of 1 and 2, the Leave, 4", len(za.got))
	}
	if b, ok := za.got[0].(*msg.Inputs); !ok || len(b.List) != 2 || b.List[0].Player != 1 || b.List[1].Player != 2 {
		t.Fatalf("zone a's first message: %T %v, want Inputs of players 1, 2", za.got[0], players(za.got[0]))
	}
	if _, ok := za.got[1].(*msg.Leave); !ok {
		t.Fatalf("zone a's second message: %T, want the Leave after the inputs before it", za.got[1])
	}
	if in, ok := za.got[2].(*msg.Input); !ok || in.Player != 4 {
		t.Fatalf("zone a's third message: %T %v, want player 4's lone Input", za.got[2], players(za.got[2]))
	}
	if len(zb.got) != 1 || players(zb.got[0])[0] != 3 {
		t.Fatalf("zone b got %d messages, want player 3's Input", len(zb.got))
	}
	if len(s.zin) != 0 {
		t.Fatalf("%d zones still waiting after sendInputs", len(s.zin))
	}

	// A backlog goes as batches of at most maxBatch.
	za.got = nil
	for i := range maxBatch + 5 {
		s.toZone(pa, input(uint64(i+1)))
	}
	s.sendInputs()
	if len(za.got) != 2 || len(players(za.got[0])) != maxBatch || len(players(za.got[1])) != 5 {
		t.Fatalf("backlog of %d: %d messages", maxBatch+5, len(za.got))
	}
	if players(za.got[1])[0] != maxBatch+1 {
		t.Fatal("the backlog's second batch is out of order")
	}
}
