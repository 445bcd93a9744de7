package notify

import "errors"

// Rejections of a received packet. ReadHeader and Accept return them without
// changing protocol state (only the matching Stats counter moves); the caller
// drops the packet.
var (
	// ErrDuplicate: this sequence number was already accepted.
	ErrDuplicate = errors.New("notify: duplicate sequence")
	// ErrStale: the sequence is below the receive horizon: it was abandoned (the
	// peer has been, or will be, told it was dropped) or precedes the connection.
	ErrStale = errors.New("notify: stale sequence")
	// ErrTooFar: the sequence lies more than AckWindow beyond the newest accepted
	// one. A peer never does that unless AckWindow packets in a row were lost;
	// a forged packet that did would freeze the connection, so it is refused.
	ErrTooFar = errors.New("notify: sequence too far ahead")
	// ErrBadType: packet type 3 (reserved) on read, or an unknown type on write.
	ErrBadType = errors.New("notify: bad packet type")
	// ErrBadAck: the ack section is malformed or acknowledges a sequence this end
	// never sent.
	ErrBadAck = errors.New("notify: bad ack")
	// ErrNotDecoded: Accept was given a Header that no successful ReadHeader returned.
	ErrNotDecoded = errors.New("notify: header not decoded")
)

// Send-side errors.
var (
	// ErrFatesPending: every in-flight slot holds a record whose fate is resolved
	// but was not collected; call PopFates.
	ErrFatesPending = errors.New("notify: fates not popped")
	// ErrSeqSpan: a sequence or ack field would need more than 32 bits, i.e. the
	// peer has not acknowledged anything for 2^31 packets. The connection is dead.
	ErrSeqSpan = errors.New("notify: sequence span exceeds 32 bits")
	// ErrConfig is wrapped by every error Config.Validate returns.
	ErrConfig = errors.New("notify: invalid config")
)
