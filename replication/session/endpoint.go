package session

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/internal/freelist"
	"github.com/ghostwire/ghostwire/replication/internal/intern"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
)

const tagSize = handshake.TagSize

// replayCoversNotify fails to compile unless the replay window reaches
// twice as far below the newest packet as notify can still accept one
// (K − 1, K ≤ MaxReorderThreshold): the reasoning at
// handshake.ReplayWindowSize.
var _ = [1]struct{}{}[min(handshake.ReplayWindowSize/(2*notify.MaxReorderThreshold), 1)-1]

// endpoint is what both ends share once connected: packet protection,
// packet notify, the event layer, keepalive, timeout and the redundant
// Disconnect. Server and Client add their sections on top.
type endpoint struct {
	sess *handshake.Session // nil on a client until Accepted
	nc   *notify.Conn
	evs  *event.Sender
	evr  *event.Receiver

	// sc holds the writer of the packet being built, header then payload
	// (it reaches the ghost writer through an interface, so it lives on
	// the heap rather than on the stack), and a Server's receive buffers
	// when it shares a Scratch. Made on the first packet, or shared by the
	// Servers of one goroutine (Server.ShareScratch): a packet is begun and
	// sealed within one call, a datagram opened and read within one, so
	// nothing stays in it between calls. The reader is the caller's (a
	// Client's own, a Server's from its Scratch or borrowed for the call).
	sc *Scratch

	lim *endpointLimits // shared by the endpoints of one config

	lastRecv time.Duration // newest authenticated packet
	lastSend time.Duration // newest protected packet sent
	// lastData is when the peer's newest data packet arrived (noData
	// before the first). While the peer streams data (one within
	// KeepAlive), we answer every send slot, with an ack-only packet if
	// nothing else: under heavy loss the peer must hear from us at our
	// rate, not at the rate its few surviving packets arrive.
	lastData time.Duration

	// Flags together in one word.
	sentAny bool
	// owed: an ack-eliciting (data) packet arrived since we last sent. Ack-only
	// packets elicit nothing, so two idle ends never ping-pong acks.
	owed bool
	// state is a Server's handshake Session's State, written after every
	// call that may change it (noteState; the Session changes only
	// through its Server), so that a pump that sends nothing (Due,
	// NextDeadlineWith, Done) and a datagram's checks read it here, in a
	// line they read anyway, not in the Session's first line, cold on a
	// loaded node by then (TestStateFollowsTheSession). A Client does
	// not read it. Where a bool that lastData was set took this byte:
	// lastData starts at noData.
	state      handshake.State
	discReason handshake.Reason
	// acked: a packet with an ack section was accepted since the Server
	// last ran its early deliveries (processFates): only an ack makes
	// notify report a packet delivered, so without one there is nothing
	// new for event.Sender.AckDelivered and earlyGhostFates to find.
	acked   bool
	lastHdr uint8 // header bytes of the newest data packet (budget estimates; ≤ 14)
	// probes: probes sent since the peer was last heard (the backoff reads
	// at most 8; it stops counting at 255). discLeft: Disconnect copies
	// still to send (≤ 32). A byte each fits them in the flags' word (two
	// int32s were 8 bytes of every endpoint).
	probes   uint8
	discLeft uint8

	// Last, what a received datagram and the pump after it that sends
	// nothing do not read (the send counters and rare ones at the end of
	// counters, and the probe timer's send time, read only while the peer
	// is silent): a Server puts its own such fields right after them, a
	// cache line that a datagram leaves cold (TestServerDatagramLines).
	c counters // the next Disconnect copy's time (discNext) is with the rare ones

	// Tail-loss probes (QUIC's PTO, RFC 9002 §6.2): with guaranteed data in
	// flight and no data packet sent for a probe timeout, the next slot sends
	// a data packet anyway. It carries redundant copies of the unacknowledged
	// events, and it elicits an ack, so the peer reaches its reorder threshold
	// and reports the loss: an idle connection repairs a lost last packet in a
	// few round trips instead of a few keepalive periods.
	lastDataSent time.Duration
}

// endpointLimits is what an endpoint reads of its config: the same for
// every connection of a config (the timeout comes from the connect token:
// a handful of values), so they share one read-only copy.
type endpointLimits struct {
	keepAlive, timeout time.Duration
	discInterval       time.Duration
	discCopies, lanes  int
	srv                serverLimits // a Server's; zero on a Client
	// events is the event config, for a Server's Receiver made at its
	// client's first event (Server.receiver); zero on a Client.
	events event.Config
}

