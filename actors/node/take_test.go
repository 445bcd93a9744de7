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
// rides with the NPCs, and without them when they do not fit; so do the
// zone's players, listed (an empty list when the zone had none) or not
// (nil: the target reads the players bucket).
func TestTakeRequestCarriesTheNPCs(t *testing.T) {
	npcs := takeNPCs(t, 30)
	players := []uint64{7, 1 << 40, 3}
	for _, placed := range []bool{false, true} {
		for _, listed := range [][]uint64{nil, {}, players} {
			b := encodeTake(takeRequest{zone: "x0z0", npcs: npcs, placed: placed, players: listed}, 1<<20)
			got, err := decodeTake(b)
			if err != nil || got.zone != "x0z0" || !reflect.DeepEqual(got.npcs, npcs) || got.placed != placed || !reflect.DeepEqual(got.players, listed) {
				t.Fatalf("decodeTake(encodeTake(placed %v, players %v)) = %q, %d NPCs, placed %v, players %v, %v; want x0z0 and the %d NPCs as they were", placed, listed, got.zone, len(got.npcs), got.placed, got.players, err, len(npcs))
			}
		}
	}
	if b := encodeTake(takeRequest{zone: "x0z0", npcs: npcs}, 100); !bytes.Equal(b, []byte("x0z0")) {
		t.Fatalf("a take over the largest message: %q, want the zone id alone", b)
	}
	b := encodeTake(takeRequest{zone: "x0z0", npcs: npcs, placed: true}, 100)
	if got, err := decodeTake(b); err != nil || got.zone != "x0z0" || got.npcs != nil || !got.placed || got.players != nil {
		t.Fatalf("a placed take over the largest message (%d bytes): %+v, %v; want x0z0, no NPCs, placed", len(b), got, err)
	}
	// The NPCs do not fit, the players do: the players ride alone.
	b = encodeTake(takeRequest{zone: "x0z0", npcs: npcs, players: players}, 100)
	if got, err := decodeTake(b); err != nil || got.zone != "x0z0" || got.npcs != nil || got.placed || !reflect.DeepEqual(got.players, players) {
		t.Fatalf("a take whose NPCs do not fit (%d bytes): %+v, %v; want x0z0, no NPCs, the players", len(b), got, err)
	}
	// More players than a request may list: not listed (the target reads
	// the bucket), the rest of the request as it was.
	many := make([]uint64, maxTakePlayers+1)
	if got, err := decodeTake(encodeTake(takeRequest{zone: "x0z0", npcs: npcs, players: many}, 1<<20)); err != nil || got.players != nil || !reflect.DeepEqual(got.npcs, npcs) {
		t.Fatalf("a take of %d players: players %d (nil %v), %d NPCs, %v; want not listed, the NPCs", len(many), len(got.players), got.players == nil, len(got.npcs), err)
	}
	for _, c := range []struct {
		data []byte
		id   string
	}{{[]byte("x1z1"), "x1z1"}, {encodeTake(takeRequest{zone: "x1z1", npcs: []sim.NPCState{}}, 1<<20), "x1z1"}} {
		got, err := decodeTake(c.data)
		if err != nil || got.zone != c.id || got.placed || got.players != nil {
			t.Fatalf("decodeTake(%q) = %+v, %v", c.data, got, err)
		}
		if (c.data[0] == takeMark) != (got.npcs != nil) || len(got.npcs) != 0 {
			t.Fatalf("decodeTake(%q): NPCs %v (nil %v)", c.data, got.npcs, got.npcs == nil)
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
		"not protobuf":     {takeMark, 0xff, 0xff},
		"epochs short":     bad(&pb.ZoneTake{Zone: "x0z0", Npcs: []*pb.EntitySnapshot{{Entity: 1 << 63, Kind: 1}}}),
		"three rng words":  bad(&pb.ZoneTake{Zone: "x0z0", Npcs: []*pb.EntitySnapshot{{Entity: 1 << 63, Kind: 1, Rng: []uint64{1, 2, 3}}}, NpcEpochs: []uint64{1}}),
		"NPCs and afresh":  bad(&pb.ZoneTake{Zone: "x0z0", Npcs: []*pb.EntitySnapshot{{Entity: 1 << 63, Kind: 1}}, NpcEpochs: []uint64{1}, NpcsAfresh: true}),
		"players unmarked": bad(&pb.ZoneTake{Zone: "x0z0", Players: []uint64{1}}),
		"too many players": bad(&pb.ZoneTake{Zone: "x0z0", Players: make([]uint64, maxTakePlayers+1), PlayersListed: true}),
	} {
		if _, err := decodeTake(data); !errors.Is(err, errBadTake) {
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
	f.Add(encodeTake(takeRequest{zone: "x0z0", npcs: takeNPCs(f, 4)}, 1<<20))
	f.Add(encodeTake(takeRequest{zone: "x0z0", npcs: []sim.NPCState{}}, 1<<20))
	f.Add(encodeTake(takeRequest{zone: "x0z0", npcs: takeNPCs(f, 4), placed: true}, 100))
	f.Add(encodeTake(takeRequest{zone: "x0z0", npcs: takeNPCs(f, 2), players: []uint64{5, 9}}, 1<<20))
	w, err := world.Grid("f", 2, 2, 1000, [2]float64{-1000, -1000})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeTake(data)
		if err != nil {
			return
		}
		npcs := req.npcs
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
