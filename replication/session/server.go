package session

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// GhostWriter supplies the ghost section of a server packet. *ghost.Table
// satisfies it; so does *GhostRelay (sections packed by another owner).
type GhostWriter interface {
	// Pending reports whether there is anything to send: a data packet is
	// worth sending for ghosts alone only then.
	Pending() bool
	// Write fills what is left of w with a ghost section for packet seq and
	// returns the records written (ghost.Table.Write's contract: always a
	// well-formed section; seq increases from call to call).
	Write(w *bitstream.Writer, seq uint64, now time.Duration) (int, error)
}

// ServerHandler receives what the client sent, synchronously inside Receive.
type ServerHandler interface {
	// Move gets each new move exactly once, in sequence order (move.Applier
	// already dropped redundant copies and counted gaps). The newest move of
	// each section has HasCRC set: the client's CRC of its predicted state
	// after it, which SetControl compares.
	Move(m move.Move)
	// Event gets each delivered event; e.Payload is valid only during the call.
	Event(e event.Event)
}

// Server is the server end of one connection, above an established
// handshake session: it opens the client's packets (replay window, AEAD,
// notify), applies the client's moves exactly once in order and delivers its
// events, and builds each outgoing datagram — notify header | control object
// | events | ghosts | tag — within a send rate and a byte budget. It keeps the
// connection alive, times it out, closes it gracefully with a reason sent
// redundantly, and follows the client across NAT rebindings.
//
// Lifecycle (handshake.State): pending (granted; the client's address is
// unproven, nothing is sent) → connected (first authenticated packet) →
// draining (sending its Disconnect copies) → closed.
//
// The zero Server is not usable; call NewServer. Not safe for concurrent use;
// the connection (actors/conn) owns it.
type Server struct {
	// The Server's seven cache lines (448 bytes, the size class's objects
	// start on a line) are laid out by what reads them. By a connection's
	// next datagram its state has left the cache, and each line touched is
	// a miss. A received datagram and the pump after it that sends nothing
	// (Due, NextDeadlineWith) read lines 0, 1, 3, 4 and 5; line 2 holds
	// what only a send, a packet with events or a silent peer reads (the
	// endpoint's send counters, rare counters and probe time at its end,
	// then the event numbering's lanes), and line 6 what only a zone tick
	// and a send read (the control state, the byte budget). A datagram
	// read all of lines 0–5 while those were spread over them
	// (TestServerDatagramLines).

	// ghostPkts: packets whose ghost section had records, fate pending, as
	// ghostSeq entries. Its bound (MaxInFlight) also bounds ghostFates, a
	// slice that grows on demand so an idle connection does not hold
	// MaxInFlight fates. First: 32 bytes ahead of the endpoint put its
	// cold tail and the lanes after it in line 2.
	ghostPkts seqRing[uint32]

	e  endpoint
	ev serverNumbering // per-player numbers of ordered events (§7.20)
	h  ServerHandler

	ap   move.Applier
	cw   *move.ControlWriter
	crcs crcFIFO // CRC-carrying moves SetControl may ask for

	ctlApplied uint64 // the move the state reflects (the ack we send)
	// ctlSent: the low 32 bits of the ack of the newest data packet, only
	// ever compared with ctlApplied's, which is never 2^32 moves ahead of
	// it (a tick applies a few); superseded counts
	// ServerStats.ControlsSuperseded, at most one a tick, here and not with
	// the rare counters: a loaded host (a shard that handles two ticks'
	// states at once) makes it count on most connections. One word for
	// both, where each took one.
	ctlSent    uint32
	superseded uint32

	nextData   time.Duration
	lastTick   time.Duration // when the newest packet that carried a tick left
	ghostFates []ghostFate

	// The flags sit together: one word, where each between wider fields
	// took one of its own.
	hasControl bool
	ctlSentAny bool
	// ackOwed: a client packet repeated only moves already applied, so the
	// client lacks our ack — the data packet carrying it was lost. Answer
	// with a control section even when nothing changed: an ack-only packet
	// carries none, and the client would repeat its moves unacknowledged
	// for as long as the server has nothing else to send.
	ackOwed bool
	// tickDue: a zone tick's control state arrived (SetControl) and no data
	// packet left since. It opens the send slot at once (no sooner than
	// tickGap after the previous tick's packet): each tick's update leaves
	// in its own packet as soon as it exists, instead of waiting for a slot
	// timer whose phase has nothing to do with the ticks.
	tickDue bool
	// tickSent: a packet that carried a tick left (at lastTick); until then
	// nothing is held (holdUntil).
	tickSent bool
	// replyLong: the client's newest authenticated packet was long form, so
	// ours are too (a client sharing its socket sorts packets by id).
	replyLong bool
	// redirecting: a Redirect is in progress: copies until the client's
	// Disconnect acknowledges one or redir.until passes.
	redirecting bool
	fatesSmall  uint8 // PopGhostFates calls in a row that used little of ghostFates' room

	// Last, in line 6: what only a send reads — the control state
	// (SetControl, Poll) and the byte budget (Poll).
	ctlState move.ControlState
	credit   float64 // bytes
	creditAt time.Duration
}

// lim is the Server's limits (shared: endpointLimits).
func (s *Server) lim() *serverLimits { return &s.e.lim.srv }

// redirect returns the Redirect in progress (redirecting is set): it
// lives with the rare counters, made by Redirect.
func (s *Server) redirect() *redirect { return s.e.c.rare.redir }

// redirect is where a Redirect sends the client and when its copies go.
type redirect struct {
	to          netip.AddrPort
	tok         []byte
	next, until time.Duration
}

// serverLimits is what a Server reads of its ServerConfig after NewServer
// (the rest went to notify, event and move), and the send interval. It is
// the same for every connection of a config: it lives in the endpoint's
// shared endpointLimits (8 bytes of pointer per connection, shared with the
// endpoint's own limits, instead of 48; and of a 248-byte copy of the whole
// config before that).
type serverLimits struct {
	Bandwidth, MaxPacketSize, MinPacketSize int
	RedirectInterval, RedirectTimeout       time.Duration
	interval                                time.Duration // 1/SendRate
	maxInFlight                             int32         // Notify.MaxInFlight: ghostPkts' bound
}

