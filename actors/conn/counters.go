package conn

import (
	"errors"
	"reflect"
	"sync/atomic"

	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/notify"
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
	// RTT samples every connection's smoothed round-trip time about once
	// a second (see foldFates).
	RTT RTTHistogram
}

// rejection is what a Receive error counts as (Counters.count): the first
// of these whose sentinel its chain holds, in this order, as errors.Is
// tested them one after another.
type rejection uint8

const (
	rejectProtocol rejection = iota
	rejectAuth
	rejectReplayed
	rejectWrongConn
	rejectAfterClose
	rejectUnexpected
	rejectGarbage
	rejectHeader // none of them: notify refused the header
)

// rejections are the sentinels a rejection names, by errors.Is, in
// rejection order.
var rejections = [...]struct {
	err error
	r   rejection
}{
	{session.ErrProtocol, rejectProtocol},
	{handshake.ErrAuth, rejectAuth},
	{handshake.ErrDuplicate, rejectReplayed}, {handshake.ErrStale, rejectReplayed},
	{notify.ErrDuplicate, rejectReplayed}, {notify.ErrStale, rejectReplayed},
	{handshake.ErrWrongConn, rejectWrongConn},
	{handshake.ErrClosed, rejectAfterClose}, {session.ErrClosed, rejectAfterClose},
	{handshake.ErrUnexpected, rejectUnexpected}, {session.ErrNotConnected, rejectUnexpected},
	{handshake.ErrGarbage, rejectGarbage}, {handshake.ErrMalformed, rejectGarbage},
}

// sentinelType is the dynamic type of every sentinel in rejections
// (errors.New's; TestRejectionSentinelsShareAType), and bySentinel their
// rejections by value: an error of that type is looked up once, not
// compared with each (an interface compare of the same type is a call,
// ≈ 25 instructions, thirteen for an error none of them is).
var (
	sentinelType = reflect.TypeOf(rejections[0].err)
	bySentinel   = func() map[error]rejection {
		m := make(map[error]rejection, len(rejections))
		for _, s := range rejections {
			m[s.err] = s.r
		}
		return m
	}()
)

// count files a Receive error under its counter, as session.Counters
// does, and reports which.
func (c *Counters) count(err error) rejection {
	r := rejectionOf(err)
	switch r {
	case rejectProtocol:
		c.ProtocolErrors.Add(1)
	case rejectAuth:
		c.AuthFailed.Add(1)
	case rejectReplayed:
		c.Replayed.Add(1)
	case rejectWrongConn:
		c.WrongConn.Add(1)
	case rejectAfterClose:
		c.AfterClose.Add(1)
	case rejectUnexpected:
		c.Unexpected.Add(1)
	case rejectGarbage:
		c.Garbage.Add(1)
	default:
		c.BadHeader.Add(1)
	}
	return r
}

// rejectionOf is err's rejection, its chain walked once: thirteen
// errors.Is in a row walked it thirteen times for a header the session
// refused (the default, the last), ≈ 1,600 instructions of every rejected
// datagram's ≈ 6,300 (BenchmarkReaderRouteCold). A chain with an Is
// method of its own takes errors.Is (rejectionSlow): only errors.Is knows
// what that method matches.
func rejectionOf(err error) rejection {
	r := rejectHeader
	if !walkRejection(err, &r) {
		return rejectionSlow(err)
	}
	return r
}

// walkRejection lowers *r to the rejection of any sentinel in err's tree
// (errors.Is's tree: Unwrap() error and Unwrap() []error), and reports
// false, having stopped, at an error with an Is method.
func walkRejection(err error, r *rejection) bool {
	for err != nil {
		if _, ok := err.(interface{ Is(error) bool }); ok {
			return false
		}
		if reflect.TypeOf(err) == sentinelType { // comparable: a map key
			if s, ok := bySentinel[err]; ok && s < *r {
				*r = s
			}
		}
		switch x := err.(type) {
		case interface{ Unwrap() error }:
			err = x.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				if !walkRejection(e, r) {
					return false
				}
			}
			return true
		default:
			return true
		}
	}
	return true
}

// rejectionSlow is rejectionOf by errors.Is, sentinel after sentinel.
func rejectionSlow(err error) rejection {
	for _, s := range &rejections {
		if errors.Is(err, s.err) {
			return s.r
		}
	}
	return rejectHeader
}

// Rejected is the sum of the rejection counters.
func (c *Counters) Rejected() uint64 {
	return c.Garbage.Load() + c.Unexpected.Load() + c.Replayed.Load() + c.AuthFailed.Load() +
		c.WrongConn.Load() + c.BadHeader.Load() + c.AfterClose.Load()
}
