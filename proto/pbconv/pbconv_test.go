package pbconv

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

func randMove(r *rand.Rand, seq uint64) move.Move {
	return move.Move{Seq: seq, Dt: uint8(r.IntN(256)), Forward: int8(r.IntN(255) - 127), Strafe: int8(r.IntN(255) - 127),
		Yaw: uint16(r.IntN(65536)), Pitch: int16(r.IntN(2*move.PitchMax+1) - move.PitchMax), Buttons: uint16(r.IntN(65536)),
		CRC: r.Uint32(), HasCRC: r.IntN(2) == 0}
}

func randControl(r *rand.Rand) move.ControlState {
	s := move.ControlState{Pos: [3]float32{r.Float32() * 1000, r.Float32(), -r.Float32() * 1000}, Vel: [3]float32{r.Float32(), 0, -r.Float32()}, Yaw: r.Float32()}
	s.PayloadLen = uint8(r.IntN(move.MaxPayload + 1))
	for i := range s.PayloadLen {
		s.Payload[i] = byte(r.IntN(256))
	}
	return s
}

func randMsg(r *rand.Rand) handoff.Msg {
	m := handoff.Msg{Kind: handoff.Kind(1 + r.IntN(8)), Entity: r.Uint64(), Epoch: handoff.Epoch(r.Uint64()), From: "x0z0", To: "x1z0",
		Sent: time.Duration(r.Int64()), Reason: handoff.Reason(r.IntN(6))}
	if r.IntN(2) == 0 {
		s := &handoff.Snapshot{Entity: m.Entity, Kind: uint8(r.IntN(2)), Control: randControl(r), LastApplied: r.Uint64(),
			Health: r.Int32(), Flags: r.Uint32(), Name: "walker", Extra: [4]uint32{1, 2, 3, r.Uint32()},
			Rng: [2]uint64{r.Uint64(), 0}, Heading: r.Float32(), Speed: r.Float32(), TurnIn: r.Uint32(), Conn: "conn-1"}
		for range r.IntN(5) {
			s.Interest = append(s.Interest, r.Uint64())
		}
		m.State = s
	}
	for i := range r.IntN(6) {
		m.Moves = append(m.Moves, randMove(r, uint64(i+1)))
	}
	return m
}

func TestHandoffRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		m := randMsg(r)
		data, err := proto.Marshal(HandoffToProto(&m))
		if err != nil {
			t.Fatal(err)
		}
		var p pb.HandoffMessage
		if err := proto.Unmarshal(data, &p); err != nil {
			t.Fatal(err)
		}
		got, err := HandoffFromProto(&p)
		if err != nil {
			t.Fatalf("decode %v: %v", m.String(), err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip:\n got %+v %+v\nwant %+v %+v", got, got.State, m, m.State)
		}
	}
}

// A handoff message with its snapshot (a payload, three interest ids)
// and five moves converts in six allocations: the message, the snapshot's
// messages together, its payload and interest, the moves' array and
// their pointers — not one for every move and vector (twelve before).
func TestHandoffToProtoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m := randMsg(r)
	m.State = &handoff.Snapshot{Entity: 7, Control: randControl(r), Name: "walker", Interest: []uint64{1, 2, 3}, Conn: "conn-1"}
	m.State.Control.PayloadLen = 4
	m.Moves = m.Moves[:0]
	for i := range 5 {
		m.Moves = append(m.Moves, randMove(r, uint64(i+1)))
	}
	if n := testing.AllocsPerRun(100, func() { _ = HandoffToProto(&m) }); n > 6 {
		t.Fatalf("HandoffToProto: %.0f allocations, want at most 6", n)
	}
}

// Floats travel bit-exactly, so a client's CRC still matches a state that
// crossed processes.
func TestControlStateBitExact(t *testing.T) {
	s := move.ControlState{Pos: [3]float32{math.Float32frombits(0x3f800001), -0, math.SmallestNonzeroFloat32}, Yaw: -1.5}
	got, err := ControlFromProto(ControlToProto(s))
	if err != nil || got.CRC() != s.CRC() {
		t.Fatalf("CRC %x != %x (%v)", got.CRC(), s.CRC(), err)
	}
}

func TestReplicaBatchRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	b := &sim.ReplicaBatch{From: "a", To: "b", Tick: 99, Sent: 123 * time.Millisecond}
	for i := range 20 {
		b.Entities = append(b.Entities, sim.Replica{ID: uint64(i), Kind: uint8(i % 2), Epoch: handoff.Epoch(i), State: randControl(r),
			Health: int32(i), Flags: 7, Name: ghost.MustName("npc"), Extra: [4]uint32{uint32(i)}})
	}
	data, _ := proto.Marshal(ReplicaBatchToProto(b))
	var p pb.ReplicaBatch
	if err := proto.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	got, err := ReplicaBatchFromProto(&p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, b) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, b)
	}
}

