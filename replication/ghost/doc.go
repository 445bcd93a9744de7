// Package ghost replicates entity state to one connection the Tribes/Torque
// way: most recent state, within a byte budget, highest priority first, and
// a lost packet costs only a resend of what no newer packet already carries
// (seeds: 004 § Ghosts — the Torque ghost manager; book ch. 7 Listings
// 7.10–7.13; checklist RP-1..RP-12, RL-5, RL-6, SC-7..SC-9, CTL-7).
//
// A server keeps one Table per connection; the client keeps one Mirror.
// Both are pure: time is passed in, nothing reads a clock or starts a
// goroutine. docs/protocol.md (fragment docs/protocol.md §6)
// specifies the ghost section bit by bit.
//
// # Schema
//
// Game code declares each replicated class once: a stable wire id, up to
// 64 field groups (fields that change together share a dirty bit), a
// priority weight, a minimum update interval and whether it is always in
// scope. Every class shares one fixed-size State value. PlayerClass and
// NPCClass ship; a new class is a few lines:
//
//	door := &ghost.Class{ID: 30, Name: "door", Groups: []ghost.Group{ghost.FlagsGroup(2)}}
//	reg, _ := ghost.NewRegistry(ghost.DefaultBounds()) // 4 km × 4 km × 512 m at 1 cm
//	reg.Register(ghost.PlayerClass(names), ghost.NPCClass(names), door)
//
// # Server: one Table per connection
//
//	tab, _ := ghost.NewTable(reg, ghost.DefaultConfig())
//
//	// Every zone tick: the connection's interest set, with priorities.
//	tab.SetView(now, view) // entering → create, leaving → kill, others diffed into dirty masks
//
//	// Every packet: notify header, control object, events, then ghosts.
//	seq, _ := conn.WriteHeader(&w, notify.TypeData, now)
//	n, err := tab.Write(&w, seq, now) // fills what is left of w, ≤ 1200 bytes
//
//	// Every fate notify reports:
//	for _, f := range conn.PopFates(fates[:0]) { tab.OnFate(f) }
//
// A zone that serves many connections seals one Snapshot of its entities
// per tick (SnapshotWriter: each entry checked and quantized once, the
// groups whose bits depend on the State alone — yaw, velocity, health,
// flags, extra — coded once, each group stamped with the snapshot its
// value first appeared in) and hands every connection its view as 4-byte
// ViewRefs into it (NewViewRef: the entry's index and the bucket its
// priority packs by): tab.SetSnapshotView(now, snap, refs). The table then
// keeps the snapshot instead of a State per ghost, finds changed groups by
// stamps, so a skipped view loses nothing, and appends the entry's codes
// to an update instead of encoding those groups per connection; the
// packets are the same bytes SetView would write for the same views
// (TestSnapshotViewsPackLikeEntryViews). A ghost that stays at its entry
// from view to view is taken from a compact per-entry array of changes
// (16 bytes an entry) without reading the entry; one whose view comes
// several snapshots after its last (a node behind) is taken the same way
// while its entry has held the same entity since then (snapView.age). A
// zone that serves a far entity a held state, refreshed every few ticks,
// gives it with SetHeld between refreshes: an unchanged held position is
// then no stop (no rest markers), and the ghost costs no record on its
// held ticks.
//
// Ghost ids are compact per connection (lowest free id first), sent in
// ⌈log2(highest id in use + 1)⌉ bits, and reused only after the client
// acknowledged the kill. Inside the table a ghost is named by its record,
// a dense number below the ghosts in use (a freed ghost's record takes
// the last one's), and its id is only written on the wire: the per-ghost
// arrays are sized by the ghosts in use, not by the highest id, so the
// holes that ghosts leaving leave below it cost nothing. A ghost goes creating → live → killing → free; a
// kill waits until nothing else of that ghost is in flight, so no older
// record can reach the client after it, and a create that raced its kill
// is settled by its fate.
//
// Packing never sorts: candidates fall into log-scale priority buckets
// (kills, then creates, then overdue updates, then updates, then
// speculative resends) and the packet is filled from the top, skipping
// what does not fit. Effective priority is the zone's priority × the class
// weight × (1 + waiting time / StaleUnit); a ghost dirty for MaxStaleness
// jumps the queue, so nothing in scope starves.
//
// On a dropped packet only the groups no later packet carries become dirty
// again: the table keeps, per ghost and group, the newest sequence that
// carried it, so the check of Listing 7.13 is O(groups), not a scan of the
// packets in flight.
//
// Positions are coded against a linear prediction from the two newest
// positions the client holds. The server does not know exactly which ones
// those are while packets are in flight, so it takes every pair the client
// could hold and sends just enough low bits to be right for all of them.
// A ghost walking a straight line costs a few bits. In the CrowdScene
// benchmark (1,000 entities at 64 kbps) this doubles the updates the
// budget buys.
//
// # Client: the Mirror
//
//	mir, _ := ghost.NewMirror(reg, ghost.DefaultMirrorConfig())
//	// After notify accepted the packet's header:
//	if err := mir.Read(&r, now); err != nil { /* malformed: drop the connection */ }
//	for g := range mir.All() {
//		pose, _ := mir.Pose(g, now) // interpolated 100 ms in the past
//		draw(g.Entity, g.Class, pose, g.State)
//	}
//
// Each group of each ghost remembers the server stamp of the value it
// holds, so a reordered packet never rolls state back. The Interpolator
// draws entities at (estimated server time − Delay) between received
// positions, extrapolates at most MaxExtrapolation when updates are late,
// and stops where a rest marker says the entity stopped.
//
// Table and Mirror are not safe for concurrent use; a Registry is
// read-only once a Table or Mirror uses it and may be shared.
package ghost