// NewServer returns the server end of the connection sess (from
// handshake.Grant.Session). h receives moves and events (nil discards them).
// now starts the timeout clock: a client that never sends an authenticated
// packet is dropped after cfg.Timeout.
func NewServer(sess *handshake.Session, cfg ServerConfig, h ServerHandler, now time.Duration) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if sess == nil || sess.Role() != handshake.RoleServer {
		return nil, fmt.Errorf("%w: NewServer needs a server session", ErrConfig)
	}
	if cfg.RedirectInterval == 0 {
		cfg.RedirectInterval = DefaultRedirectInterval
	}
	if cfg.RedirectTimeout == 0 {
		cfg.RedirectTimeout = DefaultRedirectTimeout
	}
	s := &Server{h: h}
	srv := serverLimits{
		Bandwidth: cfg.Bandwidth, MaxPacketSize: cfg.MaxPacketSize, MinPacketSize: cfg.MinPacketSize,
		RedirectInterval: cfg.RedirectInterval, RedirectTimeout: cfg.RedirectTimeout,
		interval:    time.Second / time.Duration(cfg.SendRate),
		maxInFlight: int32(cfg.Notify.MaxInFlight),
	}
	if err := s.e.init(cfg.Notify, cfg.Events, cfg.KeepAlive, cfg.Timeout, cfg.DisconnectCopies, cfg.DisconnectInterval, srv, true); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	cw, err := move.NewControlWriter(cfg.Control)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s.cw = cw
	s.e.sess = sess
	s.e.noteState()
	s.e.lastRecv = now
	s.ev.init(s.e.lim.lanes)
	s.lastTick = now - s.lim().interval
	s.credit = float64(cfg.MaxPacketSize)
	s.creditAt = now
	return s, nil
}

// deliver hands the client's event to the handler, an ordered one with its
// per-player number (§7.20).
func (s *Server) deliver(ev event.Event) {
	if ev.Class == event.Ordered {
		ev.Seq = s.ev.number(ev.Lane)
	}
	if s.h != nil {
		s.h.Event(ev)
	}
}

// apply hands the new moves of a section to the handler, in order, and
// remembers the CRC the last of them carries (the only one that can: the
// section's newest). SetControl asks for a move's CRC only once the zone
// applied it, after the handler got it, so the CRC may go in first.
func (s *Server) apply(moves []move.Move) {
	if n := len(moves); n > 0 && moves[n-1].HasCRC {
		s.crcs.push(moves[n-1].Seq, moves[n-1].CRC)
	}
	if s.h == nil {
		return
	}
	for i := range moves {
		s.h.Move(moves[i])
	}
}

// ID is the connection id.
func (s *Server) ID() handshake.ConnID { return s.e.sess.ID() }

// Addr is the client's current address; it changes when a packet
// authenticates from a new one (Receive reports moved).
func (s *Server) Addr() netip.AddrPort { return s.e.sess.Addr() }

// State is the session's lifecycle state.
func (s *Server) State() handshake.State { return s.e.state }

// Reason is why the connection closed (the client's Disconnect, Timeout, or
// the reason given to Close); ReasonNone while open.
func (s *Server) Reason() handshake.Reason { return s.e.sess.Reason() }

// Done reports that the connection is closed and nothing is left to send:
// the owner may forget it (and Consume its token).
func (s *Server) Done() bool {
	return s.e.state == handshake.StateClosed && s.e.discLeft == 0
}

// LastApplied is the newest move handed to ServerHandler.Move.
func (s *Server) LastApplied() uint64 { return s.ap.LastApplied() }

// ShareScratch makes the Server build its packets and open its datagrams
// in sc (see Scratch) instead of a writer of its own (56 bytes a
// connection: the Server is in the 512-byte size class, not the 576) and
// buffers borrowed from the shared free list for each datagram. sc holds
// nothing between calls; but every Server sharing it must be called from
// one goroutine, as the connections of one shard are. Call it before the
// first Poll or Receive, or between two calls.
func (s *Server) ShareScratch(sc *Scratch) { s.e.sc = sc }

// RTT is notify's smoothed round-trip time.
func (s *Server) RTT() time.Duration { return s.e.nc.RTT() }

// Stats returns a snapshot of the counters.
func (s *Server) Stats() ServerStats {
	rare := s.e.c.rareValue()
	var recv event.ReceiverStats
	if s.e.evr != nil {
		recv = s.e.evr.Stats()
		recv.Sections += uint64(s.ev.empty.quiet) // read, not yet counted there (readEvents)
	} else {
		recv.Sections = s.ap.Stats().Sections // every section read was empty (emptyEvents)
	}
	return ServerStats{
		Counters:           s.e.c.snapshot(),
		RTT:                s.e.nc.RTT(),
		Jitter:             s.e.nc.Jitter(),
		Loss:               s.e.nc.LossRate(),
		Moved:              rare.moved,
		GhostErrors:        rare.ghostErrs,
		GhostStalls:        rare.ghostStall,
		ControlsSuperseded: uint64(s.superseded),
		Notify:             s.e.nc.Stats(),
		EventsSent:         s.e.evs.Stats(),
		EventsRecv:         recv,
		Moves:              s.ap.Stats(),
		Control:            s.cw.Stats(),
	}
}

// SendEvent queues payload (copied) as a guaranteed event, delivered exactly
// once and in order on its lane. Errors: event.ErrBadLane, ErrTooLarge,
// ErrLaneFull, ErrQueueFull.
func (s *Server) SendEvent(lane int, payload []byte) error {
	s.ev.set(numEvsIdle, false)
	return s.e.evs.SendOrdered(lane, payload)
}

// SendUnordered queues payload as a guaranteed event delivered in arrival
// order.
func (s *Server) SendUnordered(payload []byte) error {
	s.ev.set(numEvsIdle, false)
	return s.e.evs.SendUnordered(payload)
}

// SendUnguaranteed queues payload for the next packet only, if it fits.
func (s *Server) SendUnguaranteed(payload []byte) error {
	s.ev.set(numEvsIdle, false)
	return s.e.evs.SendUnguaranteed(payload)
}

// SetControl gives the zone's authoritative control-object state after it
// applied every move up to applied (the server's ack): call it once per zone
// tick, when that tick's state arrives. If move applied carried the client's
// CRC, the two are compared (move.ControlWriter.Check): a mismatch sends a
// correction. The first call turns the control section on.
//
// It opens the send slot: the next Poll sends a data packet with this
// tick's update at once if there is anything to say (a new ack, a
// correction, events, ghosts), no sooner than half a slot after the
// previous tick's packet (tickGap). So every tick's state leaves in its own
// packet as soon as it arrived, and none is superseded by the next tick's
// while it waits for a send slot: a slot timer running at the tick rate
// with a phase of its own sat, for some connections, right where the
// ticks' arrival jitter put them, so some slots saw no new tick and the
// next one two — an update skipped, a 100 ms gap at 20 Hz. Between ticks,
// events and ghosts wait for the next tick's packet, or for the slot timer
// when ticks stop (tickGrace).
func (s *Server) SetControl(applied uint64, state move.ControlState) {
	s.hasControl = true
	s.tickDue = true
	s.ctlState = state
	if applied != s.ctlApplied && uint32(s.ctlApplied) != s.ctlSent && s.ctlSentAny {
		s.superseded++ // the previous tick's ack never left
	}
	if applied == 0 || applied == s.ctlApplied {
		s.ctlApplied = applied
		return
	}
	s.ctlApplied = applied
	if crc, ok := s.crcs.find(applied); ok {
		s.cw.Check(move.Move{Seq: applied, CRC: crc, HasCRC: true}, &s.ctlState)
	}
}

