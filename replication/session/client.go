package session

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// ClientHandler receives the server's events, synchronously inside Receive.
type ClientHandler interface {
	// Event gets each delivered event; e.Payload is valid only during the call.
	Event(e event.Event)
}

// GhostView is one remote entity as a renderer draws it: its interpolated
// pose (Client.View) and its newest replicated state.
type GhostView struct {
	Entity uint64 // the server's stable entity id
	// GhostID is the entity's id on this connection. It stays the same while
	// the entity stays in scope — across zone handoffs too — and changes only
	// if the entity leaves scope and comes back.
	GhostID uint32
	Class   uint16
	Pose    ghost.Pose
	Mode    ghost.SampleMode
	State   ghost.State
}

// Client is the client end of a connection, from the connect token to the
// close: it runs the handshake (connect requests resent with backoff, the
// cookie challenge when the server asks for it, Denied with its reason, a
// connect timeout), then sends moves and events and receives control
// updates, events and ghosts, predicting the control object and
// interpolating the ghosts. It holds no socket and reads no clock:
//
//	c, _ := session.NewClient(token, server, session.DefaultClientConfig(), h, time.Now(), now)
//	for {                                   // the driver's loop
//		for out := c.Poll(now, buf[:0]); len(out) > 0; out = c.Poll(now, buf[:0]) { send(out) }
//		for each datagram d from the server: c.Receive(now, d)
//		for c.InputDue(now) { c.Input(sampleInput()) }
//		sleep until min(c.NextDeadline(), next frame)
//	}
//
// Many Clients can share one socket (a bot swarm): route each datagram to the
// Client whose Server() address it came from, and keep the Clients in a heap
// ordered by NextDeadline.
//
// Lifecycle (handshake.State): pending (sending connect requests) →
// challenged (sending challenge responses; only under server load) →
// connected → draining (Close: sending Disconnect copies) → closed (see Err).
//
// The zero Client is not usable; call NewClient. Not safe for concurrent use.
type Client struct {
	e   endpoint
	pt  [MaxPacketSize]byte // opened payload
	r   bitstream.Reader    // reads the packet being received
	cfg ClientConfig
	h   ClientHandler
	hc  *handshake.Client

	state   handshake.State
	err     error
	started time.Duration

	connectDeadline time.Duration
	nextRetry       time.Duration
	retryInterval   time.Duration
	requests        uint64
	challenges      uint64
	connectTime     time.Duration

	stream *move.Stream
	pred   *move.Predictor
	mirror *ghost.Mirror

	interval time.Duration
	nextData time.Duration
	// The send slot follows the input clock (dataSlot, waitForSample):
	// when and with which newest move the last data packet left.
	lastData    time.Duration
	sentNewest  uint64
	followInput bool          // moves come no faster than packets: a new move opens the slot
	longFrom    uint64        // the first packet whose move section carried the whole sequence (0: none yet)
	heard       bool          // an authenticated packet arrived since connecting
	lastHeard   time.Duration // newest authenticated packet (long-form decision)
	noConn      bool          // a NoConnection hint since the server was last heard
	forgotten   bool          // one of them named this connection: forgotSince is set
	noConnN     uint64
	forgotSince time.Duration // the first such hint since the server was last heard (ForgottenAfter)

	redirect *RedirectError // the server's Redirect, once taken

	ev clientNumbering // per-player numbers of ordered events (§7.20)
}

// NewClient parses token (handshake.IssueToken's bytes) and prepares to
// connect to server, which the token must list. wall is the wall clock, for
// the token's expiry; now starts the virtual clock everything else uses.
// h receives the server's events (nil discards them).
func NewClient(token []byte, server netip.AddrPort, cfg ClientConfig, h ClientHandler, wall time.Time, now time.Duration) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hc, err := handshake.NewClient(token, server)
	if err != nil {
		return nil, err
	}
	tok := hc.Token()
	if tok.Expired(wall) {
		return nil, fmt.Errorf("session: connect token: %w", handshake.ErrTokenExpired)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = tok.Timeout
	}
	if cfg.KeepAlive >= timeout {
		return nil, fmt.Errorf("%w: KeepAlive %v not below the timeout %v", ErrConfig, cfg.KeepAlive, timeout)
	}
	if cfg.Step == nil {
		cfg.Step = move.Walk
	}
	if cfg.Registry == nil {
		cfg.Registry = DefaultRegistry()
	}
	c := &Client{cfg: cfg, h: h, hc: hc, state: handshake.StatePending, started: now}
	if err := c.e.init(cfg.Notify, cfg.Events, cfg.KeepAlive, timeout, cfg.DisconnectCopies, cfg.DisconnectInterval, serverLimits{}, false); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c.ev.init(c.e.lim.lanes)
	if c.stream, err = move.NewStream(cfg.Moves); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.pred, err = move.NewPredictor(c.stream, cfg.Step, cfg.InitialControl); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.mirror, err = ghost.NewMirror(cfg.Registry, cfg.Mirror); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c.connectDeadline = now + min(cfg.ConnectTimeout, max(tok.ExpiresAt().Sub(wall), 0))
	c.nextRetry = now
	c.retryInterval = cfg.RetryInterval
	c.interval = time.Second / time.Duration(cfg.SendRate)
	c.followInput = c.stream.Config().InputRate <= cfg.SendRate
	return c, nil
}

