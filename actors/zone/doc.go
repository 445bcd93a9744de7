// Package zone is the zone actor: a thin protoactor wrapper around one
// zones/sim.Zone. It ticks the simulation at a fixed rate, feeds it the
// players' input, sends each player's connection one Control and its ghost
// manager one view per tick, exchanges border replicas with the neighbouring
// zone actors and runs handoffs with them through the pure handoff machine.
//
//	conn ──Join/Leave, *Input, *Inputs─▶ zone ──*Control, Redirect─▶ conn
//	                                      zone ──ViewSlot.Publish + ViewReady─▶ ghost manager
//	zone ◀──HandoffEnvelope / ReplicaEnvelope──▶ neighbouring zones
//
// A tick publishes its views first, then sends its controls: to a
// connection that joined with msg.Join.ViewWithControl (actors/conn's) the
// view's nudge rides in the Control (msg.Control.View), one message per
// player per tick; ViewReady goes only to the others, and for a view with
// no Control. The Controls for connections whose Join names a shard's
// queue (msg.Join.Port, actors/conn's) go a batch a shard
// (msg.ControlBatch): every shard's waiting list is posted each
// msg.DefaultControlWait Controls the tick makes, so none waits for the
// whole tick's work, and the rest before the tick's other sends; the others
// (cluster links) get a Send each. The views refer to the tick's snapshot and hold a reference
// to it (msg.View.SetSnap): the zone's snapshot writer reuses a snapshot
// once no view and no ghost table holds it, instead of allocating one
// every tick. A connection shard sends a zone the inputs of one round in
// one *msg.Inputs, taken as each input alone.
//
// # Ticks without blocking
//
// Each actor owns one time.Timer, re-armed after every tick for the next
// scheduled tick time; its callback only posts a message. Receive never
// waits. A tick is stamped with its scheduled time (the simulation is driven
// by that, not by when the message happens to run); when the actor falls
// behind by a whole period it skips the missed ticks, tells the zone
// (ReportMissedTicks) and counts them, and it reports every tick's measured
// cost (ReportTickCost) so the zone degrades under overload instead of
// drifting. A tick posted on time outranks the queued inputs (zonePriority);
// one posted already late (its slot passed while the last tick ran) goes at
// the default priority, behind the inputs queued before it: otherwise a
// zone whose tick costs more than its period runs ticks back to back and
// its players' inputs wait for the gaps. Pauses have owners (PauseReason:
// an operator or test, the lease, a handover): the zone ticks while none
// holds it, so one owner's resume does not restart what another paused.
//
// The mailbox runs on one goroutine per zone (runner, the actor's
// dispatcher), kept between runs while the zone ticks, not on a new
// goroutine per run: each of those grew its small initial stack on the
// zone's first deep call and freed it on exit.
//
// # Handoff in process
//
// Zone actors are named "zone-<id>", so a zone addresses a neighbour by id
// without a directory. Handoff messages travel as *HandoffEnvelope: the pure
// handoff.Msg plus the player's msg.Join (its connection, ghost manager and
// view slot) so the new owner can reach the player, and the time the
// handoff began (the latency metric). When the new owner acquires a player
// it sends the connection msg.Redirect with the new epoch; the views keep
// flowing through the same ViewSlot, published by whichever zone owns the
// player, and never by two at once (the old owner stops before it sends
// Commit).
//
// # Game events
//
// Client events reach the game through a hook, not through edits to the
// zone: every event of an Input goes to Params.Events (an EventHandler),
// after the Input's moves and before the Input is released (payloads alias
// its arena). The handler answers through an EventContext: Send queues
// events for a player's client (one pooled *msg.Output per Input, at most
// MaxEventBytesPerTick bytes per player per tick, the rest dropped and
// counted), Teleport moves an entity with a forced control state (across a
// handoff too: the Commit tells the new owner to force it). The default is
// the dev game (DevGame): lane-0 echo and lane-1 teleport requests, for
// tests and load tests; a production game installs its own handler.
//
// Events are applied by the player's owner. During a handoff an Input
// still in flight to the old owner is passed on to the new one
// (eventsAway), and the connection, on the new owner's Redirect, sends the
// events the old owner has not reported applied again (the fence drops
// whichever copy comes second), so the new owner applies them in order
// even when it takes the connection's next Input first (docs/protocol.md
// § 7.20).
//
// # Queues
//
//	mailbox      protoactor's priority mailbox; its inputs ≤ MaxQueuedInputs
//	             per joined player, at least 1,024 (inputMailbox: drop the
//	             newest without events, counted in InputsShed; the
//	             connections resend their moves); the rest bounded by the
//	             senders: one Control and view per tick, one replica batch
//	             per neighbour per tick
//	moves        per player in the simulation, ≤ MaxQueuedMoves (drop newest, counted)
//	parked       inputs of a login a takeover displaced, until it is decided (the
//	             player given back: carried; that login gone, or nothing decided
//	             in 10 s: dropped), ≤ 64 a player (drop newest, counted in
//	             InputsDropped)
//	carried      a player given back: its parked inputs and those it sends
//	             meanwhile, applied in order as its event budget lets them
//	             (the first of a tick always), ≤ 128 a player (full: the oldest
//	             applied at once, its events over the budget dropped as usual)
//	views        msg.ViewSlot: newest supersedes
//	ticks        one timer, one tick message in flight at most
//	events out   per player ≤ MaxEventBytesPerTick payload bytes per tick (drop, counted)
//	teleports    one waiting per entity mid-handoff, retried every tick
//	leaves       one waiting per player mid-handoff (a connection's or the
//	             zone's own), retried every tick: taken here if the handoff
//	             failed, passed on to the new owner if not
//	joins        one waiting per player mid-handoff (another login's: the
//	             newest), taken or passed on as the leaves, before them;
//	             one that comes once the player is handed away (its Commit
//	             sent) goes on to the new owner at once
//	unacked      one per player whose Commit is unacknowledged: its state
//	             and a Leave that came meanwhile (passed on too), until the
//	             CommitAck (the Leave passed on again) or the forwarding
//	             record's expiry (the player ended here as a Leave ends it)
package zone