// epLimits interns the endpointLimits of a process. Bounded: past
// intern.Max distinct values (a server has one or two) an endpoint gets its
// own copy.
var epLimits intern.Table[endpointLimits]

// init makes the endpoint's notify Conn and event Sender, and a Client's
// event Receiver; a Server's (lazyRx) is made at its client's first event
// (Server.receiver).
func (e *endpoint) init(nc notify.Config, ec event.Config, keepAlive, timeout time.Duration, copies int, interval time.Duration, srv serverLimits, lazyRx bool) error {
	var err error
	// The session authenticates every packet between notify's ReadHeader
	// and Accept (open), so notify may take one past its window: a host
	// paused longer than AckWindow packets (8.5 s of a client's 30 Hz)
	// resumes its links instead of refusing every packet until the idle
	// timeout.
	nc.AcceptFar = true
	if e.nc, err = notify.New(nc); err != nil {
		return err
	}
	if e.evs, err = event.NewSender(ec); err != nil {
		return err
	}
	lim := endpointLimits{keepAlive: keepAlive, timeout: timeout, discInterval: interval, discCopies: copies, lanes: ec.Lanes, srv: srv}
	if lazyRx {
		if err := ec.Validate(); err != nil { // as NewReceiver would: a config it refuses fails here, not at the first event
			return err
		}
		lim.events = ec
	} else if e.evr, err = event.NewReceiver(ec); err != nil {
		return err
	}
	e.lim = epLimits.Get(lim)
	e.lastHdr = 3
	e.lastData = noData
	return nil
}

// noData is lastData before the peer's first data packet: so far in the
// past that no peer counts as streaming (peerStreaming), and far enough
// from the Duration's least value that now-noData does not overflow.
const noData = time.Duration(-1 << 62)

// noteState copies the Session's State into e.state: call it after every
// call that may have changed it.
func (e *endpoint) noteState() { e.state = e.sess.State() }

// delivered is notify's early delivery report for the event sender
// (event.Sender.AckDelivered). AckDelivered keeps no reference to it, so
// the method value passed per call stays on the stack.
func (e *endpoint) delivered(seq uint64) bool {
	_, ok := e.nc.Delivered(seq)
	return ok
}

// grow makes room for one datagram of n bytes after dst's contents.
func (e *endpoint) grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) < n {
		e.c.rareCounters().Grown++
		dst = slices.Grow(dst, n)
	}
	return dst
}

// open authenticates and accepts one short-form packet: notify decodes the
// header without changing state, the session checks the replay window and
// opens the AEAD (nonce = the reconstructed sequence), and only then does
// notify commit. The payload is opened into buf (MaxPacketSize bytes: a
// Client's own, a Server's borrowed for the call) and returned; r reads the
// header, which is decoded into h (the caller's: 176 bytes, not copied
// around).
func (e *endpoint) open(now time.Duration, pkt []byte, from netip.AddrPort, buf *[MaxPacketSize]byte, r *bitstream.Reader, h *notify.Header, hs *handshake.Scratch) ([]byte, bool, error) {
	r.Reset(pkt)
	if err := e.nc.ReadHeaderInto(r, h); err != nil {
		return nil, false, err
	}
	pos := r.Pos()
	hl := (pos + 7) >> 3
	if len(pkt)-hl < tagSize {
		return nil, false, handshake.ErrGarbage
	}
	if pad := pos & 7; pad != 0 && pkt[hl-1]>>pad != 0 {
		return nil, false, handshake.ErrGarbage // the header's padding bits are zero
	}
	// The rings AcceptHeader reads, asked for before the AEAD's work.
	e.nc.PrefetchAccept(h)
	pt, moved, err := e.sess.OpenWith(hs, buf[:0], pkt[:hl], pkt[hl:], h.Seq, from)
	if err != nil {
		return nil, false, err
	}
	e.noteState() // pending → connected with the first
	if err := e.nc.AcceptHeader(h, now); err != nil {
		// ReadHeader said yes and nothing ran in between: unreachable, but a
		// packet notify did not take must not count as received.
		return nil, moved, err
	}
	e.lastRecv = now
	e.probes = 0
	e.acked = e.acked || h.HasAck()
	e.c.Accepted++
	if h.Type == notify.TypeData {
		e.owed = true
		e.lastData = now
	}
	return pt, moved, nil
}