// State is the client's lifecycle state.
func (c *Client) State() handshake.State { return c.state }

// Err is why the client closed: a *DeniedError, ErrConnectTimeout,
// ErrTimeout, a *DisconnectError (the server's reason), ErrProtocol, or nil
// after Close.
func (c *Client) Err() error { return c.err }

// Server is the server address the client talks to.
func (c *Client) Server() netip.AddrPort { return c.hc.Server() }

// ID is the connection id (zero before Accepted).
func (c *Client) ID() handshake.ConnID { return c.hc.ConnID() }

// Token is the parsed connect token (expiry, timeout, servers).
func (c *Client) Token() *handshake.Token { return c.hc.Token() }

// Mirror is the ghost mirror: the replicas of the server's entities. Read it
// between Receive calls; do not modify it.
func (c *Client) Mirror() *ghost.Mirror { return c.mirror }

// View appends every live ghost, drawn at now − the interpolation delay
// (100 ms by default) between the states received, and returns the slice.
// Appending to spare capacity does not allocate.
func (c *Client) View(now time.Duration, dst []GhostView) []GhostView {
	for i := 0; i < c.mirror.Len(); i++ {
		g := c.mirror.At(i)
		pose, mode := c.mirror.Pose(g, now)
		dst = append(dst, GhostView{Entity: g.Entity, GhostID: g.ID, Class: g.Class.ID, Pose: pose, Mode: mode, State: g.State})
	}
	return dst
}

// InputDue reports whether the next input sample is due at now (the move
// input rate, 30 Hz by default) and consumes it: call it in a loop each frame
// and call Input once per true.
func (c *Client) InputDue(now time.Duration) bool { return c.stream.Due(now) }

// Input numbers m (m.Seq is assigned), predicts the control object's state
// after it at once, and queues it: every packet carries all moves the server
// has not acknowledged. Moves sampled before the connection is up are sent
// once it is. Errors: move.ErrInvalidMove.
func (c *Client) Input(m move.Move) (move.ControlState, error) {
	if m.Dt == 0 {
		m.Dt = c.stream.Config().Dt()
	}
	return c.pred.Predict(m)
}

// The send slot follows the input clock: Torque's rule that a packet leaves
// with each new move. With both at 30 Hz on clocks started apart, a slot
// falling just before the sample's frame sent the previous moves again and
// the new one a whole slot later, two at once; the zone then met a tick with
// no new move, an acknowledgement skipped (the 100 ms handoff hitch and
// control gaps botswarm measured), wherever a busy host put the frame on the
// other side of the slot. So when moves come no faster than packets
// (followInput):
//   - a new move opens the slot at once, half a slot after the previous data
//     packet at the soonest (dataSlot);
//   - a slot with no new move waits for the sample due within half a slot,
//     or for an overdue sample's late frame, at most half a slot and never
//     past 1.5 slots after the previous data packet (waitForSample).
// So the send rate stays SendRate. A client that does not sample through
// InputDue, or whose move window is full, sends on its plain slots.

// dataSlot is when the next data packet may go. (A move the previous
// session sent and this one got acknowledged, after a Redirect, is no new
// move: Len counts the moves a data packet would carry, so a pulled slot
// always sends one and moves on.)
func (c *Client) dataSlot() time.Duration {
	if c.followInput && c.stream.Newest() != c.sentNewest && c.stream.Len() > 0 {
		// Only moves sampled through InputDue, which paces them at
		// InputRate ≤ SendRate: a game that calls Input at its own rate
		// (faster, say, every frame) keeps the plain slots.
		if _, on := c.stream.NextSample(); on {
			return min(c.nextData, c.lastData+c.interval/2)
		}
	}
	return c.nextData
}

