package worldmap

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/ghostwire/ghostwire/zones/world"
)

// decoded is a frame read back the way the page reads it.
type decoded struct {
	seq   uint64
	loads []ZoneLoad
	ents  []Entity // X, Z are the 16-bit grid values
}

var errShort = errors.New("short frame")

// decodeFrame mirrors the page's decode (map.html) for tests.
func decodeFrame(b []byte) (decoded, error) {
	var d decoded
	p := 0
	uv := func() (uint64, error) {
		v, n := binary.Uvarint(b[p:])
		if n <= 0 {
			return 0, errShort
		}
		p += n
		return v, nil
	}
	if len(b) == 0 || b[0] != frameVersion {
		return d, errors.New("bad version")
	}
	p = 1
	var err error
	if d.seq, err = uv(); err != nil {
		return d, err
	}
	nz, err := uv()
	if err != nil {
		return d, err
	}
	for range nz {
		pl, err1 := uv()
		np, err2 := uv()
		if err1 != nil || err2 != nil || p >= len(b) {
			return d, errShort
		}
		d.loads = append(d.loads, ZoneLoad{Players: int(pl), NPCs: int(np), Here: b[p] == 1})
		p++
	}
	n, err := uv()
	if err != nil {
		return d, err
	}
	var id uint64
	for range n {
		delta, err1 := uv()
		zk, err2 := uv()
		if err1 != nil || err2 != nil || p+4 > len(b) {
			return d, errShort
		}
		id += delta
		d.ents = append(d.ents, Entity{ID: id, Zone: uint16(zk / 8), Kind: uint8(zk % 8),
			X: float32(binary.LittleEndian.Uint16(b[p:])), Z: float32(binary.LittleEndian.Uint16(b[p+2:]))})
		p += 4
	}
	if p != len(b) {
		return d, errors.New("trailing bytes")
	}
	return d, nil
}

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
	d, err := decodeFrame(enc.Encode(42, loads, ents))
	if err != nil {
		t.Fatal(err)
	}
	if d.seq != 42 || len(d.loads) != 4 || d.loads[3] != loads[3] || d.loads[2].Here {
		t.Fatalf("header %+v", d)
	}
	want := []Entity{
		{ID: 7, Kind: 1, Zone: 0, X: 0, Z: 0},
		{ID: 8, Kind: 1, Zone: 1, X: 32768, Z: 32768},
		{ID: 0x4757_0000_0000 + 5<<20, Kind: 0, Zone: 3, X: 65535, Z: 65535},
		{ID: 1<<64 - 1, Kind: maxKind, Zone: 2, X: 65535, Z: 0}, // clamped to the world and kind 7
	}
	if len(d.ents) != len(want) {
		t.Fatalf("entities %+v, want %+v", d.ents, want)
	}
	for i := range want {
		// The centre of a symmetric world is 32767.5: either neighbour.
		if g := d.ents[i]; g.ID != want[i].ID || g.Kind != want[i].Kind || g.Zone != want[i].Zone ||
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
