package session

import (
	"time"

	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// Counters are the packet counts both ends keep. Every datagram given to
// Receive is counted once in PacketsIn and, unless accepted, in exactly one
// rejection counter.
type Counters struct {
	PacketsIn, BytesIn   uint64 // datagrams given to Receive
	Accepted             uint64 // datagrams taken: authenticated packets, handshake replies, hints
	PacketsOut, BytesOut uint64 // datagrams Poll returned (handshake requests included)
	DataOut              uint64 // data packets (notify TypeData)
	AckOut               uint64 // ack-only packets: keepalives and bare acks
	DisconnectOut        uint64 // Disconnect copies
	RedirectOut          uint64 // Redirect copies (server)
	// HeaderBytesOut sums, over the protected packets sent, the bytes that are
	// not payload: the cleartext notify header, the 16-byte tag and the
	// long-form prefix when present. HeaderBytesOut / (DataOut + AckOut) is the
	// authenticated header overhead per packet (hdr-B/pkt).
	HeaderBytesOut uint64

	// Rejections: the datagram was dropped and changed no state.
	Garbage    uint64 // not a packet this end takes: bad kind, size, padding or prefix
	Unexpected uint64 // a valid kind this end does not take in its state
	Replayed   uint64 // duplicate or too old: replay window or notify window
	AuthFailed uint64 // the AEAD tag did not verify: forged, bit-flipped, other keys
	WrongConn  uint64 // a long-form or Disconnect packet for another connection
	BadHeader  uint64 // notify refused the header (too far ahead, bad ack, truncated)
	AfterClose uint64 // arrived after the session closed
	// ProtocolErrors counts authenticated packets whose sections did not
	// decode; each starts a disconnect (ReasonProtocolError).
	ProtocolErrors uint64
	// Grown counts Poll calls whose dst had no room and was reallocated.
	Grown uint64
}

// Rejected is the sum of the rejection counters.
func (c *Counters) Rejected() uint64 {
	return c.Garbage + c.Unexpected + c.Replayed + c.AuthFailed + c.WrongConn + c.BadHeader + c.AfterClose
}

// counters is what an endpoint counts: the traffic counters of Counters
// in place, the rare ones apart (rejections, Grown, the Disconnect and
// Redirect copies of a connection's end, and a Server's own), made on the
// first (a healthy connection has none until it ends: 120 bytes of every
// connection otherwise; a peer that sends garbage makes them once, no
// more).
//
// The packet counts are 32-bit (the byte counts 64): a connection sends at
// most 60 packets a second, which takes over two years to wrap, and the
// datagrams given to Receive only wrap after 2^32 of them. 16 bytes of
// every connection, part of what keeps a Server in the 448-byte size class.
type counters struct {
	// What a received packet counts first; what a sent one counts and the
	// rare ones after (endpoint: a Server's datagram reads only these).
	PacketsIn, Accepted uint32
	BytesIn             uint64
	// PacketsOut is not kept: every packet an endpoint sends is counted as
	// one of DataOut, AckOut, DisconnectOut or RedirectOut, and a Client's
	// connect requests as Requests (snapshot and Client.Stats add them up).
	BytesOut        uint64
	DataOut, AckOut uint32
	HeaderBytesOut  uint64
	rare            *rareCounters
}

// rareCounters are the counters that stay 0 on a healthy connection (the
// fields of Counters that counters does not keep, and a Server's own) and
// a Server's Redirect: 120 bytes, made by the first of them.
type rareCounters struct {
	Garbage, Unexpected, Replayed, AuthFailed uint64
	WrongConn, BadHeader, AfterClose          uint64
	ProtocolErrors, Grown                     uint64
	DisconnectOut, RedirectOut                uint64
	// A Server's: ServerStats.Moved, GhostErrors, GhostStalls.
	moved, ghostErrs, ghostStall uint64

	// redir is a Server's Redirect in progress: as rare as these counters.
	redir *redirect
	// discNext is when the next Disconnect copy goes (endpoint.discNext).
	discNext time.Duration
}

// snapshot returns the counters as Counters.
func (c *counters) snapshot() Counters {
	var out Counters
	if r := c.rare; r != nil {
		out.Garbage, out.Unexpected, out.Replayed, out.AuthFailed = r.Garbage, r.Unexpected, r.Replayed, r.AuthFailed
		out.WrongConn, out.BadHeader, out.AfterClose = r.WrongConn, r.BadHeader, r.AfterClose
		out.ProtocolErrors, out.Grown, out.DisconnectOut, out.RedirectOut = r.ProtocolErrors, r.Grown, r.DisconnectOut, r.RedirectOut
	}
	out.PacketsIn, out.BytesIn, out.Accepted = uint64(c.PacketsIn), c.BytesIn, uint64(c.Accepted)
	out.BytesOut, out.DataOut, out.AckOut = c.BytesOut, uint64(c.DataOut), uint64(c.AckOut)
	out.PacketsOut = out.DataOut + out.AckOut + out.DisconnectOut + out.RedirectOut
	out.HeaderBytesOut = c.HeaderBytesOut
	return out
}

// rareCounters returns the rare counters, made on first use.
func (c *counters) rareCounters() *rareCounters {
	if c.rare == nil {
		c.rare = new(rareCounters)
	}
	return c.rare
}

// rareValue returns the rare counters, zero when none was ever counted.
func (c *counters) rareValue() rareCounters {
	if c.rare == nil {
		return rareCounters{}
	}
	return *c.rare
}

// count files a rejection under its counter.
func (c *counters) count(err error) { c.rareCounters().count(err) }

// count files a rejection under its counter.
func (c *rareCounters) count(err error) {
	switch RejectionOf(err) {
	case RejectProtocol:
		c.ProtocolErrors++
	case RejectAuth:
		c.AuthFailed++
	case RejectReplayed:
		c.Replayed++
	case RejectWrongConn:
		c.WrongConn++
	case RejectAfterClose:
		c.AfterClose++
	case RejectUnexpected:
		c.Unexpected++
	case RejectGarbage:
		c.Garbage++
	default: // notify.ErrTooFar, ErrBadAck, ErrBadType, truncated header
		c.BadHeader++
	}
}

// ServerStats is a snapshot of a Server's counters; a plain value.
type ServerStats struct {
	Counters
	RTT, Jitter time.Duration
	Loss        float64 // notify's smoothed loss rate of our packets
	Moved       uint64  // times the client's address changed (NAT rebinding)
	GhostErrors uint64  // GhostWriter.Write errors (an empty ghost section went instead)
	GhostStalls uint64  // packets sent without ghosts because unpopped ghost fates filled the queue
	// ControlsSuperseded counts control states (one per zone tick,
	// SetControl) with a new ack that the next one replaced before any
	// packet carried them: updates the client never got. A tick's state
	// opens the send slot, so this stays near 0 unless the connection's
	// owner handled two ticks' states at once (a stalled shard).
	ControlsSuperseded uint64

	Notify     notify.Stats
	EventsSent event.SenderStats
	EventsRecv event.ReceiverStats
	Moves      move.ApplierStats
	Control    move.ControlStats
}

// ClientStats is a snapshot of a Client's counters; a plain value.
type ClientStats struct {
	Counters
	RTT, Jitter time.Duration
	Loss        float64 // notify's smoothed loss rate of our packets
	// Requests counts connect requests and challenge responses sent;
	// Challenges the Challenge replies taken.
	Requests, Challenges uint64
	// NoConnection counts NoConnection hints received (they switch the client
	// to the long form until the server is heard again).
	NoConnection uint64
	// ConnectTime is how long the handshake took, from the first connect
	// request to the Accepted (0 until connected).
	ConnectTime time.Duration
	// Redirected is 1 once the server's Redirect was taken (Client.Redirect).
	Redirected uint64
	// EventsResent counts ordered events queued again by ContinueEvents
	// (their zone had not reported them applied); EventsUnkept those
	// forgotten for resending because more than 256 KiB waited for the
	// zone's report (docs/protocol.md §7.20).
	EventsResent, EventsUnkept uint64

	Notify     notify.Stats
	EventsSent event.SenderStats
	EventsRecv event.ReceiverStats
	Moves      move.StreamStats
	Predictor  move.PredictorStats
	Ghosts     ghost.MirrorStats
}

// compile-time check that the shipped table is a GhostWriter.
var _ GhostWriter = (*ghost.Table)(nil)