// waitForSample holds a due slot that has no new move to carry for the
// input sample due about now, and reports whether it did.
func (c *Client) waitForSample(now time.Duration) bool {
	if c.stream.Newest() != c.sentNewest || c.e.evs.HasPending(now) {
		return false
	}
	next, on := c.stream.NextSample()
	if !on {
		return false
	}
	half, latest := c.interval/2, c.lastData+c.interval*3/2
	var until time.Duration
	switch {
	case next > now && next-now <= half:
		until = next
	case next <= now && now-next < half: // its frame is late
		until = next + half
	default:
		return false
	}
	if until = min(until, latest); until <= now {
		return false
	}
	c.nextData = until
	return true
}

// Control is the predicted state of the control object after the newest
// move. The server's corrections rewind and replay it.
func (c *Client) Control() move.ControlState { return c.pred.Current() }

// ControlOffset is how far the last correction moved the predicted position
// (old − new): a renderer may blend it out instead of snapping.
func (c *Client) ControlOffset() [3]float32 { return c.pred.Offset() }

// Redirect returns the server's Redirect once one was taken: the server to
// connect to next and a connect token for it (a new Client with them
// continues as the same player). The client then acknowledges it with its
// Disconnect copies (ReasonRedirected): keep Polling it until it is closed,
// while the new Client connects. Its Err is the same *RedirectError.
func (c *Client) Redirect() (*RedirectError, bool) { return c.redirect, c.redirect != nil }

// ContinueMoves makes c go on with prev's move stream: prev's numbering,
// its unacknowledged moves (sent again to c's server, which drops the ones
// the player's zone already applied) and its predictions. A client that
// follows a Redirect calls it on the new Client before its first Poll; the
// zone keeps the player's move sequence across the switch (docs/protocol.md
// §7.19). prev goes on working (its Disconnect copies).
func (c *Client) ContinueMoves(prev *Client) {
	c.stream.Continue(prev.stream)
	c.pred.Continue(prev.pred)
}

// ContinueEvents makes c go on with prev's ordered-event numbering
// (docs/protocol.md §7.20): the events prev's server had not reported
// applied are queued again on c, in order and under their numbers (the
// player's zone drops the ones it applied already), and new events are
// numbered on from prev's. A client that follows a Redirect or fails over
// calls it on the new Client before its first Poll, with ContinueMoves.
// prev's events are c's from then on.
func (c *Client) ContinueEvents(prev *Client) {
	for l, k := range c.ev.continueFrom(&prev.ev) {
		for _, ke := range k {
			if c.e.evs.SendOrdered(l, ke.payload) == nil {
				c.ev.resent++
			}
		}
	}
}

// EventsApplied is the newest ordered event of lane the server reported
// its zone applied, in the per-player numbering (0: none).
func (c *Client) EventsApplied(lane int) uint64 {
	if lane < 0 || lane >= len(c.ev.applied) {
		return 0
	}
	return c.ev.applied[lane]
}

// EventsSentOn is the number of the newest ordered event queued on lane
// (the per-player numbering: it goes on across ContinueEvents).
func (c *Client) EventsSentOn(lane int) uint64 {
	if lane < 0 || lane >= len(c.ev.next) {
		return 0
	}
	return c.ev.next[lane]
}

// LastAck is the newest move the server acknowledged applying.
func (c *Client) LastAck() uint64 { return c.stream.Acked() }

// SendEvent queues payload (copied) as a guaranteed event, delivered exactly
// once and in order on its lane. Events queued before the connection is up
// are sent once it is. Errors: event.ErrBadLane, ErrTooLarge, ErrLaneFull,
// ErrQueueFull, ErrClosed.
func (c *Client) SendEvent(lane int, payload []byte) error {
	if c.state >= handshake.StateDraining {
		return ErrClosed
	}
	if err := c.e.evs.SendOrdered(lane, payload); err != nil {
		return err
	}
	c.ev.sent(lane, payload)
	return nil
}

// SendUnordered queues payload as a guaranteed event delivered in arrival order.
func (c *Client) SendUnordered(payload []byte) error {
	if c.state >= handshake.StateDraining {
		return ErrClosed
	}
	return c.e.evs.SendUnordered(payload)
}

