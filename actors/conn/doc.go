// Package conn is the connection actor: one per client, the owner of that
// client's replication/session.Server (notify, events, the move stream, the
// control object, keepalive, timeout, graceful close). The gateway spawns it
// for each granted handshake and routes the client's datagrams to it; it
// decrypts them, forwards the player's moves and events to the zone, and
// seals the packets its session says are due, handing them to the gateway's
// writer. Its child, the ghost manager (actors/ghostmgr), supplies the ghost
// section of each packet.
//
// # Why decryption runs here
//
// The gateway is one actor on one core: it only classifies a datagram by its
// first byte and length and looks up the connection (≈ 20 ns,
// BenchmarkRejectGarbage). The AEAD open and seal — the bulk of the ≈ 0.75 µs
// a packet costs (BenchmarkServerPacketPath) — run in the connection actors,
// which protoactor spreads over every core, and they touch state only the
// connection owns (replay window, notify window, keys): doing them in the
// gateway would make one core the ceiling of the whole node and would need
// the keys shared between actors.
//
// # Time
//
// protoactor has no per-actor timers, and a fan-out tick to every connection
// would wake 10,000 actors 100 times a second to send nothing. Each
// connection arms one time.Timer (reused, never reallocated) for
// Server.NextDeadline — the next send slot, ack delay, keepalive, timeout or
// disconnect copy — and the timer sends the actor a wake message. Nothing in
// Receive ever blocks or waits for a reply.
//
// # Queues and their policies
//
//	datagrams in     ≤ Config.MaxInbound queued per connection; the gateway drops newer ones (drop-newest, counted)
//	datagrams out    the gateway writer's bounded queue; full → drop and count (the notify layer treats it as loss)
//	events to client session event sender's bounded lanes; full → drop and count (EventsDropped)
//	ghost sections   one credit: at most one section in flight from the ghost manager
//	views            msg.ViewSlot: the newest view supersedes
//	input to zone    one *msg.Input per datagram that carried new moves or events
//
// # Lifecycle
//
//	started (pending: address unproven, sends nothing)
//	  → first authenticated packet: Verified to the gateway, Join to the zone
//	  → connected: packets both ways
//	  → Close / Kick / Shutdown / peer Disconnect / timeout: draining (Disconnect copies)
//	  → done: Leave to the zone, Closed to the gateway, which stops the actor
package conn
