package world

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
)

// MinZoneSize is the smallest side of a zone, in metres. Far smaller zones
// than the interest radius make no sense (sim checks the real bound against
// its radii); this only rejects degenerate rectangles.
const MinZoneSize = 1.0

// MaxZones bounds the number of zones in a map: validation is quadratic in
// it, and a map is configuration, not a database.
const MaxZones = 4096

// MaxFileSize bounds what Load and Parse accept.
const MaxFileSize = 4 << 20

// Rect is an axis-aligned rectangle on the X/Z plane: Min = [x, z] of one
// corner, Max of the opposite one, in metres.
type Rect struct {
	Min [2]float64 `json:"min"`
	Max [2]float64 `json:"max"`
}

// Size returns the width along X and the depth along Z.
func (r Rect) Size() (x, z float64) { return r.Max[0] - r.Min[0], r.Max[1] - r.Min[1] }

// Contains reports whether [x, z] lies in r half-open: min ≤ p < max.
func (r Rect) Contains(x, z float64) bool {
	return x >= r.Min[0] && x < r.Max[0] && z >= r.Min[1] && z < r.Max[1]
}

// Dist2 is the squared distance from [x, z] to r (0 inside or on the edge).
func (r Rect) Dist2(x, z float64) float64 {
	dx := max(r.Min[0]-x, 0, x-r.Max[0])
	dz := max(r.Min[1]-z, 0, z-r.Max[1])
	return dx*dx + dz*dz
}

// overlaps reports whether r and o share an area (touching edges do not).
func (r Rect) overlaps(o Rect) bool {
	return r.Min[0] < o.Max[0] && o.Min[0] < r.Max[0] && r.Min[1] < o.Max[1] && o.Min[1] < r.Max[1]
}

// touches reports whether r and o meet along an edge or at a corner without
// overlapping.
func (r Rect) touches(o Rect) bool {
	if r.overlaps(o) {
		return false
	}
	return r.Min[0] <= o.Max[0] && o.Min[0] <= r.Max[0] && r.Min[1] <= o.Max[1] && o.Min[1] <= r.Max[1]
}

func (r Rect) String() string {
	return fmt.Sprintf("[%g,%g]-[%g,%g]", r.Min[0], r.Min[1], r.Max[0], r.Max[1])
}

// Zone is one rectangle of the world and the zones it touches.
type Zone struct {
	ID string `json:"id"`
	Rect
	// Neighbours are the ids of the zones touching this one, sorted. In a
	// file it may be omitted (derived) or listed (checked).
	Neighbours []string `json:"neighbours,omitempty"`
}

// World is a validated world map. Build it with New, Parse, Load, Grid or
// Default; it is read-only afterwards and safe to share between goroutines.
type World struct {
	name   string
	zones  []Zone
	bounds Rect
	index  map[string]int
	// spawn is the zones new players join (indices into zones, in the
	// file's order); nil: every zone.
	spawn []int
}

type file struct {
	Name  string `json:"name"`
	Zones []Zone `json:"zones"`
	// Spawn lists the zones new players join (a game's starting zones);
	// omitted: every zone of the map.
	Spawn []string `json:"spawn,omitempty"`
}

// New validates zones and returns the world. A zone with nil Neighbours gets
// them derived; a zone with a non-nil list is checked against the geometry.
// The returned world holds its own copy of zones, in the given order.
func New(name string, zones []Zone) (*World, error) {
	zs := make([]Zone, len(zones))
	for i, z := range zones {
		zs[i] = z
		if z.Neighbours != nil {
			zs[i].Neighbours = slices.Clone(z.Neighbours)
		}
	}
	w := &World{name: name, zones: zs}
	if err := w.validate(); err != nil {
		if name != "" {
			return nil, fmt.Errorf("world %q: %w", name, err)
		}
		return nil, fmt.Errorf("world: %w", err)
	}
	return w, nil
}

