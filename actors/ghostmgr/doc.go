// Package ghostmgr is the ghost manager actor: one per client connection,
// owner of that connection's replication/ghost Table. It merges the zone's
// views (newest supersedes, through a msg.ViewSlot), packs ghost sections
// for the connection's packets within the budget the connection grants, and
// applies the fates of the packets that carried them (DESIGN §4 step 5).
//
// The connection actor and the ghost manager never wait on each other. They
// follow replication/session's GhostRelay flow with one credit:
//
//	conn ──GhostFates{Fates, Want, Budget}──▶ ghostmgr   fates of earlier sections; a credit
//	ghostmgr ──GhostSection{Seq g, bits}────▶ conn       only while holding a credit and
//	                                                     only when the table has something
//
// Sections are numbered by the ghost manager (g = 1, 2, 3, …), not by packet:
// the connection's GhostRelay writes a section into the next packet that has
// room, and translates the packet's fate back to g (a section replaced or
// too big is reported dropped at once, so the table re-dirties what it
// carried). Holding at most one credit means at most one section is in
// flight between the two actors, so a busy ghost manager never makes the
// connection queue sections, and a slow connection never makes the ghost
// manager pack for nothing.
package ghostmgr