func registry(t testing.TB) *ghost.Registry {
	reg, err := ghost.NewRegistry(ghost.DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(ghost.PlayerClass(nil), ghost.NPCClass(nil)); err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestViewRoundTrip(t *testing.T) {
	reg := registry(t)
	pc, _ := reg.Lookup(ghost.PlayerClassID)
	nc, _ := reg.Lookup(ghost.NPCClassID)
	entries := []ghost.ViewEntry{
		{Entity: 1, Class: pc, Priority: 0.5, State: ghost.State{Pos: [3]float64{1, 2, 3}, Vel: [3]float64{4, 5, 6}, Yaw: 0.25, Health: 9, Flags: 3, Name: ghost.MustName("ann"), Extra: [4]uint32{1, 2, 3, 4}}},
		{Entity: 2, Class: nc, Priority: 1, ChangedMask: 5},
	}
	data, _ := proto.Marshal(ViewToProto(7, "x0z0", 11, time.Second, 3, entries))
	var p pb.ViewUpdate
	if err := proto.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	if p.Player != 7 || p.Zone != "x0z0" || p.Tick != 11 || p.Epoch != 3 {
		t.Fatalf("header %+v", &p)
	}
	got, err := ViewEntriesFromProto(nil, &p, reg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, entries) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, entries)
	}
}

func TestDecodeRejects(t *testing.T) {
	reg := registry(t)
	cases := []struct {
		name  string
		field string
		err   error
	}{
		{"move forward", "move.forward", func() error {
			_, err := MoveFromProto(&pb.Move{Seq: 1, Forward: 300})
			return err
		}()},
		{"move dt", "move.dt", func() error { _, err := MoveFromProto(&pb.Move{Dt: 256}); return err }()},
		{"payload", "control.payload", func() error {
			_, err := ControlFromProto(&pb.ControlState{Payload: make([]byte, 17)})
			return err
		}()},
		{"nan", "control", func() error {
			_, err := ControlFromProto(&pb.ControlState{Yaw: float32(math.NaN())})
			return err
		}()},
		{"kind", "handoff.kind", func() error { _, err := HandoffFromProto(&pb.HandoffMessage{Kind: 42}); return err }()},
		{"name", "state.name", func() error {
			_, err := HandoffFromProto(&pb.HandoffMessage{Kind: 1, State: &pb.EntitySnapshot{Name: string(make([]byte, 40))}})
			return err
		}()},
		{"extra", "state.extra", func() error {
			_, err := HandoffFromProto(&pb.HandoffMessage{Kind: 1, State: &pb.EntitySnapshot{Extra: []uint32{1, 2, 3, 4, 5}}})
			return err
		}()},
		{"too many moves", "moves", func() error {
			_, err := HandoffFromProto(&pb.HandoffMessage{Kind: 7, Moves: make([]*pb.Move, MaxMoves+1)})
			return err
		}()},
		{"nil move", "move", func() error {
			_, err := HandoffFromProto(&pb.HandoffMessage{Kind: 7, Moves: []*pb.Move{nil}})
			return err
		}()},
		{"unknown class", "view.class_id", func() error {
			_, err := ViewEntriesFromProto(nil, &pb.ViewUpdate{Entries: []*pb.ViewEntry{{ClassId: 999}}}, reg)
			return err
		}()},
		{"replica name", "replica.name", func() error {
			_, err := ReplicaBatchFromProto(&pb.ReplicaBatch{Entities: []*pb.Replica{{Name: string(make([]byte, 64))}}})
			return err
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var fe *FieldError
			if !errors.As(tc.err, &fe) || fe.Field != tc.field {
				t.Fatalf("error %v, want a FieldError on %s", tc.err, tc.field)
			}
		})
	}
}