// resetPayload points r at an opened payload, every bit of it readable and
// none after it, like r.Reset(pt), but over pt's buffer up to 8 bytes past
// its end when the buffer has them (the AEAD opens into a MaxPacketSize
// array, so it does): the reader's one-load fast path needs 8 bytes from
// the field's first byte, and a client's payload is short (moves and
// events, ≈ 10–30 bytes), so without the slack most of its fields are in
// the last 8 bytes and take the slow path (≈ 90 instructions a field
// instead of ≈ 15). The bytes past pt are never returned: every read is
// bounded by the limit and masked to its width.
func resetPayload(r *bitstream.Reader, pt []byte) {
	r.ResetBits(pt[:min(cap(pt), len(pt)+8)], 8*len(pt))
}

// beginPacket writes the notify header of a packet of type t into the free
// space of dst and points the writer at the payload area: at most size bytes in all,
// tag included. It returns dst grown to hold the packet, where the packet
// starts, the header length and the sequence number.
func (e *endpoint) beginPacket(dst []byte, t notify.PacketType, now time.Duration, size int) ([]byte, int, int, uint64, error) {
	dst = e.grow(dst, size)
	start := len(dst)
	buf := dst[start : start+size]
	// The header goes through e.w too (one writer per endpoint, not two),
	// which then moves on to the payload area.
	w := e.writer()
	w.Reset(buf[:size-tagSize])
	seq, err := e.nc.WriteHeader(w, t, now)
	if err != nil {
		return dst, start, 0, 0, err
	}
	hl := w.Len()
	w.Reset(buf[hl : size-tagSize])
	return dst, start, hl, seq, nil
}

// sealPacket encrypts the payload written to the writer in place and appends the
// tag: dst[start:] becomes header ‖ ciphertext ‖ tag.
func (e *endpoint) sealPacket(dst []byte, start, hl int, seq uint64, now time.Duration, prefix int) ([]byte, error) {
	pl := e.sc.w.Len()
	hdr := dst[start : start+hl]
	out, err := e.sess.SealWith(&e.sc.hs, dst[:start+hl], hdr, dst[start+hl:start+hl+pl], seq)
	if err != nil {
		return dst[:start], err
	}
	e.lastSend, e.sentAny, e.owed = now, true, false
	e.c.BytesOut += uint64(len(out) - start + prefix)
	e.c.HeaderBytesOut += uint64(hl + tagSize + prefix)
	return out, nil
}

// ackOnly builds an ack-only packet (keepalive): a header, no payload, a tag.
func (e *endpoint) ackOnly(dst []byte, now time.Duration, prefix int) ([]byte, error) {
	n := len(dst)
	dst, start, hl, seq, err := e.beginPacket(dst, notify.TypeAck, now, MaxPacketSize-prefix)
	if err != nil {
		return dst[:n], err
	}
	out, err := e.sealPacket(dst, start, hl, seq, now, prefix)
	if err != nil {
		return dst[:n], err
	}
	e.c.AckOut++
	return out, nil
}

// discNext is when the next Disconnect copy goes (0 before startDisconnect):
// kept with the rare counters, which startDisconnect makes, since a
// connection sends Disconnects once, at its end (8 bytes of every endpoint
// otherwise).
func (e *endpoint) discNext() time.Duration {
	if r := e.c.rare; r != nil {
		return r.discNext
	}
	return 0
}

// startDisconnect begins a graceful close: the next Polls send the
// Disconnect copies. Returns false if the session cannot send (pending or
// already closed).
func (e *endpoint) startDisconnect(now time.Duration, r handshake.Reason) bool {
	if e.discLeft > 0 || e.sess == nil {
		return false
	}
	switch e.sess.State() {
	case handshake.StateConnected:
		e.discLeft, e.discReason = uint8(e.lim.discCopies), r
		e.c.rareCounters().discNext = now
		return true
	case handshake.StatePending:
		e.sess.Close(r)
		e.noteState()
	}
	return false
}

// pollDisconnect sends the next Disconnect copy if one is due.
func (e *endpoint) pollDisconnect(now time.Duration, dst []byte) ([]byte, error) {
	if e.discLeft == 0 || now < e.discNext() {
		return dst, nil
	}
	n := len(dst)
	out, err := e.sess.AppendDisconnect(dst, e.discReason) // draining
	if err != nil {
		e.discLeft = 0
	} else {
		e.discLeft--
		e.c.rareCounters().discNext = now + e.lim.discInterval
		e.c.rareCounters().DisconnectOut++
		e.c.BytesOut += uint64(len(out) - n)
	}
	if e.discLeft == 0 {
		e.sess.Close(e.discReason) // draining done, or it cannot go on
	}
	e.noteState() // one note for each way the State went
	if err != nil {
		return dst[:n], fmt.Errorf("session: disconnect: %w", err)
	}
	return out, nil
}

