package gateway

import (
	"sync/atomic"

	"github.com/ghostwire/ghostwire/replication/handshake"
)

// counters are the gateway's counts. The gateway actor writes them, and so
// does the reader for the datagrams it routes itself (datagramsIn, bytesIn,
// routed, inboundDropped); the writer keeps its own. Atomics let Stats read
// them from any goroutine.
type counters struct {
	datagramsIn, bytesIn atomic.Uint64
	garbage              atomic.Uint64
	unexpected           atomic.Uint64
	routed               atomic.Uint64
	inboundDropped       atomic.Uint64
	unknownConn          atomic.Uint64
	noConnSent           atomic.Uint64
	handshakeLimited     atomic.Uint64
	noConnSuppressed     atomic.Uint64
	handshakes           atomic.Uint64
	handshakeReplies     atomic.Uint64
	granted              atomic.Uint64
	keys                 keyCounts // granted, by the token key that opened the token
	spawnFailed          atomic.Uint64
	denied               [256]atomic.Uint64 // by handshake.Reason
	handshakeDropped     atomic.Uint64      // refused without a reply (malformed, wrong magic)
	verified             atomic.Uint64
	moved                atomic.Uint64
	superseded           atomic.Uint64
	redirects            atomic.Uint64
	passedOn             atomic.Uint64
	closed               [256]atomic.Uint64 // by handshake.Reason
	conns, pending       atomic.Int64
	readErrors           atomic.Uint64
	readBackpressure     atomic.Uint64
	readBatches          atomic.Uint64 // ReadBatch calls that returned datagrams
}

// Stats is a snapshot of a gateway's counters: every datagram read is
// counted once in DatagramsIn and then under exactly one fate — routed to a
// connection, a handshake request, or one of the rejections.
type Stats struct {
	DatagramsIn, BytesIn   uint64
	DatagramsOut, BytesOut uint64

	// Rejected at the gateway, before any crypto:
	Garbage     uint64 // Classify refused the first byte or length
	Unexpected  uint64 // a packet kind a server never takes (Challenge, Accepted, Denied, NoConnection)
	UnknownConn uint64 // data for no connection (answered with NoConnection when the rate limit allows)
	// HandshakeLimited: connect requests dropped unanswered by the per-prefix
	// rate limiter.
	HandshakeLimited uint64
	// InboundDropped: the connection already had Conn.MaxInbound datagrams queued.
	InboundDropped uint64

	Routed uint64 // handed to a connection
	// Handshakes: connect requests and challenge responses handled. A
	// request is counted here after its outcome (Replies, Denied,
	// HandshakeDrop), and Stats reads it before them, so no snapshot
	// shows a handled request whose outcome is missing.
	Handshakes uint64
	Replies    uint64 // handshake replies sent (Challenge, Accepted, Denied)
	NoConnSent uint64
	// NoConnSuppressed: NoConnection replies the rate limiter withheld (the
	// datagram itself is counted in UnknownConn).
	NoConnSuppressed uint64
	Granted          uint64
	// TokenKeys splits Granted by the token key that opened the token,
	// named by its tokenkey.Fingerprint: every key held, 0 or not, its
	// count kept across reloads (SetKeys).
	TokenKeys map[string]uint64
	// KeysHeld are the token keys' fingerprints in the order they are
	// tried: the first seals Redirect tokens.
	KeysHeld      []string
	Denied        map[handshake.Reason]uint64 // Denied replies by reason (ServerFull, TokenExpired, TokenUsed, ...)
	HandshakeDrop uint64                      // handshake packets dropped without reply (malformed, not ours)
	SpawnFailed   uint64

	Conns    int64 // connections open (pending ones included)
	Pending  int64 // of which not yet verified
	Verified uint64
	Moved    uint64 // NAT rebindings followed
	// Superseded counts older connections closed because their player
	// connected again (ReasonDuplicate).
	Superseded uint64
	Closed     map[handshake.Reason]uint64 // connections ended, by reason
	// Redirects: connections sent to another gateway (RedirectAll); the
	// ones whose client followed end as Closed[ReasonRedirected].
	Redirects uint64
	// PassedOn: of the Redirects, those sent to clients that arrived
	// while the gateway was redirecting (another node's drain sent them
	// here a moment before this one's began).
	PassedOn uint64

	// Per-connection rejections (after routing; the AEAD and windows run in
	// the connections).
	AuthFailed, Replayed, WrongConn, BadHeader, AfterClose, ConnGarbage, ConnUnexpected uint64
	ProtocolErrors                                                                      uint64
	EventsDropped, InputsDropped                                                        uint64
	// MovesResent: moves a connection sent its zone again after the
	// zone's reports of applied moves stalled (an input lost across NATS).
	MovesResent uint64
	// EventsResent: ordered events a connection sent again to the zone
	// that restored its player (the dead owner had not reported them).
	EventsResent uint64
	// EventsStale: events from a zone that no longer owned the player (a
	// paused node woken after its players were restored elsewhere), dropped.
	EventsStale uint64
	// Relooks: record lookups of connections whose zone went silent.
	Relooks uint64
	// ControlsSuperseded: zone ticks' control states a connection replaced
	// with the next tick's before sending them, or merged into the next
	// while both waited for a shard running behind (updates never sent).
	ControlsSuperseded uint64
	// PacketsDelivered, PacketsLost: fates of the packets sent to clients
	// (folded in about once a second per connection).
	PacketsDelivered, PacketsLost uint64
	// FarAccepted: client packets accepted a receive window or more past
	// the newest before them (a client heard again after a blackout longer
	// than the window). WindowEvicted: acknowledgements of client packets
	// that left the window before the client was known to have them.
	FarAccepted, WindowEvicted uint64

	// Writer.
	WriteDropped, WriteErrors uint64
	// Reader.
	ReadErrors       uint64
	ReadBackpressure uint64 // times the reader waited for a free batch (the gateway actor fell behind)

	// ReadBatches and WriteBatches count the batched system calls
	// (recvmmsg, sendmmsg) that moved a datagram or more: DatagramsIn ÷
	// ReadBatches and DatagramsOut ÷ WriteBatches are the datagrams each
	// call carried, over which its fixed cost spreads.
	ReadBatches, WriteBatches uint64
	// ReadWaits counts the reader's waits on an empty socket (a wake-up
	// each: a recvmmsg that found nothing, a park, a netpoll, a
	// reschedule): ReadBatches ÷ ReadWaits is the batches one wake-up
	// reads, and DatagramsIn ÷ ReadWaits the datagrams (0 outside Linux).
	ReadWaits uint64
	// ShardRounds counts the connection shards' rounds by what started
	// them (conn.RoundPosted, RoundTimer, RoundStraight): each round but
	// a straight one is a wake-up of a shard's goroutine, and each round
	// that sealed datagrams makes a sendmmsg or more (WriteBatches).
	ShardRounds [3]uint64
}

// Rejected sums every rejection at the gateway and in the connections.
func (s Stats) Rejected() uint64 {
	return s.Garbage + s.Unexpected + s.UnknownConn + s.HandshakeLimited + s.InboundDropped +
		s.AuthFailed + s.Replayed + s.WrongConn + s.BadHeader + s.AfterClose + s.ConnGarbage + s.ConnUnexpected
}