// EventsInFlight reports whether guaranteed events sent to the client are
// still queued or unacknowledged.
func (s *Server) EventsInFlight() bool { return s.e.eventsOutstanding() }

// EventGen is the generation of the connection's ordered-event numbering
// (docs/protocol.md §7.20): the client's, when it continues a numbering
// from an earlier connection, else this connection's id. 0 until the
// client's first data packet fixed it. Events of one generation are
// numbered 1, 2, 3, … per lane across the client's connections
// (event.Event.Seq): a zone keeps the newest it applied per lane and
// drops the ones at or below it.
func (s *Server) EventGen() uint64 { return s.ev.gen }

// SetEventsApplied reports that the player's zone applied lane's ordered
// events up to seq (of this connection's generation): the client stops
// keeping them for a resend. Older reports are ignored.
func (s *Server) SetEventsApplied(lane int, seq uint64) { s.ev.setApplied(lane, seq) }

// ForceControl makes the next data packet carry the full control state, for
// changes the client cannot predict (teleport, respawn).
func (s *Server) ForceControl() { s.cw.Force() }

// Close starts a graceful close with r (a disconnect reason): the next Polls
// send the Disconnect copies, then the session is closed. A session whose
// client never proved its address closes at once (there is no one to tell).
func (s *Server) Close(now time.Duration, r handshake.Reason) {
	if !r.IsDisconnect() {
		r = handshake.ReasonServerShutdown
	}
	s.e.startDisconnect(now, r)
}

// Redirect moves the client to another server: the next Polls send a
// Redirect naming server with token (a connect token for the same player
// that lists server, handshake.IssueToken) every RedirectInterval, and
// nothing else, until the client's Disconnect (ReasonRedirected)
// acknowledges it — the session then closes with that reason — or
// RedirectTimeout passes, when the server disconnects it with
// ReasonServerShutdown instead (an older client drops the Redirect unread
// and sees only that). Packets from the client are still taken meanwhile.
// A session whose client never proved its address closes at once; one that
// is already closing keeps closing. docs/protocol.md §7.19.
func (s *Server) Redirect(now time.Duration, server netip.AddrPort, token []byte) error {
	if len(token) != handshake.TokenSize || !server.IsValid() {
		return fmt.Errorf("%w: redirect to %v with a %d-byte token", ErrConfig, server, len(token))
	}
	switch s.e.state {
	case handshake.StatePending:
		s.e.sess.Close(handshake.ReasonServerShutdown)
		s.e.noteState()
		return nil
	case handshake.StateConnected:
	default:
		return ErrClosed
	}
	if s.e.discLeft > 0 || s.redirecting {
		return ErrClosed
	}
	s.redirecting = true
	s.e.c.rareCounters().redir = &redirect{to: server, tok: append([]byte(nil), token...), next: now, until: now + s.lim().RedirectTimeout}
	return nil
}

// Redirecting reports whether a Redirect waits for the client's
// acknowledgement.
func (s *Server) Redirecting() bool {
	return s.redirecting && s.e.state == handshake.StateConnected && s.e.discLeft == 0
}

// pollRedirect sends the next Redirect copy when due, or gives up on the
// acknowledgement and starts the Disconnect.
func (s *Server) pollRedirect(now time.Duration, dst []byte) ([]byte, error) {
	e := &s.e
	if now >= s.redirect().until {
		s.redirecting = false
		e.startDisconnect(now, handshake.ReasonServerShutdown)
		return e.pollDisconnect(now, dst)
	}
	if now < s.redirect().next {
		return dst, nil
	}
	n := len(dst)
	out, err := e.sess.AppendRedirect(dst, s.redirect().to, s.redirect().tok)
	if err != nil {
		s.redirecting = false
		e.startDisconnect(now, handshake.ReasonServerShutdown)
		return dst[:n], fmt.Errorf("session: redirect: %w", err)
	}
	s.redirect().next = now + s.lim().RedirectInterval
	e.lastSend, e.sentAny = now, true
	e.c.rareCounters().RedirectOut++
	e.c.BytesOut += uint64(len(out) - n)
	return out, nil
}

// PopGhostFates appends the fates of the packets whose ghost section carried
// at least one record, one per packet; Seq is the sequence GhostWriter.Write
// got. They come in send order, except that a packet known delivered while
// an older packet's fate is still open is reported at once, ahead of it
// (ghost.Table and GhostRelay resolve fates in any order). Feed every one to
// ghost.Table.OnFate (or GhostRelay.OnFate). Call it at least before every
// Poll that may write ghosts, and after it (for the fates Poll's own
// receive tick resolved): a write must see every fate known before it, and
// while fates wait here, later packets carry no ghosts once the queue is
// full (Stats.GhostStalls). They may wait between sends — actors/conn
// leaves them here until a send is due, so that the fates, the view and the
// write visit the table's records back to back; GhostFatesWaiting tells.
func (s *Server) PopGhostFates(dst []notify.Fate) []notify.Fate {
	for _, g := range s.ghostFates {
		dst = append(dst, g.fate())
	}
	// A backlog (fates waiting while the owner was busy) grows the slice;
	// its room goes back after ghostFatesIdle pops in a row that used at
	// most an eighth of it, so neither a backlog keeps it for the
	// connection's life nor a wavering fate count reallocates it often.
	if c := cap(s.ghostFates); c > ghostFatesKeep && len(s.ghostFates) <= c/8 {
		if s.fatesSmall++; s.fatesSmall >= ghostFatesIdle {
			s.ghostFates, s.fatesSmall = nil, 0
			return dst
		}
	} else {
		s.fatesSmall = 0
	}
	s.ghostFates = s.ghostFates[:0]
	return dst
}

// ghostFate is a fate waiting for PopGhostFates: the packet's sequence
// with ghostDelivered (sequences stay far below 2^63) and its send time,
// 16 bytes where a notify.Fate takes 24 (nearly every connection holds a
// few: 48 → 32 B at two).
type ghostFate struct {
	seq    uint64
	sentAt time.Duration
}

const ghostDelivered = 1 << 63

func ghostFateOf(f notify.Fate) ghostFate {
	g := ghostFate{seq: f.Seq, sentAt: f.SentAt}
	if f.Delivered {
		g.seq |= ghostDelivered
	}
	return g
}

func (g ghostFate) fate() notify.Fate {
	return notify.Fate{Seq: g.seq &^ ghostDelivered, Delivered: g.seq&ghostDelivered != 0, SentAt: g.sentAt}
}

// GhostFatesWaiting reports whether fates wait for PopGhostFates.
func (s *Server) GhostFatesWaiting() bool { return len(s.ghostFates) > 0 }

// ghostFatesKeep is the room of ghostFates that PopGhostFates never gives
// back (256 bytes); ghostFatesIdle the pops in a row (about 3 s at 20 Hz)
// that used at most an eighth of a larger one before it goes.
const (
	ghostFatesKeep = 16
	ghostFatesIdle = 64
)

