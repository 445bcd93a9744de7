package worldmap

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ghostwire/ghostwire/zones/world"
)

func TestEncodeRoundTrip(t *testing.T) {
	w := world.Default()
	bx := w.Bounds()
	enc := NewEncoder(w)
	ents := []Entity{
		{ID: 0x4757_0000_0000 + 5<<20, Kind: 0, Zone: 3, X: float32(bx.Max[0]), Z: float32(bx.Max[1])},
		{ID: 7, Kind: 1, Zone: 0, X: float32(bx.Min[0]), Z: float32(bx.Min[1])},
		{ID: 7, Kind: 1, Zone: 1, X: 0, Z: 0}, // the same entity seen by two zones: drawn once
		{ID: 1<<64 - 1, Kind: 200, Zone: 2, X: 1e9, Z: -1e9},
		{ID: 8, Kind: 1, Zone: 1, X: 0, Z: 0},
	}
	loads := []ZoneLoad{{Players: 0, NPCs: 1, Here: true}, {NPCs: 1, Here: true}, {}, {Players: 1, Here: true}}
	d, err := Decode(enc.Encode(42, loads, ents))
	if err != nil {
		t.Fatal(err)
	}
	if d.Seq != 42 || len(d.Loads) != 4 || d.Loads[3] != loads[3] || d.Loads[2].Here {
		t.Fatalf("header %+v", d)
	}
	want := []Entity{
		{ID: 7, Kind: 1, Zone: 0, X: 0, Z: 0},
		{ID: 8, Kind: 1, Zone: 1, X: 32768, Z: 32768},
		{ID: 0x4757_0000_0000 + 5<<20, Kind: 0, Zone: 3, X: 65535, Z: 65535},
		{ID: 1<<64 - 1, Kind: maxKind, Zone: 2, X: 65535, Z: 0}, // clamped to the world and kind 7
	}
	if len(d.Entities) != len(want) {
		t.Fatalf("entities %+v, want %+v", d.Entities, want)
	}
	for i := range want {
		// The centre of a symmetric world is 32767.5: either neighbour.
		if g := d.Entities[i]; g.ID != want[i].ID || g.Kind != want[i].Kind || g.Zone != want[i].Zone ||
			abs(g.X-want[i].X) > 1 || abs(g.Z-want[i].Z) > 1 {
			t.Errorf("entity %d = %+v, want %+v", i, g, want[i])
		}
	}
}

func abs(f float32) float32 { return max(f, -f) }

// crowd is n entities spread over w: a few hundred players with big ids,
// the rest NPCs numbered densely, as a running world has them.
func crowd(w *world.World, n int) []Entity {
	r := rand.New(rand.NewPCG(1, 2))
	b := w.Bounds()
	ents := make([]Entity, n)
	for i := range ents {
		x := b.Min[0] + r.Float64()*(b.Max[0]-b.Min[0])
		z := b.Min[1] + r.Float64()*(b.Max[1]-b.Min[1])
		zi, _ := w.ZoneAt(x, z)
		e := Entity{ID: uint64(1000 + i), Kind: 1, Zone: uint16(w.Index(zi.ID)), X: float32(x), Z: float32(z)}
		if i%10 == 0 {
			e.ID, e.Kind = 0x4757_0000_0000+uint64(i)<<20|1, 0
		}
		ents[i] = e
	}
	r.Shuffle(len(ents), func(i, j int) { ents[i], ents[j] = ents[j], ents[i] })
	return ents
}

// BenchmarkSnapshotEncode: one frame of 5,000 entities (what every viewer
// of a crowded node receives 5 times a second).
func BenchmarkSnapshotEncode(b *testing.B) {
	w := world.Default()
	src := crowd(w, 5000)
	ents := make([]Entity, len(src))
	loads := make([]ZoneLoad, w.Len())
	enc := NewEncoder(w)
	var size int
	b.ReportAllocs()
	for b.Loop() {
		copy(ents, src) // unsorted, as the zones hand them over
		size = len(enc.Encode(1, loads, ents))
	}
	b.ReportMetric(float64(size), "B/frame")
	b.ReportMetric(float64(size)/float64(len(src)), "B/entity")
}

// Garbage never panics, and whatever decodes re-encodes to the same bytes
// (ids, zones, kinds and the 16-bit positions survive exactly).
func FuzzDecode(f *testing.F) {
	w := world.Default()
	enc := NewEncoder(w)
	f.Add(append([]byte(nil), enc.Encode(1, make([]ZoneLoad, 4), crowd(w, 20))...))
	f.Add(append([]byte(nil), enc.Encode(7, []ZoneLoad{{Players: 1, Here: true}}, nil)...))
	f.Add([]byte{1, 0, 0, 0})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	// An encoder whose world spans 0 … 65535 m maps the grid onto itself.
	grid, err := world.New("grid", []world.Zone{{ID: "a", Rect: world.Rect{Max: [2]float64{65535, 65535}}}})
	if err != nil {
		f.Fatal(err)
	}
	identity := NewEncoder(grid)
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := Decode(b)
		if err != nil {
			return
		}
		// Re-encode with positions already on the grid: an identity world.
		again := identity.Encode(fr.Seq, fr.Loads, slices.Clone(fr.Entities))
		if !bytes.Equal(again, b) {
			t.Fatalf("decode → encode changed the frame:\n%x\n%x", b, again)
		}
	})
}
