package worldmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ghostwire/ghostwire/zones/world"
)

// Entity is one dot on the map: an entity a zone on this node owns.
type Entity struct {
	ID   uint64
	Kind uint8  // sim.KindPlayer, sim.KindNPC, or a game's class
	Zone uint16 // index of its zone in the world map
	X, Z float32
}

// frameVersion is the first byte of every frame; the page refuses others.
const frameVersion = 1

// maxKind is the largest kind a frame carries; bigger kinds are clamped
// (the page draws players and everything else).
const maxKind = 7

// Encoder turns snapshots into frames. The zero value is not usable; use
// NewEncoder. Not safe for concurrent use: the Map's collector owns it.
//
// A frame (little-endian, uvarints as encoding/binary writes them):
//
//	version      byte (1)
//	seq          uvarint
//	zones        uvarint Z, then per zone of the map, in map order:
//	               players uvarint, npcs uvarint, flags byte (1: runs here)
//	entities     uvarint N, then per entity, sorted by id:
//	               id - previous id   uvarint (the first: its id)
//	               zone*8 + kind      uvarint (kind clamped to 7)
//	               x, z               uint16 each: the position scaled over the
//	                                  world's bounds, 0 … 65535
//
// Sorting makes ids delta-small (NPCs are numbered densely), so an entity
// costs about 6–8 bytes whatever its id; the page reads a 4 km world to
// 6 cm, far below a pixel.
type Encoder struct {
	bounds world.Rect
	zones  int
	buf    []byte
}

// NewEncoder returns an encoder for frames of world w.
func NewEncoder(w *world.World) *Encoder {
	return &Encoder{bounds: w.Bounds(), zones: w.Len()}
}

// ZoneLoad is one zone's counts in a frame.
type ZoneLoad struct {
	Players, NPCs int
	Here          bool // the zone runs on this node (its entities are in the frame)
}

// Encode appends nothing to ents but sorts it by id (and drops duplicate
// ids: an entity in the middle of a handoff between two zones here is
// drawn once). loads has one entry per zone of the map. The returned frame
// is valid until the next Encode.
func (e *Encoder) Encode(seq uint64, loads []ZoneLoad, ents []Entity) []byte {
	slices.SortFunc(ents, func(a, b Entity) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	ents = slices.CompactFunc(ents, func(a, b Entity) bool { return a.ID == b.ID })
	b := e.buf[:0]
	b = append(b, frameVersion)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(len(loads)))
	for _, l := range loads {
		b = binary.AppendUvarint(b, uint64(max(l.Players, 0)))
		b = binary.AppendUvarint(b, uint64(max(l.NPCs, 0)))
		var f byte
		if l.Here {
			f = 1
		}
		b = append(b, f)
	}
	b = binary.AppendUvarint(b, uint64(len(ents)))
	var prev uint64
	for _, en := range ents {
		b = binary.AppendUvarint(b, en.ID-prev)
		prev = en.ID
		b = binary.AppendUvarint(b, uint64(en.Zone)*8+uint64(min(en.Kind, maxKind)))
		b = binary.LittleEndian.AppendUint16(b, scale(float64(en.X), e.bounds.Min[0], e.bounds.Max[0]))
		b = binary.LittleEndian.AppendUint16(b, scale(float64(en.Z), e.bounds.Min[1], e.bounds.Max[1]))
	}
	e.buf = b
	return b
}

// scale maps v in [lo, hi] to 0 … 65535, clamped (NaN reads as lo).
func scale(v, lo, hi float64) uint16 {
	if !(hi > lo) {
		return 0
	}
	f := (v - lo) / (hi - lo) * 65535
	if !(f > 0) {
		return 0
	}
	if f >= 65535 {
		return 65535
	}
	return uint16(math.Round(f))
}

// Frame is a decoded frame: positions stay on the 16-bit grid (0 … 65535
// over the world's bounds), as the page draws them.
type Frame struct {
	Seq      uint64
	Loads    []ZoneLoad
	Entities []Entity
}

// ErrFrame is returned by Decode for bytes that are not a frame.
var ErrFrame = errors.New("worldmap: malformed frame")

// Decode reads a frame as the page does (tests and tools read the stream
// with it). It accepts only what Encode writes — canonical uvarints,
// strictly increasing ids, zones that exist, flags 0 or 1 — so decoding
// and encoding again gives the same bytes; it never allocates more than the
// input's length allows.
func Decode(b []byte) (Frame, error) {
	var f Frame
	p := 0
	fail := func(field string) (Frame, error) {
		return Frame{}, fmt.Errorf("%w: %s at byte %d", ErrFrame, field, p)
	}
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(b[p:])
		if n <= 0 || n != len(binary.AppendUvarint(nil, v)) {
			return 0, false
		}
		p += n
		return v, true
	}
	if len(b) == 0 || b[0] != frameVersion {
		return fail("version")
	}
	p = 1
	var ok bool
	if f.Seq, ok = uv(); !ok {
		return fail("seq")
	}
	nz, ok := uv()
	if !ok || nz > uint64(len(b)-p)/3 || nz > world.MaxZones {
		return fail("zone count")
	}
	f.Loads = make([]ZoneLoad, 0, nz)
	for range nz {
		pl, ok1 := uv()
		np, ok2 := uv()
		if !ok1 || !ok2 || pl > math.MaxInt32 || np > math.MaxInt32 || p >= len(b) || b[p] > 1 {
			return fail("zone load")
		}
		f.Loads = append(f.Loads, ZoneLoad{Players: int(pl), NPCs: int(np), Here: b[p] == 1})
		p++
	}
	n, ok := uv()
	if !ok || n > uint64(len(b)-p)/6 {
		return fail("entity count")
	}
	f.Entities = make([]Entity, 0, n)
	var id uint64
	for i := range n {
		delta, ok1 := uv()
		zk, ok2 := uv()
		if !ok1 || !ok2 || (i > 0 && delta == 0) || id+delta < id || zk/8 >= nz || p+4 > len(b) {
			return fail("entity")
		}
		id += delta
		f.Entities = append(f.Entities, Entity{ID: id, Zone: uint16(zk / 8), Kind: uint8(zk % 8),
			X: float32(binary.LittleEndian.Uint16(b[p:])), Z: float32(binary.LittleEndian.Uint16(b[p+2:]))})
		p += 4
	}
	if p != len(b) {
		return fail("trailing bytes")
	}
	return f, nil
}