// Receive handles one datagram routed to this connection: a short-form or
// long-form protected packet, or a Disconnect. The checks run cheapest first
// and change no state until the packet authenticated: classify, notify header
// (ReadHeader), replay window, AEAD open, then notify Accept, the move and
// event sections, and the fates the header's acks resolved. moved reports that
// the packet authenticated from a new address with the newest sequence (NAT
// rebinding): the session now lives at Addr(); update the routing.
//
// A rejected packet returns an error wrapping the cause (handshake.ErrAuth,
// ErrDuplicate, ErrStale, ErrWrongConn, ErrGarbage, ErrUnexpected, notify's
// errors, ErrClosed) and is counted. A packet that authenticated but does not
// decode returns ErrProtocol and starts a disconnect (ReasonProtocolError).
func (s *Server) Receive(now time.Duration, pkt []byte, from netip.AddrPort) (moved bool, err error) {
	moved, err = s.receive(now, pkt, from)
	if err != nil {
		s.e.c.count(err)
	}
	return moved, err
}

func (s *Server) receive(now time.Duration, pkt []byte, from netip.AddrPort) (bool, error) {
	e := &s.e
	e.c.PacketsIn++
	e.c.BytesIn += uint64(len(pkt))
	if e.state == handshake.StateClosed {
		return false, ErrClosed
	}
	kind, err := handshake.Classify(pkt)
	if err != nil {
		return false, err
	}
	short, long := pkt, false
	switch kind {
	case handshake.KindData:
	case handshake.KindRouted:
		long = true
		var id handshake.ConnID
		if id, short, err = handshake.SplitRouted(pkt); err != nil {
			return false, err
		}
		if id != e.sess.ID() {
			return false, handshake.ErrWrongConn
		}
	case handshake.KindDisconnect:
		if _, err := e.sess.OpenDisconnect(pkt); err != nil {
			return false, err
		}
		e.noteState() // closed
		e.c.Accepted++
		e.discLeft = 0
		return false, nil
	default:
		return false, handshake.ErrUnexpected
	}
	sc := e.sharedRx()
	if sc == nil {
		sc = payloads.Get()
		defer payloads.Put(sc)
	}
	r := &sc.r
	h := &sc.h
	pt, moved, err := e.open(now, short, from, &sc.buf, r, h, &sc.hs)
	if err != nil {
		return false, err
	}
	if moved {
		s.e.c.rareCounters().moved++
	}
	if newest, _ := e.nc.Newest(); h.Seq == newest {
		// The newest packet yet (notify accepted it just now and keeps the
		// newest: sequence numbers never repeat) sets the reply form.
		s.replyLong = long
	}
	switch h.Type {
	case notify.TypeData:
		if err := s.readSections(r, pt, &sc.moves, sc.ev[:]); err != nil {
			return moved, s.protocolError(now, err)
		}
	case notify.TypeAck:
		if len(pt) != 0 {
			return moved, s.protocolError(now, errAckPayload)
		}
	default:
		return moved, s.protocolError(now, errPacketType)
	}
	s.processFates()
	return moved, nil
}

var (
	errAckPayload = errors.New("ack-only packet with a payload")
	errPacketType = errors.New("packet type not used by this protocol")
)

// readSections decodes a client payload: moves | events. Each decoder
// validates its whole section before it changes anything. Event payloads
// are read into ev (the receive scratch's; nil: the Receiver's own).
func (s *Server) readSections(r *bitstream.Reader, pt []byte, moves *[move.MaxWindow]move.Move, ev []byte) error {
	resetPayload(r, pt)
	// Nothing applied (the newest move did not change: every applied move
	// advances it) and something repeated: the client lacks our ack.
	last, dups := s.ap.LastApplied(), s.ap.Duplicates()
	applied, err := s.ap.ReadNew(r, moves)
	if err != nil {
		return fmt.Errorf("move section: %w", err)
	}
	s.apply(applied)
	if s.ap.LastApplied() == last && s.ap.Duplicates() > dups {
		s.ackOwed = true
	}
	// The usual rest, two 0 bits — no event base, an empty event section
	// — in one peek: readBase's absent base and readEvents' empty section
	// without their calls and bit-by-bit reads.
	if v, n, ok := r.PeekWindow(); ok && n >= 2 && v&3 == 0 {
		r.TryReadBits(2) // peeked, so they are there
		if !s.ev.is(numKnown) {
			s.ev.noBase(s.e.sess.ID())
		}
		s.emptyEvents()
		return nil
	}
	if err := s.ev.readBase(r, s.e.sess.ID()); err != nil {
		return fmt.Errorf("event base section: %w", err)
	}
	if err := s.readEvents(r, ev); err != nil {
		return fmt.Errorf("event section: %w", err)
	}
	return nil
}

// readEvents reads the event section into the Receiver. An empty one —
// its end bit alone: most packets' — it counts in s.ev.empty instead,
// until the Receiver's next idle trim is due, and hands the count over
// then or before the next section with events (Receiver.SkipEmpty), which
// leaves the Receiver as if it had read each: by a connection's next
// packet its Receiver has left the cache on a loaded server, and counting
// the section there was a cache miss a datagram.
func (s *Server) readEvents(r *bitstream.Reader, ev []byte) error {
	q := &s.ev.empty
	if v, n, ok := r.PeekWindow(); ok && n > 0 && v&1 == 0 {
		r.TryReadBits(1) // the end bit: peeked, so it is there
		s.emptyEvents()
		return nil
	}
	evr := s.receiver()
	if q.quiet > 0 {
		evr.SkipEmpty(int(q.quiet))
		q.quiet = 0
	}
	err := evr.ReadScratch(r, ev, s.deliver) // a method value on the stack: Read keeps no reference
	q.until = trimIn(evr.TrimIn())
	return err
}

// receiver is the event Receiver, made at the first section with events.
// Most clients send events now and then, some never (80 bytes of every
// connection); until the first, emptyEvents counts nothing, and the
// Receiver starts as one that read every section before as empty: each
// data packet has one, as it has one move section (move.Applier's
// count).
func (s *Server) receiver() *event.Receiver {
	if s.e.evr != nil {
		return s.e.evr
	}
	evr, err := event.NewReceiver(s.e.lim.events) // validated by NewServer
	if err != nil {
		panic("session: a Server's event config went bad: " + err.Error())
	}
	// The sections before this packet's: its move section is counted
	// already, and ReadScratch counts its event section.
	evr.SkipEmpty(int(s.ap.Stats().Sections) - 1)
	s.e.evr = evr
	return evr
}

// emptyEvents counts an empty event section read (readEvents), handing
// the count to the Receiver when its next trim falls due.
//
// Before the client's first event there is no Receiver to count for
// (receiver): until stays 0, and each empty section comes here.
func (s *Server) emptyEvents() {
	q := &s.ev.empty
	if q.until > 1 {
		q.until--
		q.quiet++
		return
	}
	if s.e.evr == nil {
		return
	}
	q.until = trimIn(s.e.evr.SkipEmpty(int(q.quiet) + 1))
	q.quiet = 0
}

