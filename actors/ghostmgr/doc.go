// Package ghostmgr is a connection's ghost manager: the owner of that
// connection's replication/ghost Table. It merges the zone's views (newest
// supersedes, through a msg.ViewSlot; at most one per millisecond, the
// wire's stamp resolution), supplies the ghost section of each data packet
// the connection's session.Server builds — packed at that moment, within
// exactly the room the packet has left — and applies the fates of the
// packets that carried them (DESIGN §4 step 5). A connection notes a
// view's nudge when it comes (Take) and takes the slot's newest and
// applies it (Apply) in the pump that packs, so views, fates and packing
// visit the table back to back; until then the view waits in the slot,
// where the zone's next tick reuses it.
//
// It is not an actor: the connection (actors/conn) calls it on the
// connection's own goroutine, as the session.GhostWriter of its Server.
// Packing in place of a separate actor costs nothing in parallelism — a node
// has thousands of connections to spread over its cores — and saves two
// messages and a section copy per packet, a second mailbox per player and
// the budget estimate a section packed ahead needed.
package ghostmgr
