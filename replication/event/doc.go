// Package event carries events over packet notify: guaranteed-ordered events
// on independent lanes, guaranteed-unordered events, unguaranteed events, and
// seed-001 staggered state updates (checklist RL-1..RL-4, RL-8, RL-9, PN-9,
// G-10; seed 004 § Events, seed 001).
//
// # Walkthrough
//
//	s, _ := event.NewSender(event.DefaultConfig())   // one per connection and direction
//	r, _ := event.NewReceiver(event.DefaultConfig()) // at the peer
//
//	s.SendOrdered(2, chatLine)           // lane 2, copied; ErrLaneFull / ErrQueueFull when bounded out
//	s.SendUnordered(pickup)
//	s.SendUnguaranteed(emote)            // next packet only, if there is room
//	s.SendStaggered(key, state, now)     // sent at 0, 100, 300 ms; newest wins at the receiver
//
//	// Each packet, after the notify header:
//	seq, _ := conn.WriteHeader(&w, notify.TypeData, now)
//	s.Write(&w, seq, now)                // fills what fits; records the units packet seq carries
//	// Each frame:
//	for _, f := range conn.PopFates(fates[:0]) { s.OnFate(f) } // dropped → units requeued at the front
//	s.AckDelivered(delivered) // delivered(seq): conn.Delivered — deliveries whose fates wait behind a lost packet's
//
//	// Receiver side, after notify accepted the packet:
//	r.Read(&rd, func(e event.Event) { ... })   // e.Payload valid during the call
//
// # How guaranteed delivery works
//
// A guaranteed event is cut into units (the whole event, or fragments of at
// most MaxFragment bytes for events up to 64 KiB); each unit gets the next id
// of its stream (an ordered lane or the unordered stream) when first written.
// Each packet's transmission record lists the units it carried. When notify
// reports the packet dropped, every unit it carried that is not acknowledged
// goes back to the front of its lane (RL-2) — if the packet is one of the
// unit's current round (its latest transmission and the redundant copies
// after it): the first verdict on the round is enough, the copies sent an
// interval or two later are covered by the same ack and almost surely lost
// too. A delivered fate acknowledges the units. Nothing is resent on a timer.
// Because notify's fates are exact (a packet reported dropped was never
// accepted), a resend after a drop duplicates nothing but a copy still in
// flight: a later copy's delivery known to notify but whose fate waits
// behind an older lost packet's (fates come in send order) acknowledges the
// unit at once (Sender.AckDelivered). Duplicates also arise from redundant
// copies
// (Config.Redundancy: while a unit's fate is unknown it rides again in the
// next packets, which repairs a loss one packet interval later instead of one
// loss-detection delay later; Config.ResidualLoss adds copies on lossy paths,
// from a loss estimate the fates feed), and the receiver discards them by
// id.
//
// Ids travel truncated to log2(MaxInFlightPerLane)+1 bits and are
// reconstructed against the receiver's next expected id. The sender frees a
// unit only when it is acknowledged, carried by no packet in flight, and every
// lower id of its stream is freed; with at most MaxInFlightPerLane ids between
// the lowest unfreed id and the next one, every id an accepted packet can
// carry lies within MaxInFlightPerLane of the receiver's reference, so the
// reconstruction is exact (docs/protocol.md, "Id encoding").
//
// Memory is bounded on both sides by MaxQueuedBytes of payload, kept in
// recycled power-of-two slabs, and by MaxInFlightPerLane units per stream;
// nothing allocates per packet once those high-water marks were reached.
// A connection keeps state for its events only while it has some: a
// stream's rings and state, the Sender's transmission records and a
// receiving lane's state go back to bounded process-wide pools as soon as
// they hold nothing (a stream and the transmission records at the last
// fate, a lane after the section), its ids kept in a 16-byte reference, and
// the next event takes them again without allocating; the unordered and
// staggered state is made on the first such event. A Server's payloads are
// read into its shard's scratch (Receiver.ReadScratch).
// Time is virtual (now is passed in); nothing reads a clock.
//
// docs/protocol.md (fragment docs/protocol.md §4) specifies the
// section bit by bit.
package event
