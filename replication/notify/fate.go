package notify

import "time"

// Fate is the sender's final word on one packet it sent: delivered or dropped.
// The notify layer reports every sequenced packet's fate exactly once, in send
// order; higher layers (events, ghosts, moves) key their transmission records
// by Seq and react: resend guaranteed events, re-dirty ghost fields, etc.
type Fate struct {
	Seq       uint64        // full 64-bit sequence number of the packet
	Delivered bool          // true: the peer accepted it; false: surely lost
	SentAt    time.Duration // virtual send time passed to WriteHeader
}
