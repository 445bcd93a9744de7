// Package msg holds the in-process messages ghostwire's actors exchange:
// connection → zone (a player's input), zone → connection (control state,
// events, redirects), zone → a connection's ghost manager (one view per
// tick), and the datagrams the gateway hands to connections. Cross-process forms of
// the same messages are protobuf in proto/; these are their in-memory twins,
// built for the hot path: every per-tick or per-packet message is a pointer to
// a pooled struct, so sending one allocates nothing in the steady state.
//
// # Ownership
//
// A pooled message (Input, Inputs, Output, Control, View, Datagram) belongs to
// exactly one owner at a time. The sender fills it, sends the pointer and
// never touches it again; the receiver reads it and calls Release when done,
// after which nobody may use it (nor any slice it handed out). Forgetting
// Release is safe — the garbage collector takes the message — it only costs
// an allocation later. Messages that are not pooled (Join, Leave, Redirect,
// Kick) are rare, small and immutable once sent.
//
// Two of them cross between the same two goroutines on every packet, made
// on one and released on the other, and come back without a sync.Pool
// (whose Get, on the processor that only takes, steals from the other's):
// a gateway reader's compact Datagram copies return through the shards'
// DatagramCache and a depot of magazines; a shard's Inputs (InputCache)
// return from the zones through bounded lock-free stacks, those that keep
// event room on one of their own (InputCache.Room). Both are bounded;
// what does not fit goes to the pool.
//
// # Flow
//
//	conn ──Join/Leave──────────────▶ zone
//	conn ──*Input (moves, events)──▶ zone        one per packet with new moves or events, or
//	conn ──*Inputs─────────────────▶ zone        a connection shard's inputs for the zone from one round
//	zone ──*Control────────────────▶ conn        one per tick: last applied move, state (and the view's nudge, Control.View);
//	                                             to a connection that joined with a Port, a tick's Controls for its
//	                                             shard in one ControlQueue.PostControls (ControlBatch), not a Send each
//	zone ──*Output (events)────────▶ conn        when the zone has events for the client
//	zone ──Redirect / Kick─────────▶ conn        handoff to another zone; removal
//	zone ──ViewSlot.Publish + ViewReady──▶ conn  newest view supersedes (its ghost manager takes it); a
//	                                             connection that joined with Join.ViewWithControl gets the
//	                                             nudge in the tick's Control instead (one message a tick)
//	gateway ──*Datagram────────────▶ conn        routed by source address or connection id, a read batch per shard at once
package msg