// emptySections is what a Server counts of its client's empty event
// sections instead of its Receiver (readEvents): quiet, those read and
// not yet counted there; until, how many more sections the Receiver's
// next idle trim is away (Receiver.TrimIn, at most 255; 0 before the
// first section: unknown).
type emptySections struct{ quiet, until uint8 }

// trimIn saturates a Receiver.TrimIn to emptySections.until's width: a
// Server that stops counting at 255 hands its count over early, which the
// Receiver takes as it would the sections one by one.
func trimIn(n int) uint8 { return uint8(min(n, 255)) }

func (s *Server) protocolError(now time.Duration, err error) error {
	s.processFates() // notify accepted the packet: its acks count
	s.e.startDisconnect(now, handshake.ReasonProtocolError)
	return fmt.Errorf("%w: %w", ErrProtocol, err)
}

// processFates hands every fate notify resolved to the event layer, the
// control writer and the ghost fate queue, then the early deliveries of
// ghost packets (earlyGhostFates).
func (s *Server) processFates() {
	e := &s.e
	for {
		f, ok := e.nc.PopFate()
		if !ok {
			break
		}
		// A delivered fate changes nothing in an idle Sender (numEvsIdle):
		// it is not read then, nor asked for early deliveries below.
		if !f.Delivered || !s.ev.is(numEvsIdle) {
			e.evs.OnFate(f)
			s.ev.set(numEvsIdle, e.evs.FatesIdle())
		}
		// Nor in an idle ControlWriter, either fate (numCtlHeld).
		if s.ev.is(numCtlHeld) {
			s.cw.OnFate(f)
			s.ev.set(numCtlHeld, !s.cw.FatesIdle())
		}
		s.ev.onFate(f.Seq, f.Delivered)
		for s.ghostPkts.len() > 0 && ghostSeqBefore(s.ghostPkts.front(), f.Seq) {
			s.ghostPkts.pop() // unreachable: notify reports every packet once, in order
		}
		if s.ghostPkts.len() > 0 && ghostSeqIs(s.ghostPkts.front(), f.Seq) {
			early := s.ghostPkts.front()&ghostEarly != 0
			s.ghostPkts.pop()
			if !early {
				s.ghostFates = append(s.ghostFates, ghostFateOf(f))
			}
		}
	}
	if e.acked {
		e.acked = false
		if !s.ev.is(numEvsIdle) {
			e.evs.AckDelivered(e.delivered)
		}
		s.earlyGhostFates()
	}
}

// earlyFate marks a GhostRelay's pkts entry whose delivered fate was
// queued ahead of its turn (sequence numbers stay far below 2^62).
const earlyFate = 1 << 63

// A ghostSeq is a ghostPkts entry: the low 31 bits of the packet's
// sequence, and ghostEarly once its delivered fate was queued ahead of its
// turn. 31 bits tell the packets in flight apart and order them (at most
// MaxInFlight ≤ 2^16 of them, all at or below notify's NextSeq), and the
// full sequence is NextSeq less the distance: half the ring's bytes of
// 64-bit entries (32 of 64 at its first size, on every connection with
// ghosts in view).
const (
	ghostEarly   = 1 << 31
	ghostSeqMask = ghostEarly - 1
)

func ghostSeqOf(seq uint64) uint32 { return uint32(seq) & ghostSeqMask }

// ghostSeqIs reports whether v is packet seq's entry.
func ghostSeqIs(v uint32, seq uint64) bool { return (v^uint32(seq))&ghostSeqMask == 0 }

// ghostSeqBefore reports whether v's packet was sent before packet seq
// (serial order on 31 bits: the top bit of the shifted difference).
func ghostSeqBefore(v uint32, seq uint64) bool { return int32((v-uint32(seq))<<1) < 0 }

// ghostSeqFull is the sequence of entry v, given next, notify's NextSeq: every
// packet in flight is below it and within MaxInFlight of it.
func ghostSeqFull(v uint32, next uint64) uint64 {
	return next - uint64((uint32(next)-v)&ghostSeqMask)
}

// earlyGhostFates queues the delivered fate of every ghost packet notify
// knows delivered while an older packet's fate is still open. Fates pop in
// send order, so one lost packet holds back the deliveries of everything
// sent after it until the client gives it up and says so — K packets and an
// ack's trip, ~350 ms at 20 packets/s and 100 ms RTT. Meanwhile the table
// counted each of those ghosts as unconfirmed and pressed it (ConfirmDeadline)
// into a capped share of every packet, where the ghosts whose update really
// was lost waited their turn among ten times as many that the client already
// had (CrowdScene seed 4: 1.15 s stale). ghost.Table resolves fates in any
// order; the in-order fate of a packet reported early is not queued again.
func (s *Server) earlyGhostFates() {
	n := s.ghostPkts.len()
	if n == 0 {
		return
	}
	next := s.e.nc.NextSeq()
	for i := 0; i < n; i++ {
		v := s.ghostPkts.at(i)
		if v&ghostEarly != 0 {
			continue
		}
		seq := ghostSeqFull(v, next)
		if at, ok := s.e.nc.Delivered(seq); ok {
			s.ghostPkts.set(i, v|ghostEarly)
			s.ghostFates = append(s.ghostFates, ghostFate{seq: seq | ghostDelivered, sentAt: at})
		}
	}
}

// NextDeadline is the earliest time, at or after now, at which Poll may have
// something to do: a Disconnect copy, a data slot (when there is something to
// send or an ack to give), a keepalive, or the timeout. An actor arms its
// timer with it. It cannot know about ghosts: Poll again when the ghost table
// gets a view or a GhostRelay an offer. A result ≤ now means "Poll now", and
// such a Poll always sends or moves the deadline on.
func (s *Server) NextDeadline(now time.Duration) time.Duration {
	e := &s.e
	switch e.state {
	case handshake.StateClosed:
		return maxDuration
	case handshake.StateDraining:
		return e.discNext()
	}
	d := e.lastRecv + e.lim.timeout
	if e.discLeft > 0 {
		return min(d, e.discNext())
	}
	if e.state == handshake.StatePending {
		return d
	}
	if s.redirecting {
		return min(d, s.redirect().next, s.redirect().until)
	}
	d = min(d, e.lastSend+e.lim.keepAlive)
	slot := max(now, s.nextData)
	if s.hasContent(slot) {
		d = min(d, s.dataSlot(now))
	} else if !e.sentAny || e.owed || e.peerStreaming(slot) {
		d = min(d, max(slot, s.holdUntil()))
	} else if s.outstanding() {
		d = min(d, max(slot, e.probeAt(s.lim().interval)))
	}
	return d
}

