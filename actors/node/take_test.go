package node

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// takeNPCs is a zone's NPCs after a few seconds of walking.
func takeNPCs(t testing.TB, n int) []sim.NPCState {
	t.Helper()
	z, err := sim.New(sim.Config{Zone: "x0z0", NPCs: n, Seed: 3, NPCGeneration: sim.NPCGenerationOf(41)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 60; i++ {
		z.Step(time.Duration(i) * 50 * time.Millisecond)
	}
	return z.AppendNPCs(nil)
}

// A take request carries the zone's NPCs whole; one that would not fit
// the connection's largest message, and an older node's (the zone id
// alone), carry none (nil: the target spawns the zone's share); one with
// every NPC gone carries an empty list, not none. An operator's placement
// rides with the NPCs, and without them when they do not fit.
func TestTakeRequestCarriesTheNPCs(t *testing.T) {
	npcs := takeNPCs(t, 30)
	for _, placed := range []bool{false, true} {
		b := encodeTake("x0z0", npcs, placed, 1<<20)
		id, got, gotPlaced, err := decodeTake(b)
		if err != nil || id != "x0z0" || !reflect.DeepEqual(got, npcs) || gotPlaced != placed {
			t.Fatalf("decodeTake(encodeTake(placed %v)) = %q, %d NPCs, placed %v, %v; want x0z0 and the %d NPCs as they were", placed, id, len(got), gotPlaced, err, len(npcs))
		}
	}
	if b := encodeTake("x0z0", npcs, false, 100); !bytes.Equal(b, []byte("x0z0")) {
		t.Fatalf("a take over the largest message: %q, want the zone id alone", b)
	}
	b := encodeTake("x0z0", npcs, true, 100)
	if id, got, placed, err := decodeTake(b); err != nil || id != "x0z0" || got != nil || !placed {
		t.Fatalf("a placed take over the largest message (%d bytes): %q, NPCs %v (nil %v), placed %v, %v; want x0z0, none, placed", len(b), id, got, got == nil, placed, err)
	}
	for _, c := range []struct {
		data []byte
		id   string
	}{{[]byte("x1z1"), "x1z1"}, {encodeTake("x1z1", nil, false, 1<<20), "x1z1"}} {
		id, got, placed, err := decodeTake(c.data)
		if err != nil || id != c.id || placed {
			t.Fatalf("decodeTake(%q) = %q, placed %v, %v", c.data, id, placed, err)
		}
		if (c.data[0] == takeMark) != (got != nil) || len(got) != 0 {
			t.Fatalf("decodeTake(%q): NPCs %v (nil %v)", c.data, got, got == nil)
		}
	}
	bad := func(m *pb.ZoneTake) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte{takeMark}, b...)
	}
	for name, data := range map[string][]byte{
		"not protobuf":    {takeMark, 0xff, 0xff},
		"epochs short":    bad(&pb.ZoneTake{Zone: "x0z0", Npcs: []*pb.EntitySnapshot{{Entity: 1 << 63, Kind: 1}}}),
		"three rng words": bad(&pb.ZoneTake{Zone: "x0z0", Npcs: []*pb.EntitySnapshot{{Entity: 1 << 63, Kind: 1, Rng: []uint64{1, 2, 3}}}, NpcEpochs: []uint64{1}}),
		"NPCs and afresh": bad(&pb.ZoneTake{Zone: "x0z0", Npcs: []*pb.EntitySnapshot{{Entity: 1 << 63, Kind: 1}}, NpcEpochs: []uint64{1}, NpcsAfresh: true}),
	} {
		if _, _, _, err := decodeTake(data); !errors.Is(err, errBadTake) {
			t.Errorf("%s: %v, want errBadTake", name, err)
		}
	}
}

// FuzzDecodeTake: a take request from another node never panics the
// decoder, and whatever NPCs it yields are restored into a zone or
// refused, never a panic either.
func FuzzDecodeTake(f *testing.F) {
	f.Add([]byte("x0z0"))
	f.Add([]byte{})
	f.Add([]byte{takeMark})
	f.Add(encodeTake("x0z0", takeNPCs(f, 4), false, 1<<20))
	f.Add(encodeTake("x0z0", nil, false, 1<<20))
	f.Add(encodeTake("x0z0", takeNPCs(f, 4), true, 100))
	w, err := world.Grid("f", 2, 2, 1000, [2]float64{-1000, -1000})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, npcs, _, err := decodeTake(data)
		if err != nil {
			return
		}
		z, err := sim.New(sim.Config{Zone: "x0z0", World: w}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range npcs {
			_ = z.RestoreNPC(0, st)
		}
		z.Step(50 * time.Millisecond)
	})
}
