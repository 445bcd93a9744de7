package conn

import (
	"sync/atomic"

	"github.com/ghostwire/ghostwire/replication/session"
)

// Counters are the rejections and drops of every connection of a gateway,
// shared (atomics). Only error paths touch them, so connections on the
// happy path never contend on these cache lines. The zero Counters is ready.
type Counters struct {
	// Rejections of datagrams routed to a connection (session.Counters'
	// categories): dropped, no state changed.
	Garbage    atomic.Uint64 // bad kind, size, padding or prefix
	Unexpected atomic.Uint64 // a kind the connection does not take in its state
	Replayed   atomic.Uint64 // duplicate or below the replay/notify window
	AuthFailed atomic.Uint64 // AEAD tag did not verify: forged, bit-flipped, other keys
	WrongConn  atomic.Uint64 // long form or Disconnect naming another connection
	BadHeader  atomic.Uint64 // notify refused the header
	AfterClose atomic.Uint64 // arrived after the session closed
	// ProtocolErrors: an authenticated packet whose sections did not decode
	// (the connection then closes with ReasonProtocolError).
	ProtocolErrors atomic.Uint64

	// Moved counts NAT rebindings (an authenticated packet from a new address).
	Moved atomic.Uint64
	// Rejoins counts players joined again to a zone restarted on another
	// node after a crash (restored from their records).
	Rejoins atomic.Uint64
	// Redirects counts connections told to move to another gateway
	// (Redirect); how they ended is in the gateway's Closed by reason
	// (Redirected when the client followed).
	Redirects atomic.Uint64
	// EventsDropped counts zone events the session could not queue for the
	// client (lane or queue full, too large, staggered class not offered).
	EventsDropped atomic.Uint64
	// OutDropped counts sealed datagrams the writer's queue refused.
	OutDropped atomic.Uint64
	// InputsDropped counts player input with no zone to go to.
	InputsDropped atomic.Uint64
	// MovesResent counts moves sent to a zone again because its reports
	// of applied moves stopped advancing (resendStalled).
	MovesResent atomic.Uint64
	// EventsResent counts ordered events sent again to a zone that
	// restored the player (a Rejoin): the dead owner had not reported
	// them applied (docs/protocol.md §7.20).
	EventsResent atomic.Uint64
	// EventsStale counts events from a zone that no longer owned the
	// player (a paused node that woke up after the player was restored
	// elsewhere), dropped: the restored zone applies and answers them.
	EventsStale atomic.Uint64
	// Relooks counts record lookups of connections whose zone went silent
	// (zoneSilentAfter).
	Relooks atomic.Uint64

	// ControlsSuperseded counts zone ticks' control states a connection
	// replaced with the next tick's before sending them (session
	// ServerStats.ControlsSuperseded, folded in with the packet fates) or
	// that its shard merged into the next while both waited (a shard
	// behind: mergeControl): updates its client never got.
	ControlsSuperseded atomic.Uint64

	// PacketsDelivered and PacketsLost are the fates of the packets sent to
	// clients (notify: acknowledged, or declared dropped): the packet loss
	// the clients see. Each connection folds its own in about once a second
	// and when it ends (see foldFates).
	PacketsDelivered, PacketsLost atomic.Uint64
	// FarAccepted counts client packets accepted a receive window or more
	// past the newest before them (notify's AcceptFar, after their tag
	// verified): a client heard again after a blackout longer than the
	// window, this node paused or the path cut. WindowEvicted counts client
	// packets whose acknowledgement left the window before the client was
	// known to have it (possible false drops at the client). Both are
	// folded in with the packet fates, only by the connections that had one.
	FarAccepted, WindowEvicted atomic.Uint64
	// RTT samples every connection's smoothed round-trip time about once
	// a second (see foldFates).
	RTT RTTHistogram
}

// count files a Receive error under its counter, as session.Counters
// does, and reports which.
func (c *Counters) count(err error) session.Rejection {
	r := session.RejectionOf(err)
	switch r {
	case session.RejectProtocol:
		c.ProtocolErrors.Add(1)
	case session.RejectAuth:
		c.AuthFailed.Add(1)
	case session.RejectReplayed:
		c.Replayed.Add(1)
	case session.RejectWrongConn:
		c.WrongConn.Add(1)
	case session.RejectAfterClose:
		c.AfterClose.Add(1)
	case session.RejectUnexpected:
		c.Unexpected.Add(1)
	case session.RejectGarbage:
		c.Garbage.Add(1)
	default:
		c.BadHeader.Add(1)
	}
	return r
}

// Rejected is the sum of the rejection counters.
func (c *Counters) Rejected() uint64 {
	return c.Garbage.Load() + c.Unexpected.Load() + c.Replayed.Load() + c.AuthFailed.Load() +
		c.WrongConn.Load() + c.BadHeader.Load() + c.AfterClose.Load()
}