// tickGrace: after a packet that carried a tick, events and ghosts wait
// this much longer than 1/SendRate, so those that arrive between ticks ride
// with the next tick's packet (one datagram per tick) and go on their own
// only when ticks stop coming. Acks alone (rule 5) wait for it too: the
// next tick's packet carries them. Sent at the plain slot, an ack went
// whenever a tick reached the connection a little after the slot (the
// zone's jitter), and that tick's packet followed it within milliseconds:
// 3 ack-only packets a player-second on top of 20 ticks' at 1,000 players
// (cmd/capacity), each a system call's share and a seal for an ack the
// tick's packet gave anyway.
func (s *Server) tickGrace() time.Duration { return s.lim().interval / 2 }

// holdUntil: events and ghosts that arrive between ticks wait for the next
// tick's packet until then (tickGrace after the slot that follows the
// newest tick's packet), so a connection sends one datagram per tick. Not a
// field: it follows from lastTick (8 bytes of every Server).
func (s *Server) holdUntil() time.Duration {
	if !s.tickSent {
		return 0
	}
	return s.lastTick + s.lim().interval + s.tickGrace()
}

// tickGap is the least time between two ticks' packets: half a slot. A
// tick whose state reached the connection late (its zone's tick or the path
// here was slow) and the next one, on time, both get their packet — that
// next tick must not wait for a slot timer, or the jitter returns as a gap
// — while two ticks bunched together on their way here (a batch from
// another process) are not sent as two packets at once. It counts from the
// previous tick's packet, not from a packet that went without a tick
// (events or ghosts after tickGrace, a probe): a tick arriving just after
// one of those goes at once; held back, it could be superseded by the
// next. While the zone ticks at SendRate (both default to 20 Hz) the
// connection sends one data packet per tick, and one more only when a tick
// is over half a slot late.
func (s *Server) tickGap() time.Duration { return s.lim().interval / 2 }

// dataSlot is the earliest time a data packet may leave: when a tick's
// state is due, at once (tickGap after the previous data packet); else at
// the send slot, and after tickGrace while ticks come.
func (s *Server) dataSlot(now time.Duration) time.Duration {
	if s.tickDue {
		return max(now, s.lastTick+s.tickGap())
	}
	return max(now, s.nextData, s.holdUntil())
}

// NextDeadlineFor is NextDeadline for a connection that passes ghosts to
// Poll: while ghosts has something to send, the data slot is the next
// send's deadline (Poll then builds a data packet for the ghosts, with
// any ack owed), as for events.
//
// A connected session (no Disconnect copies, no Redirect: nearly every
// call, one a pump) takes NextDeadline's last case here, with the state
// read once: a connection's pump after a datagram with nothing due ran
// both whole, ≈ 140 instructions. TestNextDeadlineForMatchesReference holds it
// to NextDeadline.
func (s *Server) NextDeadlineFor(now time.Duration, ghosts GhostWriter) time.Duration {
	if ghosts == nil {
		return s.NextDeadline(now)
	}
	return s.NextDeadlineWith(now, ghosts.Pending())
}

// NextDeadlineWith is NextDeadlineFor with its ghosts' Pending already
// read (ghostsPending): for a driver that keeps it where it reads it
// anyway (actors/conn: the ghost manager's State in the Conn's first
// line, not the manager's own, cold on a loaded node).
func (s *Server) NextDeadlineWith(now time.Duration, ghostsPending bool) time.Duration {
	e := &s.e
	if e.state != handshake.StateConnected || e.discLeft != 0 || s.redirecting {
		return s.NextDeadline(now)
	}
	d := min(e.lastRecv+e.lim.timeout, e.lastSend+e.lim.keepAlive)
	slot := max(now, s.nextData)
	// Pending ghosts are content: Poll holds an owed ack and a probe with
	// them until the data slot, as it does events. Giving the ack's slot
	// instead said "now" all through a hold (a tick late, the table still
	// pending), and the driver pumped the connection again a microsecond
	// later, and again, until the hold ended
	// (TestNoDeadlineNowWhileGhostsWaitForTheTick).
	if s.hasContent(slot) || ghostsPending {
		return min(d, s.dataSlot(now))
	}
	if !e.sentAny || e.owed || e.peerStreaming(slot) {
		d = min(d, max(slot, s.holdUntil()))
	} else if s.outstanding() {
		d = min(d, max(slot, e.probeAt(s.lim().interval)))
	}
	return d
}

// GhostSlot is the deadline a connected session's ghosts would set if
// they were pending (maxDuration in any other state): for a driver whose
// ghost fates wait unapplied, one of which may make its table pending
// again (a lost record), while the table is not pending now. At that
// slot Due is true and the driver applies the fates before Poll.
func (s *Server) GhostSlot(now time.Duration) time.Duration {
	e := &s.e
	if e.state != handshake.StateConnected || e.discLeft != 0 || s.redirecting {
		return maxDuration
	}
	return s.dataSlot(now)
}

// outstanding reports whether something guaranteed waits for its fate:
// events, or ghost records.
func (s *Server) outstanding() bool {
	return s.ghostPkts.len() > 0 || s.e.eventsOutstanding()
}

const maxDuration = time.Duration(1<<63 - 1)

// hasContent reports whether a data packet has something to carry besides
// acks (ghosts are asked separately): events, their redundant copies (an
// ack-only packet in their slot would skip the repair they stand for), a
// changed or owed control ack, a correction.
//
// The control ack first, from the Server's own fields: a zone tick's Poll,
// the one that sends, finds it changed and asks neither the event Sender
// nor the ControlWriter (the packet's sections read them after).
func (s *Server) hasContent(now time.Duration) bool {
	return s.hasControl && (!s.ctlSentAny || uint32(s.ctlApplied) != s.ctlSent || s.ackOwed || s.cw.Pending()) ||
		s.ev.reportNew() || s.e.evs.HasPending(now) || s.e.evs.HasRedundant()
}

// budget refills the credit and returns this packet's size limit.
func (s *Server) budget(now time.Duration) int {
	if now > s.creditAt {
		s.credit += float64(now-s.creditAt) * float64(s.lim().Bandwidth) / float64(time.Second)
		s.creditAt = now
	}
	s.credit = min(s.credit, float64(s.lim().MaxPacketSize))
	return max(s.lim().MinPacketSize, min(int(s.credit), s.lim().MaxPacketSize))
}

func (s *Server) spend(n int) {
	s.credit = max(s.credit-float64(n), -float64(s.lim().MaxPacketSize))
}

