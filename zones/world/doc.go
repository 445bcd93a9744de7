// Package world describes how the plane is divided into zones: a world map
// of axis-aligned rectangles, each with the zones it touches as neighbours.
// It loads the map from a JSON file, validates it with errors that name the
// zones and the problem, and answers "which zone owns this point".
//
// # Coordinates
//
// The ground plane is X/Z (Y is up, as in replication/move.ControlState).
// A point [x, z] belongs to the zone whose rectangle holds it half-open,
// min ≤ p < max, so every point of the world has exactly one owner; the
// world's own max edges belong to the zones on them.
//
// # File format
//
//	{
//	  "name": "two-by-two",
//	  "zones": [
//	    {"id": "x0z0", "min": [-1000, -1000], "max": [0, 0], "neighbours": ["x1z0", "x0z1", "x1z1"]},
//	    {"id": "x1z0", "min": [0, -1000],     "max": [1000, 0]},
//	    ...
//	  ],
//	  "spawn": ["x1z0"]
//	}
//
// id: 1–64 characters from [A-Za-z0-9_-] (ids become NATS subject tokens in
// a cluster). min, max: [x, z] in metres, finite, each side at least
// MinZoneSize. neighbours: optional. When a zone omits it, its neighbours
// are derived: every zone whose rectangle touches it along an edge or at a
// corner (corner neighbours matter: a player at a corner sees into the
// diagonal zone). When a zone lists them, the list must be exactly those
// zones, and listings must be symmetric; the check catches typos instead of
// silently dropping a border. spawn: optional, the zones new players join
// (SpawnIndex picks one by a hash of the player id); omitted, every zone.
//
// Validation rejects: no zones, bad or duplicate ids, bad sizes, overlapping
// zones, gaps (the zones must tile their bounding rectangle exactly),
// unknown, self, asymmetric, non-touching and missing neighbours. Edges must
// coincide exactly, so use round numbers. Every problem found is reported,
// joined; errors.Is tells the kinds apart (ErrOverlap, ErrGap, …).
//
// Default returns the built-in world zoned runs without a file: 2×2 zones of
// 1 km centred on the origin, which fits replication/ghost.DefaultBounds.
package world