// Parse decodes and validates a world map in the JSON format of the package
// documentation. Unknown fields are errors (a misspelt "neighbors" must not
// silently mean "derive").
func Parse(data []byte) (*World, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("world: map is %d bytes, more than %d", len(data), MaxFileSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("world: decode map: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("world: decode map: trailing data after the JSON object")
	}
	w, err := New(f.Name, f.Zones)
	if err != nil || f.Spawn == nil {
		return w, err
	}
	return w.WithSpawn(f.Spawn...)
}

// WithSpawn returns a copy of w whose new players join only the zones ids
// (a game's starting zones), in that order; no ids: every zone. An unknown
// or repeated id is an error (ErrUnknownSpawn).
func (w *World) WithSpawn(ids ...string) (*World, error) {
	c := *w
	c.spawn = nil
	if len(ids) == 0 {
		return &c, nil
	}
	var p problems
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		i, ok := w.index[id]
		switch {
		case !ok:
			p.add(ErrUnknownSpawn, id, "", "not a zone of the map")
		case seen[id]:
			p.add(ErrUnknownSpawn, id, "", "listed twice")
		default:
			c.spawn = append(c.spawn, i)
		}
		seen[id] = true
	}
	if len(p) > 0 {
		err := errors.Join(p...)
		if w.name != "" {
			return nil, fmt.Errorf("world %q: spawn: %w", w.name, err)
		}
		return nil, fmt.Errorf("world: spawn: %w", err)
	}
	return &c, nil
}

// Spawn returns the ids of the zones new players join: the file's "spawn"
// list, or every zone in map order.
func (w *World) Spawn() []string {
	if w.spawn == nil {
		ids := make([]string, len(w.zones))
		for i := range w.zones {
			ids[i] = w.zones[i].ID
		}
		return ids
	}
	ids := make([]string, len(w.spawn))
	for k, i := range w.spawn {
		ids[k] = w.zones[i].ID
	}
	return ids
}

// SpawnIndex is the zone (its index in Zones) a new player joins: one of
// the spawn zones, chosen by a hash of the player id, so any id scheme
// spreads evenly and every node of a cluster picks the same zone. A plain
// modulo did neither: ids with structure in their low bits (botswarm's
// base + index<<20 + session, a database's sharded ids) all left one
// remainder and started in one zone.
func (w *World) SpawnIndex(player uint64) int {
	// SplitMix64's finaliser: every input bit moves every output bit.
	h := player
	h = (h ^ h>>30) * 0xbf58476d1ce4e5b9
	h = (h ^ h>>27) * 0x94d049bb133111eb
	h ^= h >> 31
	if w.spawn == nil {
		return int(h % uint64(len(w.zones)))
	}
	return w.spawn[h%uint64(len(w.spawn))]
}

// Load reads and parses a world map file.
func Load(path string) (*World, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("world: %w", err)
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("world: %s is %d bytes, more than %d", path, st.Size(), MaxFileSize)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("world: %w", err)
	}
	w, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

// Marshal encodes the world in the file format, neighbours listed.
func (w *World) Marshal() ([]byte, error) {
	f := file{Name: w.name, Zones: w.zones}
	if w.spawn != nil {
		f.Spawn = w.Spawn()
	}
	return json.MarshalIndent(f, "", "  ")
}

// Grid returns a world of nx × nz square zones of side size metres whose
// minimum corner is origin. Zone ids are "x<i>z<j>" (i along X, j along Z).
func Grid(name string, nx, nz int, size float64, origin [2]float64) (*World, error) {
	if nx < 1 || nz < 1 || nx*nz > MaxZones {
		return nil, fmt.Errorf("world: grid %d×%d: %w", nx, nz, ErrBadSize)
	}
	zones := make([]Zone, 0, nx*nz)
	for j := range nz {
		for i := range nx {
			x0, z0 := origin[0]+float64(i)*size, origin[1]+float64(j)*size
			zones = append(zones, Zone{
				ID:   fmt.Sprintf("x%dz%d", i, j),
				Rect: Rect{Min: [2]float64{x0, z0}, Max: [2]float64{x0 + size, z0 + size}},
			})
		}
	}
	return New(name, zones)
}