// GhostBudget estimates the bits a ghost section may use in the next data
// packet if nothing else changes: the packet budget minus the header, tag,
// control section and queued events. A hint for a ghost manager that packs
// ahead (GhostRelay); the Server never relies on it.
func (s *Server) GhostBudget(now time.Duration) int {
	if now < s.creditAt {
		now = s.creditAt
	}
	credit := min(s.credit+float64(now-s.creditAt)*float64(s.lim().Bandwidth)/float64(time.Second), float64(s.lim().MaxPacketSize))
	size := max(s.lim().MinPacketSize, min(int(credit), s.lim().MaxPacketSize))
	bits := (size - tagSize - int(s.e.lastHdr)) * 8
	ctl := 1
	if s.hasControl {
		ctl += controlAckBits
		if s.cw.Pending() || !s.ctlSentAny {
			ctl += move.MaxControlBits - controlAckBits
		}
	}
	ev := min(s.e.evs.QueuedBytes()*8+64, bits*3/4)
	return max(1, bits-ctl-ev)
}

// controlAckBits is the smallest control section: a 16-bit ack and the
// state flag (move-protocol.md).
const controlAckBits = 17

// Poll appends the next datagram due at now to dst and returns the extended
// slice; when nothing is due it returns dst unchanged. It returns at most one
// datagram per call: call it until it returns nothing, and again at
// NextDeadline. In order of precedence it sends
//
//   - the next Disconnect copy while draining (Close, timeout, protocol error);
//   - a data packet when the send slot (1/SendRate) is open and there is
//     something to say — events, a control ack or correction, ghosts
//     (ghosts.Pending) — laid out as notify header | control | events |
//     ghosts, at most the budget (credit of Bandwidth, floor MinPacketSize,
//     cap MaxPacketSize) in all;
//   - an ack-only packet when the slot is open with nothing to say and a data
//     packet arrived since we last sent, or the client streamed data within
//     KeepAlive (so at heavy loss it still hears from us at our rate);
//   - a tail-loss probe (a data packet) when events or ghost records are
//     unacknowledged and no data packet went out for a probe timeout;
//   - an ack-only keepalive after KeepAlive of silence.
//
// docs/protocol.md §7.18.3 has the rules and the reasons.
// Before the client's first authenticated packet it sends nothing. ghosts
// may be nil (an empty ghost section). Give dst spare capacity of
// MaxPacketSize to avoid an allocation.
func (s *Server) Poll(now time.Duration, dst []byte, ghosts GhostWriter) ([]byte, error) {
	e := &s.e
	switch e.state {
	case handshake.StateClosed:
		return dst, nil
	case handshake.StatePending:
		if e.timedOut(now) {
			e.sess.Close(handshake.ReasonTimeout)
			e.noteState()
		}
		return dst, nil
	case handshake.StateDraining:
		return e.pollDisconnect(now, dst)
	}
	e.nc.Tick(now)
	// Only an ack resolves a fate, and every datagram whose header notify
	// accepts ends in processFates (receive): none waits here unless notify
	// force-dropped a record (ForcedAny) or an accepted ack was left
	// unprocessed (acked). The pop would find the record ring's oldest
	// entry pending — a line of its own, not the new record's — every tick.
	if e.acked || e.nc.ForcedAny() {
		s.processFates()
	}
	if e.discLeft == 0 && e.timedOut(now) {
		e.startDisconnect(now, handshake.ReasonTimeout)
	}
	if e.discLeft > 0 {
		return e.pollDisconnect(now, dst)
	}
	if s.redirecting {
		return s.pollRedirect(now, dst)
	}
	if s.tickDue && now >= s.lastTick+s.tickGap() {
		if s.hasContent(now) || (ghosts != nil && ghosts.Pending()) {
			return s.buildData(now, dst, ghosts, false)
		}
		s.tickDue = false // nothing new this tick: the slot timer paces what follows
	}
	if now >= s.nextData {
		content := s.hasContent(now) || (ghosts != nil && ghosts.Pending())
		if content && now >= s.holdUntil() {
			return s.buildData(now, dst, ghosts, false)
		}
		if !content && s.outstanding() && now >= e.probeAt(s.lim().interval) {
			return s.buildData(now, dst, ghosts, true)
		}
		if !content && (e.owed || e.peerStreaming(now)) && now >= s.holdUntil() {
			s.nextData = nextSlot(s.nextData, s.lim().interval, now)
			return s.sendAck(now, dst)
		}
	}
	if e.keepAliveDue(now) {
		return s.sendAck(now, dst)
	}
	return dst, nil
}

// Due reports whether Poll at now could return a packet: false means it
// would return nothing, so a driver that has just sent what Poll gave
// need not call it once more to find out (the call costs the notify tick
// and the fate processing, ≈ 250 instructions, for nothing at the same
// instant). It checks the gates of every path Poll sends on — not open,
// disconnecting, timed out, redirecting, a tick's packet due, the send
// slot, the keepalive — and no content, so it errs towards true: Poll
// then decides. It leaves out the ack's hold for the next tick (rule 5
// while ticks come): a pump inside the hold, up to half a slot after a
// slot its tick came late for, polls for nothing. TestDueWhenPollSends
// holds it to that.
func (s *Server) Due(now time.Duration) bool {
	e := &s.e
	return e.state != handshake.StateConnected || e.discLeft > 0 || e.timedOut(now) ||
		s.redirecting || s.tickDue || now >= s.nextData || e.keepAliveDue(now)
}

func (s *Server) sendAck(now time.Duration, dst []byte) ([]byte, error) {
	n := len(dst)
	dst, pre := s.prefix(dst)
	out, err := s.e.ackOnly(dst, now, pre)
	if err != nil {
		return dst[:n], err
	}
	s.spend(len(out) - n)
	return out, nil
}

// prefix writes the long-form prefix when the client's newest packet was
// long form, and returns its length.
func (s *Server) prefix(dst []byte) ([]byte, int) {
	if !s.replyLong {
		return dst, 0 // inlined: most clients' packets are short form
	}
	return s.longPrefix(dst)
}

func (s *Server) longPrefix(dst []byte) ([]byte, int) {
	dst = s.e.grow(dst, s.lim().MaxPacketSize)
	return handshake.AppendRouted(dst, s.e.sess.ID()), RoutedPrefixSize
}