// keepAliveDue reports whether an ack-only packet should go out at now.
func (e *endpoint) keepAliveDue(now time.Duration) bool {
	return !e.sentAny || now-e.lastSend >= e.lim.keepAlive
}

// eventsOutstanding reports whether a guaranteed event is queued or not yet
// acknowledged.
func (e *endpoint) eventsOutstanding() bool { return e.evs.Outstanding() }

// probeAt is when a tail-loss probe is due if something guaranteed is
// outstanding: a probe timeout after the newest data packet, the timeout
// being srtt + 4·rttvar (at least two send intervals), doubled per probe
// without an answer, at most KeepAlive.
func (e *endpoint) probeAt(interval time.Duration) time.Duration {
	pto := max(e.nc.RTT()+4*e.nc.RTTVar(), 2*interval)
	pto = min(pto<<min(e.probes, 8), e.lim.keepAlive)
	return e.lastDataSent + pto
}

// sentData records a data packet for the probe timer.
func (e *endpoint) sentData(now time.Duration, probe bool) {
	e.lastDataSent = now
	if probe && e.probes < math.MaxUint8 {
		e.probes++
	}
}

// peerStreaming reports whether the peer sent data within KeepAlive.
func (e *endpoint) peerStreaming(now time.Duration) bool {
	return now-e.lastData < e.lim.keepAlive
}

// timedOut reports whether the peer was silent for the timeout.
func (e *endpoint) timedOut(now time.Duration) bool {
	return now-e.lastRecv >= e.lim.timeout
}

// nextSlot is the send slot after the one that just went at now: one
// interval on from the scheduled slot, never in the past and never now
// itself (a late slot is skipped, not sent twice).
func nextSlot(next, interval, now time.Duration) time.Duration {
	next = max(next+interval, now)
	if next == now {
		next += interval
	}
	return next
}

// rxScratch is what Server.Receive borrows for the call: the buffer it
// opens a packet into, the reader that decodes it, its notify header, the
// moves' decode buffer (move.Applier.ReadInto) and the buffer event
// payloads are copied into for delivery (event.Receiver.ReadScratch: a
// payload is shorter than the packet). One borrow a datagram: the free list's
// mutex is shared by every shard, and a second list for the moves alone
// (Applier.Read's) was ≈ 1 % of a loaded server's CPU in Lock and Unlock.
type rxScratch struct {
	buf   [MaxPacketSize]byte
	r     bitstream.Reader
	h     notify.Header
	moves [move.MaxWindow]move.Move
	ev    [MaxPacketSize]byte
	hs    handshake.Scratch // the AEAD's nonce and associated data
}

// sharedRx is the receive buffers of a shared Scratch (nil: none).
func (e *endpoint) sharedRx() *rxScratch {
	if e.sc != nil {
		return e.sc.rx
	}
	return nil
}

// writer is the endpoint's packet writer (its Scratch's, made on first use).
func (e *endpoint) writer() *bitstream.Writer {
	if e.sc == nil {
		e.sc = new(Scratch)
	}
	return &e.sc.w
}

// Scratch is what Servers use only within a call: the writer a packet is
// built in, and the buffers a datagram is opened and decoded in. A Server
// makes its own writer (56 bytes) and borrows the buffers (3.4 KB) from a
// free list shared by every goroutine for each datagram; the Servers of one
// goroutine — a connection shard's — can share one Scratch instead
// (Server.ShareScratch): 56 bytes fewer a connection, and no trip to the
// free list's mutex, which every shard takes, per datagram. The zero
// Scratch has no buffers of its own (NewScratch makes them). Not safe for
// concurrent use: every Server sharing one is called from one goroutine.
type Scratch struct {
	w  bitstream.Writer
	rx *rxScratch        // nil: borrowed from payloads for each datagram
	hs handshake.Scratch // the AEAD's nonce and associated data when sealing
}

// NewScratch returns a Scratch with receive buffers of its own, for the
// Servers of one goroutine to share.
func NewScratch() *Scratch { return &Scratch{rx: new(rxScratch)} }

// payloads: the scratch of Server.Receive, as many as Receives ever ran at
// once (a buffer per connection would cost every idle connection 1.2 KB,
// the reader 40 bytes more).
var payloads freelist.List[rxScratch]
