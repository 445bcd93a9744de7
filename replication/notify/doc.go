// Package notify is ghostwire's packet-notify layer: every packet carries a
// sequence number and an acknowledgement of the peer's packets, and the sender
// learns each packet's fate — delivered or dropped — exactly once, in send
// order. It resends nothing; higher layers (events, ghosts, moves) react to
// fates (checklist PN-1; seed 004 § Packet Notify, the Tribes/TNL notify
// protocol).
//
// # Walkthrough
//
//	c, _ := notify.New(notify.DefaultConfig()) // one Conn per peer pair
//
//	// Send: the header first, then payload sections.
//	w.Reset(buf[:])
//	seq, err := c.WriteHeader(&w, notify.TypeData, now)
//	// ... write payload, remember what went into packet seq ...
//
//	// Receive, two phases: decode without changing state, then commit.
//	r.Reset(pkt)
//	h, err := c.ReadHeader(&r) // ErrDuplicate / ErrStale / ErrTooFar: drop it
//	// (a future AEAD layer verifies the packet here, nonce = h.Seq)
//	err = c.Accept(h, now)
//	// ... read payload ...
//
//	// Every frame:
//	c.Tick(now)                  // receiver-side time threshold
//	fates = c.PopFates(fates[:0]) // in send order; resend or re-dirty on !Delivered
//
// # Why the fates are exact
//
// The receiver alone decides when a missing packet is given up: once a packet
// K = ReorderThreshold sequence numbers later was accepted, or once the gap has
// been open for a reorder time (Tick). It never accepts an abandoned packet
// afterwards. The sender declares a packet dropped only when an ack says the
// receiver abandoned it, so the sender's delivered set equals the receiver's
// accepted set. A packet displaced by up to K−1 slots is still accepted. Acks
// are redundant (every header repeats every fact the peer may not have yet) and
// small: ack-of-ack trims the report to what is unconfirmed, so a loss-free
// steady-state header is 21 bits with the packet type.
//
// docs/protocol.md (fragment docs/protocol.md §3) specifies the wire
// format bit by bit. Time is virtual (now since an arbitrary epoch); nothing
// here reads a clock or starts a goroutine.
package notify