// buildData builds one data packet.
func (s *Server) buildData(now time.Duration, dst []byte, ghosts GhostWriter, probe bool) ([]byte, error) {
	e := &s.e
	n := len(dst)
	dst, pre := s.prefix(dst)
	size := s.budget(now) - pre
	dst, start, hl, seq, err := e.beginPacket(dst, notify.TypeData, now, size)
	if err != nil {
		return dst[:n], err
	}
	if s.tickDue {
		s.nextData = now + s.lim().interval
		s.lastTick, s.tickSent = now, true
	} else {
		s.nextData = nextSlot(s.nextData, s.lim().interval, now)
	}
	s.tickDue = false
	w := &e.sc.w
	payload := size - tagSize - hl

	// The usual packet — an ack-only control section, no events report,
	// an empty event section — is one 20-bit field, the bits the sections'
	// writers would have written one by one (≈ 200 instructions of calls
	// and checks); anything else goes the long way.
	if s.hasControl && !s.ev.reportDue() && w.Remaining() >= usualBits {
		if v, ok := s.cw.AckOnly(now, s.ctlApplied); ok {
			s.ctlSent, s.ctlSentAny, s.ackOwed = uint32(s.ctlApplied), true, false
			// control present | ack, state absent | no report | then the
			// event section's end bit if it is empty.
			if s.e.evs.WriteEmpty(seq, now) {
				s.ev.set(numEvsIdle, s.e.evs.FatesIdle()) // WriteEmpty may have trimmed
				w.TryWriteBits(1|v<<1, usualBits)         // the room is checked: it cannot fail
			} else {
				w.TryWriteBits(1|v<<1, usualBits-1)
				if err := s.writeEvents(w, seq, now, payload, ghosts); err != nil {
					return dst[:n], err
				}
			}
			s.writeGhosts(w, seq, now, ghosts)
			return s.seal(dst, n, start, hl, seq, now, pre, probe)
		}
	}

	// Control object: a flag, then the ack and (by the writer's policy) the
	// full state; without room for it the flag says "absent".
	if s.hasControl {
		w.WriteFlag(true)
		_, err := s.cw.Write(w, seq, now, s.ctlApplied, &s.ctlState)
		s.ev.set(numCtlHeld, !s.cw.FatesIdle()) // a full state may open a hold
		if err != nil {
			w.Truncate(0)
			w.WriteFlag(false)
		} else {
			s.ctlSent, s.ctlSentAny, s.ackOwed = uint32(s.ctlApplied), true, false
		}
	} else {
		w.WriteFlag(false)
	}
	mark := w.BitLen()
	if s.ev.writeReport(w, seq) != nil {
		w.Truncate(mark) // no room: a later packet reports it
		w.WriteFlag(false)
	}
	if err := s.writeEvents(w, seq, now, payload, ghosts); err != nil {
		return dst[:n], err
	}
	s.writeGhosts(w, seq, now, ghosts)
	return s.seal(dst, n, start, hl, seq, now, pre, probe)
}

// usualBits is the usual packet's sections before the ghosts: the control
// flag, an ack-only control section, the report's absent flag and an
// empty event section.
const usualBits = 1 + move.AckOnlyBits + 1 + 1

// writeEvents writes the event section within what the ghosts' reserve
// leaves of the payload (payload bytes in all).
func (s *Server) writeEvents(w *bitstream.Writer, seq uint64, now time.Duration, payload int, ghosts GhostWriter) error {
	e := &s.e

	// Events get what is left but the ghosts' reserve: the exact size of a
	// section packed ahead, a quarter of the payload when the table has work,
	// else one bit (the empty section).
	reserve := 1
	if r, ok := ghosts.(*GhostRelay); ok && r.Pending() {
		reserve = r.nbits
	} else if ghosts != nil && ghosts.Pending() {
		reserve = payload * 8 / 4
	}
	evCap := max((payload*8-reserve)/8, w.Len()+1)
	evCap = min(evCap, payload)
	w.Resize(evCap)
	_, err := e.evs.Write(w, seq, now)
	s.ev.set(numEvsIdle, e.evs.FatesIdle())
	if err != nil {
		return fmt.Errorf("session: event section: %w", err)
	}
	w.Resize(payload)
	return nil
}

// seal seals the data packet begun at dst[start:] (dst[:n] before it) and
// counts it.
func (s *Server) seal(dst []byte, n, start, hl int, seq uint64, now time.Duration, pre int, probe bool) ([]byte, error) {
	e := &s.e
	out, err := e.sealPacket(dst, start, hl, seq, now, pre)
	if err != nil {
		return dst[:n], err
	}
	e.c.DataOut++
	e.lastHdr = uint8(hl)
	e.sentData(now, probe)
	s.spend(len(out) - n)
	return out, nil
}

// writeGhosts writes the ghost section and remembers the packet if it
// carried records.
func (s *Server) writeGhosts(w *bitstream.Writer, seq uint64, now time.Duration, ghosts GhostWriter) {
	if ghosts == nil {
		w.WriteGamma(1)
		return
	}
	if max := int(s.lim().maxInFlight); s.ghostPkts.full(max) || len(s.ghostFates) == max ||
		s.ghostPkts.len()+len(s.ghostFates) >= max {
		s.e.c.rareCounters().ghostStall++
		w.WriteGamma(1)
		return
	}
	mark := w.BitLen()
	recs, err := ghosts.Write(w, seq, now)
	if err != nil {
		s.e.c.rareCounters().ghostErrs++
		w.Truncate(mark)
		w.WriteGamma(1)
		return
	}
	if recs > 0 {
		s.ghostPkts.push(ghostSeqOf(seq), int(s.lim().maxInFlight))
	}
}

// seqRing is a FIFO of sequence numbers bounded by max. Its buffer starts
// small and doubles up to max as the FIFO fills: most connections never have
// more than a few dozen packets in flight, and a full-size buffer per
// connection dominated the server's memory per client. Once grown it stays,
// so steady state allocates nothing.
//
// The bound is the caller's to pass (push, full), not a field: it is the
// same for every connection of a config, and 8 bytes of a Server. A
// Server's ring holds 32-bit entries (ghostSeq), a GhostRelay's full ones.
type seqRing[T uint32 | uint64] struct {
	buf        []T
	head, size uint32
}

// seqRingMin is the first buffer size: 32 bytes (64 with full entries). A ghost packet's fate
// comes back with the client's ack of it, a round trip plus at most one
// client packet interval later: at 20 packets/s that is 3 packets in flight
// at 100 ms of RTT, 8 at 350 ms. (16, 128 bytes, was the room of most
// connections.)
const seqRingMin = 8

func (r *seqRing[T]) len() int          { return int(r.size) }
func (r *seqRing[T]) full(max int) bool { return int(r.size) >= max }
func (r *seqRing[T]) front() T          { return r.buf[r.head] }
func (r *seqRing[T]) pop()              { r.head = (r.head + 1) % uint32(len(r.buf)); r.size-- }
func (r *seqRing[T]) at(i int) T        { return r.buf[(int(r.head)+i)%len(r.buf)] }
func (r *seqRing[T]) set(i int, v T)    { r.buf[(int(r.head)+i)%len(r.buf)] = v }

// push appends v; the caller checks full(max) first.
func (r *seqRing[T]) push(v T, max int) {
	if int(r.size) == len(r.buf) {
		r.grow(max)
	}
	r.buf[(r.head+r.size)%uint32(len(r.buf))] = v
	r.size++
}

// grow doubles the buffer (capped at bound), unwrapping the FIFO to index 0.
func (r *seqRing[T]) grow(bound int) {
	n := max(min(2*len(r.buf), bound), min(seqRingMin, bound))
	if n <= len(r.buf) {
		panic("session: seqRing push when full") // callers check full first
	}
	nb := make([]T, n)
	k := copy(nb, r.buf[r.head:])
	copy(nb[k:], r.buf[:r.head])
	r.buf, r.head = nb, 0
}