// SendUnguaranteed queues payload for the next packet only, if it fits.
func (c *Client) SendUnguaranteed(payload []byte) error {
	if c.state >= handshake.StateDraining {
		return ErrClosed
	}
	return c.e.evs.SendUnguaranteed(payload)
}

// Close starts a graceful close (ReasonClientQuit): the next Polls send the
// Disconnect copies, then the client is closed with Err() == nil. Before the
// connection is up it closes at once.
func (c *Client) Close(now time.Duration) {
	switch c.state {
	case handshake.StatePending, handshake.StateChallenged:
		c.close(nil)
	case handshake.StateConnected:
		if c.e.startDisconnect(now, handshake.ReasonClientQuit) {
			c.state = handshake.StateDraining
		} else {
			c.close(nil)
		}
	}
}

func (c *Client) close(err error) {
	if c.state == handshake.StateClosed {
		return
	}
	c.state, c.err = handshake.StateClosed, err
	if c.e.sess != nil && c.e.sess.State() != handshake.StateClosed {
		c.e.sess.Close(handshake.ReasonClientQuit)
	}
	c.e.discLeft = 0
}

// Stats returns a snapshot of the counters.
func (c *Client) Stats() ClientStats {
	cs := c.e.c.snapshot()
	cs.PacketsOut += c.requests // connect requests: counted only there
	return ClientStats{
		Counters:     cs,
		RTT:          c.e.nc.RTT(),
		Jitter:       c.e.nc.Jitter(),
		Loss:         c.e.nc.LossRate(),
		Requests:     c.requests,
		Challenges:   c.challenges,
		NoConnection: c.noConnN,
		ConnectTime:  c.connectTime,
		Redirected:   b2u(c.redirect != nil),
		EventsResent: c.ev.resent,
		EventsUnkept: c.ev.unkept,
		Notify:       c.e.nc.Stats(),
		EventsSent:   c.e.evs.Stats(),
		EventsRecv:   c.e.evr.Stats(),
		Moves:        c.stream.Stats(),
		Predictor:    c.pred.Stats(),
		Ghosts:       c.mirror.Stats(),
	}
}

// RTT is notify's smoothed round-trip time.
func (c *Client) RTT() time.Duration { return c.e.nc.RTT() }

// Receive handles one datagram from the server. During the handshake it takes
// Challenge, Accepted and Denied; once connected, protected packets (control,
// events, ghosts), the server's Disconnect, and NoConnection hints. A rejected
// datagram returns an error wrapping its cause and is counted; nothing changes.
func (c *Client) Receive(now time.Duration, pkt []byte) error {
	err := c.receive(now, pkt)
	if err != nil {
		var de *DeniedError
		if !errors.As(err, &de) {
			c.e.c.count(err)
		}
	}
	return err
}

func (c *Client) receive(now time.Duration, pkt []byte) error {
	e := &c.e
	e.c.PacketsIn++
	e.c.BytesIn += uint64(len(pkt))
	if c.state == handshake.StateClosed {
		return ErrClosed
	}
	kind, err := handshake.Classify(pkt)
	if err != nil {
		return err
	}
	switch kind {
	case handshake.KindChallenge, handshake.KindAccepted, handshake.KindDenied:
		return c.handshakeReply(now, pkt, kind)
	case handshake.KindNoConnection:
		id, err := handshake.ParseNoConnection(pkt)
		if err != nil {
			return err
		}
		if c.state != handshake.StateConnected || (!id.IsZero() && id != c.hc.ConnID()) {
			return handshake.ErrUnexpected
		}
		c.noConn = true // a hint, unauthenticated: switches to the long form
		c.noConnN++
		if !id.IsZero() && !c.forgotten { // naming us: the clock of ForgottenAfter starts (Poll)
			c.forgotten, c.forgotSince = true, now
		}
		e.c.Accepted++
		return nil
	case handshake.KindDisconnect:
		if e.sess == nil {
			return handshake.ErrUnexpected
		}
		r, err := e.sess.OpenDisconnect(pkt)
		if err != nil {
			return err
		}
		e.c.Accepted++
		if c.state == handshake.StateDraining {
			c.close(c.err) // both ends closing: ours is as good as done
		} else {
			c.close(&DisconnectError{Reason: r})
		}
		return nil
	case handshake.KindRedirect:
		return c.takeRedirect(now, pkt)
	case handshake.KindData:
	case handshake.KindRouted:
		id, short, err := handshake.ParseRouted(pkt)
		if err != nil {
			return err
		}
		if e.sess == nil || id != e.sess.ID() {
			return handshake.ErrWrongConn
		}
		pkt = short
	default:
		return handshake.ErrUnexpected
	}
	if e.sess == nil {
		return ErrNotConnected
	}
	var h notify.Header
	e.writer() // makes the Scratch, whose AEAD scratch opening uses
	pt, _, err := e.open(now, pkt, netip.AddrPort{}, &c.pt, &c.r, &h, &e.sc.hs)
	if err != nil {
		return err
	}
	c.heard, c.lastHeard, c.noConn, c.forgotten = true, now, false, false
	switch h.Type {
	case notify.TypeData:
		if err := c.readSections(now, pt); err != nil {
			return c.protocolError(now, err)
		}
	case notify.TypeAck:
		if len(pt) != 0 {
			return c.protocolError(now, errAckPayload)
		}
	default:
		return c.protocolError(now, errPacketType)
	}
	c.processFates()
	return nil
}

