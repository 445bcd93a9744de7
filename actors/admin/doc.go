// Package admin serves the admin API of a zoned node: a NATS micro service
// ("ghostwire_admin", so `nats micro ls/info/stats` sees it) whose requests
// and replies are the protobuf messages of proto/ghostwire/v1/admin.proto.
//
// Every node serves two sets of endpoints:
//
//	gwadmin.<op>               cluster-wide, one queue group: the node that
//	                           takes a request fans out to every node in the
//	                           directory and merges (lists, stats) or routes
//	                           it to the node that owns the player (move to
//	                           the node whose zone owns the entity, kick to
//	                           the node whose gateway holds the connection)
//	gwadmin.node.<node>.<op>   that node's own view and actions (Local)
//
// A move is a teleport inside the zone that owns the player (actors/zone
// Teleport): the zone at the new position takes the player over by the
// ordinary handoff, across nodes by the cluster handoff, so the client
// stays connected and its ghost ids stay stable. The cluster-wide move
// answers once the player is seen settled in its new zone.
//
// Who may call: NATS permissions (actors/node natsembed.go, deploy/nats/)
// give the gwadmin subjects to the admin user for publishing and to nodes
// for serving; a node may publish the per-node subjects only (to fan out).
// Every mutating call is logged with its caller.
//
// Requests are untrusted bytes: decode.go checks them (fuzzed), and a bad
// one is answered with code 400 and a reason, never a panic.
package admin