// ReplicaBatchToProtoInto, filling one message batch after batch (more
// entities, fewer, none, names and payloads changing), encodes each as a
// fresh ReplicaBatchToProto does; and ReplicaBatchFromProtoInto, decoding
// into one array batch after batch, gives what ReplicaBatchFromProto does.
func TestReplicaBatchIntoMatchesFresh(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	names := []string{"", "npc", "walker", "a-longer-name"}
	var (
		reused  pb.ReplicaBatch
		scratch []byte
		into    sim.ReplicaBatch
		ents    []sim.Replica
	)
	for round, n := range []int{3, 20, 7, 0, 1, 20, 33, 2} {
		b := &sim.ReplicaBatch{From: "a", To: "b", Tick: uint64(round), Sent: time.Duration(round) * time.Millisecond}
		for i := range n {
			b.Entities = append(b.Entities, sim.Replica{ID: r.Uint64(), Kind: uint8(r.IntN(2)), Epoch: handoff.Epoch(r.IntN(9)),
				State: randControl(r), Health: r.Int32(), Flags: r.Uint32(), Name: ghost.MustName(names[(i+round)%len(names)]),
				Extra: [4]uint32{r.Uint32(), 0, r.Uint32()}})
		}
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(ReplicaBatchToProto(b))
		if err != nil {
			t.Fatal(err)
		}
		scratch = ReplicaBatchToProtoInto(&reused, b, scratch)
		got, err := proto.MarshalOptions{Deterministic: true}.Marshal(&reused)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("round %d (%d entities): the reused message encodes as\n%x\nwant\n%x", round, n, got, want)
		}
		var p pb.ReplicaBatch
		if err := proto.Unmarshal(want, &p); err != nil {
			t.Fatal(err)
		}
		fresh, err := ReplicaBatchFromProto(&p)
		if err != nil {
			t.Fatal(err)
		}
		if err := ReplicaBatchFromProtoInto(&into, ents, &p); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&into, fresh) {
			t.Fatalf("round %d: decoded into the kept array\n got %+v\nwant %+v", round, into, *fresh)
		}
		if cap(into.Entities) > cap(ents) {
			ents = into.Entities
		}
	}
	last := &sim.ReplicaBatch{From: "a", To: "b", Entities: []sim.Replica{{ID: 1, Name: ghost.MustName("npc")}, {ID: 2}}}
	scratch = ReplicaBatchToProtoInto(&reused, last, scratch)
	if n := testing.AllocsPerRun(20, func() { scratch = ReplicaBatchToProtoInto(&reused, last, scratch) }); n != 0 {
		t.Errorf("filling a reused message again allocates %v objects, want 0", n)
	}
}

// MovesToProtoInto, filling one list list after list (longer, shorter,
// empty), encodes each as a fresh MovesToProto does, and refills without
// allocating.
// Decoding into a list with room takes the moves MovesFromProto would
// give, allocates nothing, and keeps what the list held before; a bad move
// leaves the list's length as it was.
func TestMovesFromProtoInto(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	ms := []move.Move{randMove(r, 1), randMove(r, 2), randMove(r, 3)}
	ps := MovesToProto(ms)
	want, err := MovesFromProto(ps)
	if err != nil {
		t.Fatal(err)
	}
	head := randMove(r, 40)
	dst := append(make([]move.Move, 0, 8), head)
	got, err := MovesFromProtoInto(dst, ps)
	if err != nil || len(got) != 4 || got[0] != head || !reflect.DeepEqual(got[1:], want) {
		t.Fatalf("MovesFromProtoInto = %v, %v; want %v then %v", got, err, head, want)
	}
	if n := testing.AllocsPerRun(20, func() { dst, _ = MovesFromProtoInto(dst[:0], ps) }); n != 0 {
		t.Errorf("decoding into a list with room allocates %v objects, want 0", n)
	}
	bad := append(MovesToProto(ms), &pb.Move{Seq: 4, Dt: 300})
	if got, err := MovesFromProtoInto(dst[:1], bad); err == nil || len(got) != 1 {
		t.Fatalf("a bad move: %d moves, err %v; want the list's 1 and an error", len(got), err)
	}
	if _, err := MovesFromProtoInto(nil, make([]*pb.Move, MaxMoves+1)); err == nil {
		t.Fatal("a list over MaxMoves was taken")
	}
}

func TestMovesIntoMatchesFresh(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var reused []*pb.Move
	for _, n := range []int{2, 5, 1, 0, 3, 9} {
		ms := make([]move.Move, n)
		for i := range ms {
			ms[i] = randMove(r, uint64(i+1))
		}
		want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&pb.PlayerInput{Moves: MovesToProto(ms)})
		reused = MovesToProtoInto(reused, ms)
		got, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&pb.PlayerInput{Moves: reused})
		if string(got) != string(want) {
			t.Fatalf("%d moves: the reused list encodes as %x, want %x", n, got, want)
		}
	}
	ms := []move.Move{randMove(r, 1), randMove(r, 2)}
	if n := testing.AllocsPerRun(20, func() { reused = MovesToProtoInto(reused, ms) }); n != 0 {
		t.Errorf("refilling the list allocates %v objects, want 0", n)
	}
}