// takeRedirect authenticates a Redirect and, the first time, starts the
// Disconnect copies that acknowledge it (docs/protocol.md §7.19).
func (c *Client) takeRedirect(now time.Duration, pkt []byte) error {
	e := &c.e
	if e.sess == nil {
		return handshake.ErrUnexpected
	}
	to, tok, err := e.sess.OpenRedirect(pkt)
	if err != nil {
		return err
	}
	e.c.Accepted++
	e.lastRecv = now
	if c.redirect != nil || c.state != handshake.StateConnected {
		return nil // another copy, or we are closing anyway
	}
	c.redirect = &RedirectError{Server: to, Token: tok}
	if e.startDisconnect(now, handshake.ReasonRedirected) {
		c.state, c.err = handshake.StateDraining, c.redirect
	} else {
		c.close(c.redirect)
	}
	return nil
}

// readSections decodes control | events | ghosts.
func (c *Client) readSections(now time.Duration, pt []byte) error {
	r := &c.r
	resetPayload(r, pt)
	has, err := r.ReadFlag("control.present")
	if err != nil {
		return err
	}
	if has {
		u, err := move.ReadControl(r, c.stream.Newest())
		if err != nil {
			return fmt.Errorf("control section: %w", err)
		}
		c.pred.Apply(u)
	}
	if err := c.ev.readReport(r); err != nil {
		return fmt.Errorf("events applied section: %w", err)
	}
	if err := c.e.evr.Read(r, c.deliver); err != nil { // a method value on the stack: Read keeps no reference
		return fmt.Errorf("event section: %w", err)
	}
	if c.cfg.SkipGhosts {
		return nil
	}
	if err := c.mirror.Read(r, now); err != nil {
		return fmt.Errorf("ghost section: %w", err)
	}
	return nil
}

