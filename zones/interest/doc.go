// Package interest decides, per player and per tick, which entities the
// player's connection should know about and how much each matters: the
// scope and priority half of the Tribes ghost model (seed 004 § Ghosts; book
// ch. 9 "Object Scope and Relevancy", "Prioritization and Frequency";
// checklist SC-1, SC-2, SC-6, SC-7).
//
// # Scope with hysteresis
//
// An entity enters a player's set when it comes within EnterRadius and
// leaves only when it is farther than LeaveRadius (> EnterRadius). Between
// the two radii membership is sticky, so an entity pacing along the edge of
// view does not flicker in and out (each flicker is a ghost create and kill
// on the wire). Formally, each tick:
//
//	set' = { e : d(e) ≤ Enter } ∪ { e ∈ set : d(e) ≤ Leave } ∪ always-relevant
//
// Always-relevant entities (a scoreboard, a flag; SC-6 "relevant but not
// visible") are in every set regardless of distance. The player's own
// entity is never in its set: its connection gets it as the control object.
//
// # Priority
//
// Each entry carries the zone's base priority for this player:
//
//	Priority = KindWeight[kind] × (1 − (1 − FarPriority)·d²/Leave²) × (1 + stale/StaleTicks)
//
// nearest entities score about KindWeight, those at the leave radius
// FarPriority × KindWeight; stale is how many ticks old the entity's state
// is (a border replica whose neighbour lags, a far entity held back under
// overload), so a state that finally arrives fresh after a long gap is sent
// first. replication/ghost multiplies this by the class's wire weight and by
// the time the ghost has waited for a send slot (SC-7 aging), so neither is
// repeated here. When more than MaxView entities qualify, the highest
// priorities are kept (SC-2: a crowd must not blow the budget).
//
// # Cost
//
// The tracker never allocates in steady state and never sorts: it marks the
// previous set in a 1-byte stamp per filed entity, by its index in the
// grid's cell order (one lookup and write per member), scans the grid
// cells the leave radius touches once, reading each candidate's stamp in
// order beside it, and builds the new
// set in a scratch buffer it then copies over the old one (or into a
// buffer another set gave up: a set's room follows its size both ways,
// its tracker keeping a few buffers for sets to trade). An entry is 4
// bytes (slot, generation); ids and states stay in the zone's per-slot
// tables, and priorities are not kept: they are read only in the tick of
// the Update that made them, and recomputed then (AppendPriorities, or a
// Viewer inlined in the view's loop) from the tracker's per-Build table
// and the viewer's position the set keeps, bit for bit as the Update
// would have. A set the zone skips in a tick is held (Hold) before the
// tick's first Update replaces that table. The viewer-independent part of
// each priority (kind weight × staleness) and the entry key are computed
// once per grid Build, in the grid's cell order, so a candidate costs its
// position and one 8-byte word; the candidate loop is branch-free (a
// quarter of the candidates lie beyond the leave radius in no
// predictable order); on amd64 it takes four candidates at a time
// (scan_amd64.s, the same float32 operations a lane, held to the Go loop
// by TestScan4MatchesRun). A view that tests its members' distances again
// (a zone's far members) takes them from Viewer.PriorityDist2 where
// Tracker.Current says the table is its grid's; Viewer.BucketRefs is that
// loop for a zone's view references, with the Viewer's fields in registers
// (BucketRefsFolded, on amd64 four members at a time in refs_amd64.s, held to the Go loop by
// TestBucketRefs4MatchesLoop and its fuzz target). BenchmarkInterest: 1,000
// players and 20,000 NPCs in 2 km × 2 km.
//
//	tr := interest.NewTracker(cfg)
//	tr.Resize(slots)
//	tr.Update(&player.Set, self, x, z, g, always) // after g.Build(), each tick
//	view = tr.AppendView(view[:0], &player.Set, ids, kinds, states, &classes) // before the next Build's Update
//
// A Tracker and its Sets are not safe for concurrent use; the zone owns them.
package interest
