// Package sim is one zone's simulation core: the entities it owns, read-only
// replicas of its neighbours' entities near the border, a spatial grid, each
// player's interest set, and the handoff machine that moves entities to and
// from neighbours. It is pure: the zone actor calls it, passes the time in,
// and carries its messages.
//
// # One tick (Step)
//
//  1. handoff timers: resend, abort, expire (zones/handoff)
//  2. players: apply queued moves in sequence order with the configured step
//     function (move.Walk), each with its own Dt, within a time credit that
//     grows by one tick period per tick (a client cannot move faster than
//     real time); clamp at the world's edge; flag a teleport when the
//     ground covered exceeds MaxSpeed × input time; any of these ask the
//     connection for a correction
//  3. NPCs: seeded wanderers (their generator state travels with them)
//  4. crossings: an entity past HandoffMargin beyond the border that has
//     been here MinDwell is offered to the zone it is in, and frozen
//  5. one Control and one View per player with a connection
//  6. the grid is rebuilt with owned entities and replicas (2 to 6 and
//     replicas' expiry are one walk over the slots, each slot's in this
//     order, then the grid's Build)
//  7. every player's interest set and priorities (zones/interest)
//  8. one ReplicaBatch per neighbour: owned entities within BorderRange of it
//
// Views come two ways: AppendView copies each entity's state into a
// player's view (for views bound for another process), AppendViewRefs
// lists references into the tick's Snapshot, built once on first use and
// shared by every view of the tick.
//
// Between ticks the actor feeds Input (moves from connections), Handoff
// (messages from other zones) and Replicas (neighbours' batches), and sends
// what Pending returns.
//
// # Border replicas and handoff together
//
// A zone keeps its neighbours' entities near the border as replicas in its
// grid, so its players see across the border, and an entity that crosses
// keeps its slot: the old owner turns it into a replica of the new owner
// (Released), the new owner turns its replica into an owned entity
// (Acquired). Nobody's interest set sees it leave and come back, and the
// entity id, hence every client's ghost id for it, never changes. A
// player's interest set travels with it, so hysteresis continues at the new
// owner. A third zone that only watches (both are its neighbours, as at a
// corner) keeps its replica too: the old owner lists the entity to it until
// the Commit is acknowledged, and when it stops, the replica is held until
// a batch the new owner built after that (by the new owner's clock, so a
// batch that comes late still counts as of when it was built) adopts it in
// place or leaves it out, instead of vanishing for the ticks between the
// two owners' batches. The old owner holds its replica of the entity the
// same way. Those holds end ReplicaTTL of live time after the old owner
// let go at the latest (a new owner that died).
//
// # Entity ids
//
// A player's entity id is the id it joins with: the connect token's
// PlayerID, so every client's ghost of that player carries it. NPC ids have
// the top bit set (NPCID); Join refuses player ids in that range
// (ErrBadID), so the two never collide. Unless Config.NoSeqExtra, a
// player's replicated State.Extra[0..1] hold its last applied move
// sequence (low and high 32 bits) for the tick of the state.
//
// # Far members at a lower update rate
//
// A view's far members (beyond Overload.FarFraction × the enter radius,
// 50 m by default) get a held state, refreshed every Config.FarEvery ticks
// (default 2, staggered by slot; 1: every tick), near members the tick's
// (SC-8: less important objects are updated less often). The snapshot
// carries each slot's held state as a second entry: on the tick it is
// refreshed a copy of the live entry (checked and coded once,
// ghost.SealHeld), between refreshes the previous snapshot's entry
// carried over and marked held (as ghost.Snapshot.SetHeld marks it), so a
// ghost table writes nothing for a held ghost until its next refresh. The
// zone keeps no copy of the held state. Views as entries (AppendView)
// cannot mark a state held, so they never hold.
//
// # Overload
//
// The actor reports each tick's cost (ReportTickCost). Overruns raise a
// degradation level in a fixed order: far-entity update rate first (the
// FarEvery interval doubled per level), then interest update rate, then NPC
// step rate (see overload.go); every step is counted in Stats.
//
// Not safe for concurrent use.
package sim