// DefaultZoneSize is the side of the default world's zones, in metres.
const DefaultZoneSize = 1000

// Default returns the built-in world: 2×2 zones of 1 km, [-1000, 1000] on
// both axes, ids x0z0, x1z0, x0z1, x1z1.
func Default() *World {
	w, err := Grid("default", 2, 2, DefaultZoneSize, [2]float64{-DefaultZoneSize, -DefaultZoneSize})
	if err != nil {
		panic(err) // a constant map: a failure is a bug in this package
	}
	return w
}

// Name returns the map's name ("" if the file gave none).
func (w *World) Name() string { return w.name }

// Bounds returns the rectangle the zones tile.
func (w *World) Bounds() Rect { return w.bounds }

// Zones returns the zones in map order. The slice is shared: do not modify.
func (w *World) Zones() []Zone { return w.zones }

// Len returns the number of zones.
func (w *World) Len() int { return len(w.zones) }

// Zone returns the zone with id.
func (w *World) Zone(id string) (*Zone, bool) {
	i, ok := w.index[id]
	if !ok {
		return nil, false
	}
	return &w.zones[i], true
}

// Index returns the position of zone id in Zones(), or -1.
func (w *World) Index(id string) int {
	if i, ok := w.index[id]; ok {
		return i
	}
	return -1
}

// ZoneAt returns the zone owning [x, z], or false outside the world.
func (w *World) ZoneAt(x, z float64) (*Zone, bool) {
	for i := range w.zones {
		if w.owns(&w.zones[i].Rect, x, z) {
			return &w.zones[i], true
		}
	}
	return nil, false
}

// owns is Contains with the world's max edges included.
func (w *World) owns(r *Rect, x, z float64) bool {
	inX := x >= r.Min[0] && (x < r.Max[0] || x == r.Max[0] && x == w.bounds.Max[0])
	inZ := z >= r.Min[1] && (z < r.Max[1] || z == r.Max[1] && z == w.bounds.Max[1])
	return inX && inZ
}

// Owns reports whether zone z owns [x, y] under the half-open rule (the
// world's max edges included).
func (w *World) Owns(z *Zone, x, y float64) bool { return w.owns(&z.Rect, x, y) }

// Clamp returns [x, z] moved to the nearest point of the world (inclusive
// of its max edges). NaN maps to the minimum corner.
//
// A point strictly inside the bounds is itself, told by four compares
// (NaN fails them); only one on or past an edge, or NaN, takes clamp's
// min and max, whose ±0 rules the compares alone would not keep. Every
// owned player's position is clamped every tick (stepPlayer), and Go's
// float min and max cost a sequence of instructions each (BenchmarkZoneTick:
// ≈ 43 → ≈ 21 instructions a player, with the call this no longer
// inlines).
func (w *World) Clamp(x, z float64) (float64, float64) {
	if b := &w.bounds; x > b.Min[0] && x < b.Max[0] && z > b.Min[1] && z < b.Max[1] {
		return x, z
	}
	return w.clamp(x, z)
}

// clamp is Clamp for a point on or past an edge, or NaN.
func (w *World) clamp(x, z float64) (float64, float64) {
	b := w.bounds
	if math.IsNaN(x) {
		x = b.Min[0]
	}
	if math.IsNaN(z) {
		z = b.Min[1]
	}
	return min(max(x, b.Min[0]), b.Max[0]), min(max(z, b.Min[1]), b.Max[1])
}

// MinSide is the smallest side of any zone.
func (w *World) MinSide() float64 {
	m := math.Inf(1)
	for _, z := range w.zones {
		sx, sz := z.Size()
		m = min(m, sx, sz)
	}
	return m
}