func (c *Client) protocolError(now time.Duration, err error) error {
	c.processFates()
	if c.e.startDisconnect(now, handshake.ReasonProtocolError) {
		c.state = handshake.StateDraining
		c.err = fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	return fmt.Errorf("%w: %w", ErrProtocol, err)
}

// deliver hands the server's event to the handler.
func (c *Client) deliver(ev event.Event) {
	if c.h != nil {
		c.h.Event(ev)
	}
}

func (c *Client) processFates() {
	e := &c.e
	for {
		f, ok := e.nc.PopFate()
		if !ok {
			break
		}
		e.evs.OnFate(f)
		c.ev.onFate(f.Seq, f.Delivered)
		if c.longFrom != 0 && f.Delivered && f.Seq >= c.longFrom {
			c.stream.UseShortSeq() // the server has a whole sequence to go on from
			c.longFrom = 0
		}
	}
	e.evs.AckDelivered(e.delivered)
}

// handshakeReply digests Challenge, Accepted and Denied.
func (c *Client) handshakeReply(now time.Duration, pkt []byte, kind handshake.Kind) error {
	if c.state != handshake.StatePending && c.state != handshake.StateChallenged {
		if kind == handshake.KindAccepted && c.state == handshake.StateConnected {
			if err := c.hc.HandleReply(pkt); err != nil {
				return err
			}
			c.e.c.Accepted++ // a retry's answer: ours, nothing to do
			return nil
		}
		return handshake.ErrUnexpected
	}
	err := c.hc.HandleReply(pkt)
	switch {
	case err != nil && c.hc.State() == handshake.StateClosed:
		c.e.c.Accepted++ // taken: it ends the handshake
		derr := &DeniedError{Reason: c.hc.Reason(), Err: err}
		c.close(derr)
		return derr
	case err != nil:
		return err
	}
	c.e.c.Accepted++
	switch c.hc.State() {
	case handshake.StateChallenged:
		c.challenges++
		c.state = handshake.StateChallenged
		c.nextRetry = now // answer the challenge at once
		c.retryInterval = c.cfg.RetryInterval
	case handshake.StateConnected:
		sess, err := c.hc.Session()
		if err != nil {
			return err
		}
		c.e.sess = sess
		c.state = handshake.StateConnected
		if c.ev.gen == 0 {
			c.ev.gen = connID64(c.hc.ConnID()) // a new numbering: the server takes the same
		}
		c.connectTime = now - c.started
		c.e.lastRecv = now
		c.nextData = now
		c.e.owed = true // the first packet goes at once: it proves our address
	}
	return nil
}

// NextDeadline is the earliest time, at or after now, at which Poll may have
// something to do: a connect request resend, the connect timeout, a data slot
// with something to send or an ack to give, a keepalive, a Disconnect copy or
// the timeout. A result ≤ now means "Poll now", and such a Poll always sends
// or moves the deadline on. The next input sample (InputDue) is the caller's
// own schedule, and SendEvent or Input may make an earlier Poll worthwhile.
func (c *Client) NextDeadline(now time.Duration) time.Duration {
	e := &c.e
	switch c.state {
	case handshake.StateClosed:
		return maxDuration
	case handshake.StatePending, handshake.StateChallenged:
		return min(c.nextRetry, c.connectDeadline)
	case handshake.StateDraining:
		return e.discNext()
	}
	d := min(e.lastRecv+e.lim.timeout, e.lastSend+e.lim.keepAlive)
	if c.forgotten && c.cfg.ForgottenAfter > 0 {
		d = min(d, c.forgotSince+c.cfg.ForgottenAfter)
	}
	slot := max(now, c.dataSlot())
	if !e.sentAny || e.owed || e.peerStreaming(slot) || c.hasContent(slot) {
		d = min(d, slot)
	} else if e.eventsOutstanding() {
		d = min(d, max(slot, e.probeAt(c.interval)))
	}
	return d
}

// hasContent reports whether a data packet has something to carry: moves the
// server has not acknowledged, events, or their redundant copies (an
// ack-only packet in their slot would skip the repair they stand for).
func (c *Client) hasContent(now time.Duration) bool {
	return c.stream.Len() > 0 || c.e.evs.HasPending(now) || c.e.evs.HasRedundant()
}

// longForm reports whether the next packet goes in the long form: until the
// server is first heard, after LongFormAfter of silence, or after a
// NoConnection hint (docs/protocol.md §7.16).
func (c *Client) longForm(now time.Duration) bool {
	return c.cfg.AlwaysLongForm || !c.heard || c.noConn || now-c.lastHeard >= c.cfg.LongFormAfter
}

// Poll appends the next datagram due at now to dst and returns the extended
// slice; when nothing is due it returns dst unchanged. Call it until it
// returns nothing, and again at NextDeadline. While connecting it resends the
// connect request (or challenge response) with backoff; once connected it
// sends a data packet per send slot (1/SendRate) when there are moves the
// server has not acknowledged or events, an ack-only packet when the server's
// data wants an ack (or the server streams), a tail-loss probe when events
// are unacknowledged and the link went quiet, a keepalive after KeepAlive of
// silence, and the Disconnect copies after Close (docs/protocol.md §7.18
// § 7.18.3). Give dst spare capacity of MaxPacketSize to avoid an allocation.
func (c *Client) Poll(now time.Duration, dst []byte) ([]byte, error) {
	e := &c.e
	switch c.state {
	case handshake.StateClosed:
		return dst, nil
	case handshake.StatePending, handshake.StateChallenged:
		return c.pollConnect(now, dst)
	case handshake.StateDraining:
		out, err := e.pollDisconnect(now, dst)
		if e.discLeft == 0 {
			c.close(c.err)
		}
		return out, err
	}
	e.nc.Tick(now)
	c.processFates()
	if c.forgotten && c.cfg.ForgottenAfter > 0 && now-c.forgotSince >= c.cfg.ForgottenAfter {
		// The server will not answer (the hints named us, nothing came):
		// a Disconnect would reach nobody who knows the connection.
		c.err = ErrForgotten
		c.close(ErrForgotten)
		return dst, nil
	}
	if e.timedOut(now) {
		c.err = ErrTimeout
		if e.startDisconnect(now, handshake.ReasonTimeout) {
			c.state = handshake.StateDraining
			return c.Poll(now, dst)
		}
		c.close(ErrTimeout)
		return dst, nil
	}
	if now >= c.dataSlot() {
		if c.hasContent(now) {
			if c.waitForSample(now) {
				return dst, nil
			}
			return c.buildData(now, dst, false)
		}
		if e.eventsOutstanding() && now >= e.probeAt(c.interval) {
			return c.buildData(now, dst, true)
		}
		if e.owed || e.peerStreaming(now) {
			c.nextData = nextSlot(c.nextData, c.interval, now)
			return c.sendAck(now, dst)
		}
	}
	if e.keepAliveDue(now) {
		return c.sendAck(now, dst)
	}
	return dst, nil
}

func (c *Client) pollConnect(now time.Duration, dst []byte) ([]byte, error) {
	if now >= c.connectDeadline {
		c.close(ErrConnectTimeout)
		return dst, nil
	}
	if now < c.nextRetry {
		return dst, nil
	}
	n := len(dst)
	dst = c.e.grow(dst, handshake.RequestSize)
	out, err := c.hc.AppendRequest(dst)
	if err != nil {
		return dst[:n], err
	}
	if c.requests == 0 {
		c.started = now // ConnectTime counts from the first request
	}
	c.requests++
	c.e.c.BytesOut += uint64(len(out) - n) // PacketsOut counts it: Stats adds requests
	c.nextRetry = now + c.retryInterval
	c.retryInterval = min(time.Duration(float64(c.retryInterval)*c.cfg.RetryBackoff), c.cfg.MaxRetryInterval)
	return out, nil
}

// prefix writes the long-form prefix when due and returns its length.
func (c *Client) prefix(now time.Duration, dst []byte) ([]byte, int) {
	if !c.longForm(now) {
		return dst, 0
	}
	dst = c.e.grow(dst, c.cfg.MaxPacketSize)
	return handshake.AppendRouted(dst, c.hc.ConnID()), RoutedPrefixSize
}

func (c *Client) sendAck(now time.Duration, dst []byte) ([]byte, error) {
	n := len(dst)
	dst, pre := c.prefix(now, dst)
	out, err := c.e.ackOnly(dst, now, pre)
	if err != nil {
		return dst[:n], err
	}
	return out, nil
}

// buildData builds one data packet: header | moves | events.
func (c *Client) buildData(now time.Duration, dst []byte, probe bool) ([]byte, error) {
	e := &c.e
	n := len(dst)
	dst, pre := c.prefix(now, dst)
	dst, start, hl, seq, err := e.beginPacket(dst, notify.TypeData, now, c.cfg.MaxPacketSize-pre)
	if err != nil {
		return dst[:n], err
	}
	if now < c.nextData { // a new move opened the slot early
		c.nextData = now + c.interval
	} else {
		c.nextData = nextSlot(c.nextData, c.interval, now)
	}
	c.lastData, c.sentNewest = now, c.stream.Newest()
	w := &e.sc.w
	// Moves first: without room for every one Write sends the oldest, which
	// the server needs first. Events get the rest.
	if k, err := c.stream.Write(w); err != nil {
		return dst[:n], fmt.Errorf("session: move section: %w", err)
	} else if k > 0 && c.stream.LongSeq() && c.longFrom == 0 {
		c.longFrom = seq
	}
	if err := c.ev.writeBase(w, seq); err != nil {
		return dst[:n], fmt.Errorf("session: event base section: %w", err)
	}
	if _, err := e.evs.Write(w, seq, now); err != nil {
		return dst[:n], fmt.Errorf("session: event section: %w", err)
	}
	out, err := e.sealPacket(dst, start, hl, seq, now, pre)
	if err != nil {
		return dst[:n], err
	}
	e.c.DataOut++
	e.lastHdr = uint8(hl)
	e.sentData(now, probe)
	return out, nil
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
