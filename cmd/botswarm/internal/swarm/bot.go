package swarm

import (
	crand "crypto/rand"
	"errors"
	"math"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/metrics"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/scenario"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/session"
	"github.com/ghostwire/ghostwire/zones/world"
)

// bot lifecycle, per session:
//
//	idle ──start──▶ connecting ──accepted──▶ running ──end of life──▶ draining ──acked/echoed or timeout──▶ closing ──▶ idle / done
//	   any state but idle ──session closed by the server, a timeout or a denial──▶ idle (reconnect) / done
//	   running, draining ──the server's Redirect──▶ connecting (same player, to the gateway it names)
type botState uint8

const (
	botIdle botState = iota
	botConnecting
	botRunning
	botDraining
	botClosing
	botDone
)

// bot is one simulated player. Its worker owns it: every method runs on the
// worker's goroutine (the truth rings are the only state other workers read).
type bot struct {
	w     *worker
	idx   int   // global bot index
	slot  int32 // index in w.bots: the socket tag
	mover *scenario.Mover
	prof  int // impairment profile index
	tr    *truth
	// server is the gateway this bot plays on (Servers round-robin).
	server netip.AddrPort
	// observer: the bot decodes ghosts and checks its view (Observers).
	observer bool

	state   botState
	client  *session.Client
	sock    sock
	hasSock bool
	pipe    *netsim.Pipe
	netIn   func([]byte) // pipe.BtoA delivery: bound once, so delivering allocates nothing
	netOut  func([]byte)
	session uint64 // sessions started
	pid     uint64 // player id of the current session
	rxNow   time.Duration

	wake time.Duration // when it is due (its worker's heap holds a copy)

	startAt time.Duration
	endAt   time.Duration
	// life is a churning session's length (0: the run's), counted from
	// its connect: a handshake the server holds back (its limit on new
	// connections) does not use it up.
	life       time.Duration
	drainUntil time.Duration
	sessStart  time.Duration
	upAt       time.Duration // when the session's handshake completed
	placed     bool          // the session's player has had its first state (Hists.Placed recorded)
	connected  bool
	wasUp      bool // a session of this bot was up before (the next connect is a reconnect)
	lost       bool // the bot's last session ended unexpectedly (disconnected or failed)
	refused    bool // this session's socket reported an error (ICMP: nobody listens)

	inputEpoch time.Duration
	inputStart bool
	nextInput  time.Duration
	inputK     int64 // the session's next input sample: inputPoint(inputK)
	inputs     uint64
	lastAck    uint64
	lastCtl    time.Duration
	lastOff    [3]float32
	spawned    bool          // the server's first authoritative state has arrived
	holdTruth  time.Duration // publish no positions before this (a jump is on its way)

	nextEcho  time.Duration
	echoSent  uint64
	echoNext  uint64 // next counter expected back
	zone      *world.Zone
	hitchOpen bool
	hitchEnd  time.Duration
	hitchMax  time.Duration
	gapStart  time.Duration // ordinary play: the current baseline window began
	gapMax    time.Duration // ordinary play: its longest control gap so far

	nextSample time.Duration
	viewCursor int
	shift      time.Duration // onto the swarm's server-clock epoch
	haveShift  bool

	// Cold arrays last: the fields above are what a turn touches, and
	// with thousands of bots each of their cache lines is a miss.
	inputTimes [64]time.Duration // by move sequence: when it was sampled
	rep        reported          // what this session already folded into the shard
}

// reported holds the cumulative session counters already added to the
// shard, so each fold adds only the difference.
type reported struct {
	delivered, dropped, received, abandoned uint64
	added, acked, lost, stale, held         uint64
	netSent, netDropped                     uint64
}

func (b *bot) sw() *Swarm { return b.w.sw }

// startSession mints a token and begins connecting.
func (b *bot) startSession(now time.Duration) {
	sw := b.sw()
	c := &b.w.shard.C
	b.session++
	if b.wasUp {
		c.ReconnectAttempts++ // counted before anything can fail, so failed ≤ attempts
	}
	b.pid = sw.cfg.PlayerBase + uint64(b.idx)<<pidSessionBits + b.session&(1<<pidSessionBits-1)
	tok, err := handshake.IssueToken(sw.cfg.Key, handshake.TokenParams{
		PlayerID: b.pid, ProtocolID: sw.cfg.ProtocolID, Expiry: tokenExpiry,
		Timeout: sw.cfg.TokenTimeout, ServerAddrs: b.tokenServers(),
	}, time.Now(), crand.Reader)
	if err != nil {
		b.fail(now, c, err)
		return
	}
	cc := &sw.clientCfg
	if !b.observer {
		cc = &sw.blindCfg
	}
	cl, err := session.NewClient(tok, b.server, *cc, b, time.Now(), now)
	if err != nil {
		b.fail(now, c, err)
		return
	}
	s, err := b.w.tr.open(b.server, b.slot)
	if err != nil {
		c.SocketErrors++
		b.fail(now, c, err)
		return
	}
	b.w.tr.bind(s, cl.Token())
	if p := sw.cfg.Mix[b.prof]; !p.Perfect() {
		seed := sw.cfg.Seed ^ uint64(b.idx)<<24 ^ b.session
		b.pipe, err = netsim.NewPipe(p.Link(seed), p.Link(seed+1))
		if err != nil {
			b.w.tr.close(s)
			b.fail(now, c, err)
			return
		}
	}
	c.Sessions++
	b.client, b.sock, b.hasSock = cl, s, true
	b.state, b.sessStart, b.connected, b.refused, b.placed = botConnecting, now, false, false, false
	b.rep = reported{}
	b.inputs, b.lastAck, b.lastOff, b.inputStart, b.spawned, b.holdTruth = 0, 0, [3]float32{}, false, false, 0
	b.echoSent, b.echoNext = 0, 1
	b.zone, b.hitchOpen, b.haveShift = nil, false, false
	b.tr.reset(b.pid)
	b.mover.Reset()
	// Churn's session length starts at the connect (onConnected): counted
	// from here, a session whose handshake the server held back past it
	// (300 bots at once against the 100 a second a /24 may start) was
	// given up, and past connectGrace counted a failed connect — 7 of
	// 48,729 sessions in a 30-minute soak, all in its first second,
	// failing the run on no fault of the server's.
	b.endAt, b.life = sw.runEnd, b.mover.Lifetime()
}

// tokenServers lists the bot's own gateway first, then the others (a
// token holds at most handshake.MaxServerAddrs).
func (b *bot) tokenServers() []netip.AddrPort {
	all := b.sw().cfg.Servers
	out := make([]netip.AddrPort, 0, min(len(all), handshake.MaxServerAddrs))
	out = append(out, b.server)
	for _, a := range all {
		if len(out) == handshake.MaxServerAddrs {
			break
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// fail counts a session that could not even start and retries later.
func (b *bot) fail(now time.Duration, c *metrics.Counters, err error) {
	c.Errors++
	c.SessionErrors++
	b.connectFailed(c)
	b.sw().logErr("session start", err)
	b.idle(now, b.sw().cfg.Reconnect)
}

// connectFailed counts a session that never came up: a failed connect,
// and a failed reconnect when an earlier session of the bot was up.
func (b *bot) connectFailed(c *metrics.Counters) {
	c.ConnectFails++
	if b.wasUp {
		c.ReconnectFails++
	}
	b.lost = true
}

// idle waits pause before the next session, or ends the bot when the run is over.
func (b *bot) idle(now, pause time.Duration) {
	b.state = botIdle
	b.startAt = now + pause
	if b.startAt >= b.sw().runEnd || b.sw().stopping.Load() {
		b.state = botDone
	}
}

func (b *bot) onConnected(now time.Duration) {
	sw := b.sw()
	c := &b.w.shard.C
	b.connected, b.wasUp, b.lost, b.upAt = true, true, false, now
	c.Connects++
	c.Connected++
	b.w.shard.H.Connect.Record(int64((now - b.sessStart) / time.Microsecond))
	b.state = botRunning
	if b.life > 0 && now+b.life < b.endAt {
		b.endAt = now + b.life
	}
	if now >= b.endAt {
		b.beginDrain(now)
	}
	b.lastCtl = now
	b.gapStart, b.gapMax = now, 0
	if sw.cfg.EchoInterval > 0 {
		b.nextEcho = now + time.Duration(b.w.rng.Int64N(int64(sw.cfg.EchoInterval)))
	}
	b.nextSample = now + time.Duration(b.w.rng.Int64N(int64(sw.cfg.SampleInterval)))
}

// Event implements session.ClientHandler: the zone's echoes.
func (b *bot) Event(e event.Event) {
	if e.Class != event.Ordered || e.Lane != echoLane {
		return
	}
	c := &b.w.shard.C
	m, err := parseEcho(e.Payload)
	switch {
	case errors.Is(err, errEchoMagic):
		c.EventsOther++ // the game's own lane-0 events: not ours to judge
		return
	case err != nil:
		c.EventsCorrupt++
		return
	case m.bot != uint32(b.idx) || m.session != b.pid:
		c.EventsForeign++ // another bot's or another session's event reached us
		return
	}
	switch {
	case m.counter == b.echoNext:
		c.EventsEchoed++
		b.sw().echoSeen.Store(true)
		b.echoNext++
		b.w.shard.H.Echo.Record(int64((b.rxNow - m.sent) / time.Microsecond))
	case m.counter < b.echoNext:
		c.EventsDuplicate++
	default:
		// Skipped ahead. The lane is ordered, so the echoes between can
		// never come after this one (one that did would count as a
		// duplicate): they are lost, and counted so here — counting only
		// the tail missing at the end reported "lost 0" for an echo lost
		// mid-stream, which sent an investigation looking for reordering.
		c.EventsOutOfOrder++
		c.EventsLost += m.counter - b.echoNext
		c.EventsEchoed++
		b.echoNext = m.counter + 1
	}
}

// receive hands one datagram (after the simulated network) to the session.
func (b *bot) receive(now time.Duration, p []byte) {
	if b.client == nil {
		return
	}
	c := &b.w.shard.C
	b.rxNow = now
	// Only an observer's mirror reads ghost sections: the others' stats
	// never move, and reading them cost a cold cache line a datagram.
	var sections uint64
	if b.observer {
		sections = b.client.Mirror().Stats().Sections
	}
	err := b.client.Receive(now, p)
	if r, ok := b.client.Redirect(); ok {
		b.follow(now, r)
		return
	}
	if err != nil {
		var de *session.DeniedError
		switch {
		case errors.As(err, &de):
		case errors.Is(err, session.ErrProtocol), errors.Is(err, handshake.ErrAuth), errors.Is(err, handshake.ErrGarbage):
			c.Errors++
			c.ProtocolErrors++
		}
	}
	if b.state == botConnecting && b.client.State() == handshake.StateConnected {
		b.onConnected(now)
	}
	if !b.connected {
		return
	}
	if !b.placed && b.client.Stats().Predictor.Reconciled > 0 {
		// The player's first state: its zone has placed it. (Read until
		// then only: a few datagrams a session.)
		b.placed = true
		b.w.shard.H.Placed.Record(int64((now - b.upAt) / time.Microsecond))
	}
	if ack := b.client.LastAck(); ack > b.lastAck {
		b.onAck(now, ack, b.observer && b.client.Mirror().Stats().Sections > sections)
	}
	if off := b.client.ControlOffset(); off != b.lastOff {
		b.lastOff = off
		if off != [3]float32{} {
			// The server's state differed from the prediction: the
			// positions published up to now are stale. The first
			// authoritative state is the spawn point (the client starts
			// predicting at the origin): not a correction.
			if b.client.Stats().Predictor.Reconciled > 1 {
				c.Corrections++
			}
			b.tr.invalidate(b.lastAck, b.inputs)
			b.zone = nil    // a jump (spawn, teleport) is no border crossing
			b.mover.Reset() // plan again from where the server put us
		}
	}
}

// follow moves the bot to the gateway a Redirect names (a node draining,
// docs/protocol.md §7.19): the same player continues there with the
// Redirect's token — a redirect, not a disconnect. The old session's
// acknowledgement (its Disconnect copies) goes at once, all copies
// together, since the bot keeps one socket; if all are lost the old
// server gives up on them after a second and closes that session anyway.
// The new session continues the old one's move and event streams, as the
// client library does (session.Client.ContinueMoves, ContinueEvents):
// the moves and ordered events the old server had not confirmed go again
// under their numbers and the player's zone drops the ones it applied, so
// the bot's invariants (every move acknowledged, every echo once and in
// order) hold across the switch. MovesRedirected counts the moves still
// unacknowledged at the switch (resent, not lost).
func (b *bot) follow(now time.Duration, r *session.RedirectError) {
	sw := b.sw()
	c := &b.w.shard.C
	c.Redirects++
	if b.lastAck < b.inputs {
		c.MovesRedirected += b.inputs - b.lastAck
	}
	old := b.client
	cfg := sw.clientCfg
	if !b.observer {
		cfg = sw.blindCfg
	}
	for i := range cfg.DisconnectCopies {
		out, err := old.Poll(now+time.Duration(i)*cfg.DisconnectInterval, b.w.buf[:0])
		if err != nil || len(out) == 0 {
			break
		}
		b.send(out)
	}
	b.fold()
	if b.hitchOpen {
		b.closeHitch(now)
	}
	if b.hasSock {
		b.w.tr.close(b.sock)
		b.hasSock = false
	}
	if b.connected {
		c.Connected--
	}
	b.client, b.connected = nil, false
	cfg.InitialControl = old.Control()
	cl, err := session.NewClient(r.Token, r.Server, cfg, b, time.Now(), now)
	if err != nil {
		b.lost = true
		b.fail(now, c, err)
		return
	}
	cl.ContinueMoves(old)
	cl.ContinueEvents(old)
	sk, err := b.w.tr.open(r.Server, b.slot)
	if err != nil {
		c.SocketErrors++
		b.lost = true
		b.fail(now, c, err)
		return
	}
	b.w.tr.bind(sk, cl.Token())
	b.server = r.Server
	b.client, b.sock, b.hasSock = cl, sk, true
	b.state, b.sessStart, b.refused = botConnecting, now, false
	b.rep = reported{}
	// inputs, lastAck and the echo counters go on: same streams.
	b.zone, b.hitchOpen, b.haveShift = nil, false, false
	b.tr.reset(b.pid)
	b.mover.Reset()
}

// onAck takes a newer acknowledgement, received at now; stamped says the
// datagram that carried it also carried a ghost section.
func (b *bot) onAck(now time.Duration, ack uint64, stamped bool) {
	c := &b.w.shard.C
	c.ControlUpdates++
	if b.inputs-ack < uint64(len(b.inputTimes)) {
		b.w.shard.H.Ack.Record(int64((now - b.inputTimes[ack%uint64(len(b.inputTimes))]) / time.Microsecond))
	}
	gap := now - b.lastCtl
	if b.hitchOpen {
		b.hitchMax = max(b.hitchMax, gap)
	} else if b.state == botRunning && b.lastAck > 0 { // not the wait for the spawn
		// The same measure away from handoffs: the baseline the hitch is
		// judged against (a busy host or a lossy link widens both).
		b.gapMax = max(b.gapMax, gap)
		if now-b.gapStart >= b.sw().cfg.HitchWindow {
			b.w.shard.H.Gap.Record(int64(b.gapMax / time.Microsecond))
			b.gapStart, b.gapMax = now, 0
		}
	}
	b.lastCtl, b.lastAck = now, ack
	if st, ok := b.serverTime(now); ok {
		// Publish the time the server made the acknowledgement: the stamp
		// of the ghost section that came with it. The server's clock at
		// now is later by however long the datagram waited for this bot
		// (a starved worker, the quantum), so a ghost stamped in between
		// was judged against an older move than the server had applied.
		// A datagram without ghosts has no stamp: now is all we know.
		if stamped {
			if ts, ok := b.client.Mirror().Stamp(); ok {
				st = ts + b.shift
			}
		}
		b.tr.putAck(st, ack)
	}
}

// serverTime is the server's clock at local now on the swarm's epoch.
func (b *bot) serverTime(now time.Duration) (time.Duration, bool) {
	// The mirror learns the server's clock from ghost sections' stamps; a
	// bot that skips them never does, and its mirror's ServerTime is now
	// (TestBlindBotClockIsLocal): spare it the mirror's cache line.
	st := now
	if b.observer {
		st = b.client.Mirror().ServerTime(now)
	}
	if st == 0 {
		return 0, false
	}
	if !b.haveShift {
		b.shift, b.haveShift = b.sw().clock.shift(st-now), true
	}
	return st + b.shift, true
}

// input samples one move.
func (b *bot) input(now time.Duration) {
	c := &b.w.shard.C
	cur := b.client.Control()
	a := b.mover.Step(now, cur.Pos)
	if a.Teleport {
		c.Teleports++
		if err := b.client.SendEvent(teleportLane, appendTeleport(b.w.ebuf[:], float32(a.To[0]), float32(a.To[1]))); err != nil {
			c.EventsRefused++
		} else {
			// Until the server's jump comes back as a correction, the
			// prediction is not where the server has this bot: publish
			// nothing (for at most 2 s, in case the server ignores it).
			b.holdTruth = now + 2*time.Second
			b.tr.invalidate(b.lastAck, b.inputs)
		}
	}
	st, err := b.client.Input(move.Move{Forward: a.Forward, Strafe: a.Strafe, Yaw: a.Yaw})
	if err != nil {
		c.Errors++
		c.SessionErrors++
		return
	}
	b.inputs++
	b.inputTimes[b.inputs%uint64(len(b.inputTimes))] = now
	if !b.spawned {
		// Until the server's first full state (the spawn point) arrives
		// the client predicts from the origin: nothing to publish yet.
		b.spawned = b.client.Stats().Predictor.Reconciled > 0
	}
	if b.spawned && now >= b.holdTruth {
		b.tr.putPos(b.inputs, st.Pos[0], st.Pos[2])
		b.checkZone(now, float64(st.Pos[0]), float64(st.Pos[2]))
	}
}

// checkZone counts a zone-border crossing and opens the hitch window.
func (b *bot) checkZone(now time.Duration, x, z float64) {
	if b.zone != nil && b.zone.Contains(x, z) {
		return
	}
	wd := b.sw().cfg.Scenario.World
	nz, ok := wd.ZoneAt(x, z)
	if !ok {
		return
	}
	if b.zone != nil && nz != b.zone {
		b.w.shard.C.Handoffs++
		if !b.hitchOpen {
			b.hitchOpen, b.hitchMax = true, now-b.lastCtl
		}
		b.gapMax = 0 // the baseline window in progress is spoilt
		b.hitchEnd = now + b.sw().cfg.HitchWindow
	}
	b.zone = nz
}

func (b *bot) closeHitch(now time.Duration) {
	b.hitchOpen = false
	b.gapStart, b.gapMax = now, 0
	// A gap still open counts too when moves are waiting for their
	// acknowledgement: a handoff that stalls for the whole window must not
	// be recorded as the short gap seen when it began. (With every move
	// acknowledged — the bot stopped moving — the silence is no stall.)
	if b.lastAck < b.inputs {
		b.hitchMax = max(b.hitchMax, now-b.lastCtl)
	}
	b.w.shard.H.Hitch.Record(int64(b.hitchMax / time.Microsecond))
}

func (b *bot) sendEcho(now time.Duration) {
	c := &b.w.shard.C
	p := appendEcho(b.w.ebuf[:], echoMsg{bot: uint32(b.idx), session: b.pid, counter: b.echoSent + 1, sent: now})
	if err := b.client.SendEvent(echoLane, p); err != nil {
		c.EventsRefused++
		return
	}
	b.echoSent++
	c.EventsSent++
}

func (b *bot) beginDrain(now time.Duration) {
	b.state = botDraining
	b.drainUntil = now + b.sw().cfg.Drain
}

// drained: every move acknowledged and every echo back.
func (b *bot) drained() bool {
	echoDone := b.sw().cfg.EchoInterval == 0 || b.echoNext > b.echoSent || !b.sw().echoSeen.Load()
	return b.lastAck >= b.inputs && echoDone
}

// service does everything due at now.
func (b *bot) service(now time.Duration) {
	if b.state == botIdle {
		if now >= b.startAt {
			b.startSession(now)
		}
		if b.state == botIdle || b.state == botDone {
			return
		}
	}
	if b.state == botDone || b.client == nil {
		return
	}
	sw := b.sw()
	if b.pipe != nil {
		b.rxNow = now
		b.pipe.BtoA.Deliver(now, b.netIn)
		if b.client == nil {
			return
		}
	}
	if b.state == botRunning && now >= b.endAt {
		b.beginDrain(now)
	}
	if b.state == botConnecting && now >= b.endAt {
		// The run (or this churn session) is over before the handshake. A
		// handshake that just began is given up — a quit; one that has
		// hung for connectGrace, or a reconnect after a lost session, has
		// failed.
		b.client.Close(now)
		if now-b.sessStart < connectGrace && !b.lost && !b.refused {
			b.state = botClosing
		}
	}
	if b.state == botDraining && (b.drained() || now >= b.drainUntil) {
		b.finish(now)
		b.client.Close(now)
		b.state = botClosing
	}
	if b.state == botRunning {
		if !b.inputStart {
			// The session's input clock starts at its first InputDue,
			// now: inputPoint(k) is then exactly its k-th sample time.
			b.inputStart, b.inputEpoch, b.inputK = true, now, 0
		}
		// Ask the session only when the clock says a sample is due: an
		// InputDue that answers no (on every other turn of the bot, and
		// to end every loop) cost ≈ 5 % of a bot's CPU in cache misses.
		for now >= b.inputPoint(b.inputK) && b.client.InputDue(now) {
			b.input(now)
			b.inputK++
		}
		if b.inputPoint(b.inputK) <= now {
			// The session skipped samples (a worker stalled for more than
			// its move window): pick its clock up after now.
			b.inputK = int64(now-b.inputEpoch)*int64(sw.cfg.InputRate)/int64(time.Second) + 1
		}
		b.nextInput = b.inputPoint(b.inputK)
		if sw.cfg.EchoInterval > 0 && now >= b.nextEcho {
			b.sendEcho(now)
			b.nextEcho = max(b.nextEcho+sw.cfg.EchoInterval, now)
		}
	}
	if b.connected && now >= b.nextSample {
		b.sample(now)
		b.nextSample = max(b.nextSample+sw.cfg.SampleInterval, now)
	}
	if b.hitchOpen && now >= b.hitchEnd {
		b.closeHitch(now)
	}
	for {
		out, err := b.client.Poll(now, b.w.buf[:0])
		if err != nil {
			b.w.shard.C.Errors++
			b.w.shard.C.SessionErrors++
			break
		}
		if len(out) == 0 {
			break
		}
		if b.pipe != nil {
			b.pipe.AtoB.Send(now, out)
		} else {
			b.send(out)
		}
		if b.client.State() == handshake.StateConnected {
			// A connected session sends at most one datagram per instant
			// (the data or ack packet moves its send slot on, and a
			// keepalive is not due right after a send): the Poll that
			// would say so costs ≈ 2 % of a bot's CPU. Were it ever
			// wrong, nextWake is then ≤ now and the next turn sends it.
			break
		}
	}
	if b.pipe != nil {
		b.pipe.AtoB.Deliver(now, b.netOut)
	}
	if b.client.State() == handshake.StateClosed {
		b.endSession(now)
	}
}

// inputPoint is the time of the session's k-th input sample: start +
// ⌊k·10⁹/InputRate⌋ ns, the move stream's own clock (move.Stream.Due).
func (b *bot) inputPoint(k int64) time.Duration {
	return b.inputEpoch + time.Duration(k*int64(time.Second)/int64(b.sw().cfg.InputRate))
}

// send writes one datagram to the socket.
func (b *bot) send(p []byte) {
	c := &b.w.shard.C
	if err := b.w.tr.send(b.sock, p); err != nil {
		if !errors.Is(err, errWouldBlock) && !errors.Is(err, net.ErrClosed) {
			b.sw().logErr("send", err)
		}
		c.Errors++
		c.SocketErrors++
		return
	}
	c.PacketsOut++
	c.BytesOut += uint64(len(p))
}

// finish accounts a session the bot ends itself: what is still unacknowledged
// or unechoed after the drain is lost.
func (b *bot) finish(now time.Duration) {
	c := &b.w.shard.C
	if b.unplaced(now) {
		c.SessionsUnplaced++
		c.MovesUnplaced += b.inputs
		if b.hitchOpen {
			b.closeHitch(now)
		}
		b.fold()
		return
	}
	if b.lastAck < b.inputs {
		c.MovesUnacked += b.inputs - b.lastAck
	}
	if b.sw().cfg.EchoInterval > 0 && b.sw().echoSeen.Load() && b.echoNext <= b.echoSent {
		c.EventsLost += b.echoSent - (b.echoNext - 1)
	}
	if b.hitchOpen {
		b.closeHitch(now)
	}
	b.fold()
}

// endSession tears a closed session down and decides what comes next.
func (b *bot) endSession(now time.Duration) {
	c := &b.w.shard.C
	err := b.client.Err()
	b.fold()
	switch {
	case b.state == botClosing && err == nil:
		c.Quits++
		if b.endAt < b.sw().runEnd && !b.sw().stopping.Load() {
			c.QuitsChurn++ // the session's lifetime, not the run, ended it
		}
		b.lost = false
	case !b.connected:
		b.connectFailed(c)
		c.Errors++
		if err == nil {
			err = errors.New("still connecting when the session's time was up")
		}
		b.sw().logErr("connect", err)
	default:
		if b.unplaced(now) {
			c.SessionsUnplaced++
			c.MovesUnplaced += b.inputs
		}
		c.Disconnected(causeOf(err))
		c.Errors++
		b.lost = true
		b.sw().logErr("disconnected", err)
	}
	if b.connected {
		c.Connected--
	}
	if b.hitchOpen {
		b.closeHitch(now)
	}
	if b.hasSock {
		b.w.tr.close(b.sock)
		b.hasSock = false
	}
	b.client, b.pipe, b.connected = nil, nil, false
	b.tr.end()
	pause := b.sw().cfg.Reconnect
	if b.state == botClosing {
		pause = b.mover.Pause()
	}
	b.idle(now, pause)
}

// UnplacedAfter: a session up this long that has heard nothing of its
// player from the server (no state, no acknowledgement) was never placed
// in a zone. A join takes a tick or two; a connection whose join brought
// nothing for a second looks the player's record up and joins again
// (actors/conn), so three seconds is that retry and a loaded host's
// slack.
const UnplacedAfter = 3 * time.Second

// unplaced reports whether the session has been up for UnplacedAfter and
// the server has never sent its player's state.
func (b *bot) unplaced(now time.Duration) bool {
	return b.connected && b.lastAck == 0 && now-b.upAt >= UnplacedAfter &&
		b.client != nil && b.client.Stats().Predictor.Reconciled == 0
}

// causeOf sorts the error a session that was up ended with into the
// report's causes: the server's Disconnect reason, or the session's own
// timeout (nothing heard: a dead, stopped or paused server).
func causeOf(err error) metrics.Cause {
	var de *session.DisconnectError
	switch {
	case errors.As(err, &de):
		switch de.Reason {
		case handshake.ReasonServerShutdown:
			return metrics.CauseShutdown
		case handshake.ReasonKicked:
			return metrics.CauseKicked
		case handshake.ReasonTimeout:
			return metrics.CauseTimeout
		case handshake.ReasonDuplicate:
			return metrics.CauseSuperseded
		}
	case errors.Is(err, session.ErrTimeout):
		return metrics.CauseTimeout
	}
	return metrics.CauseOther
}

// fold adds the session's counters since the last fold to the shard.
func (b *bot) fold() {
	if b.client == nil {
		return
	}
	c := &b.w.shard.C
	s := b.client.Stats()
	r := &b.rep
	add := func(dst *uint64, cur uint64, last *uint64) {
		if cur > *last {
			*dst += cur - *last
		}
		*last = cur
	}
	add(&c.FatesDelivered, s.Notify.Delivered, &r.delivered)
	add(&c.FatesDropped, s.Notify.Dropped, &r.dropped)
	add(&c.InReceived, s.Notify.Received, &r.received)
	add(&c.InAbandoned, s.Notify.Abandoned, &r.abandoned)
	add(&c.MovesSent, s.Moves.Added, &r.added)
	add(&c.MovesAcked, s.Moves.Acked, &r.acked)
	add(&c.MovesLost, s.Moves.Dropped, &r.lost)
	add(&c.InputHeld, s.Moves.Held, &r.held)
	add(&c.StaleAcks, s.Predictor.Stale, &r.stale)
	if b.pipe != nil {
		a, z := b.pipe.AtoB.Stats(), b.pipe.BtoA.Stats()
		add(&c.NetSent, a.Sent+z.Sent, &r.netSent)
		add(&c.NetDropped, a.Dropped.Total()+z.Dropped.Total(), &r.netDropped)
	}
}

// sample folds counters and takes the once-per-interval samples: RTT,
// ghosts held, view accuracy.
func (b *bot) sample(now time.Duration) {
	b.fold()
	c := &b.w.shard.C
	h := &b.w.shard.H
	if rtt := b.client.RTT(); rtt > 0 {
		h.RTT.Record(int64(rtt / time.Microsecond))
	}
	if !b.observer {
		return // no ghosts decoded: nothing to look at
	}
	mir := b.client.Mirror()
	c.GhostsHeld += uint64(mir.Len())
	c.GhostSamples++
	b.haveShift = false // re-derive: the mirror's clock estimate drifts
	b.viewSample(now)
}

// viewSample compares up to ViewPeers ghosts that are bots of this swarm
// with their true positions.
func (b *bot) viewSample(now time.Duration) {
	sw := b.sw()
	mir := b.client.Mirror()
	n := mir.Len()
	if n == 0 || sw.cfg.ViewPeers == 0 {
		return
	}
	c := &b.w.shard.C
	myShift := time.Duration(0)
	haveClock := false
	if _, ok := b.serverTime(now); ok {
		myShift, haveClock = b.shift, true
	}
	done := 0
	for i := 0; i < n && done < sw.cfg.ViewPeers; i++ {
		g := mir.At((b.viewCursor + i) % n)
		peer, ok := sw.peer(g.Entity)
		if !ok {
			c.ViewOthers++
			continue
		}
		c.ViewPeers++
		var x, z float32
		var have bool
		if seq := uint64(g.State.Extra[0]) | uint64(g.State.Extra[1])<<32; seq != 0 {
			// The zone stamped the ghost with the move it reflects: exact.
			x, z, have = peer.posAt(seq)
			if have {
				c.ViewBySeq++
			}
		} else if haveClock {
			if ack, ok := peer.ackAt(g.Updated + myShift); ok {
				x, z, have = peer.posAt(ack)
				if have {
					c.ViewByTime++
				}
			}
		}
		if !have {
			c.ViewNoTruth++
			done++
			continue
		}
		d := math.Hypot(g.State.Pos[0]-float64(x), g.State.Pos[2]-float64(z))
		b.w.shard.H.ViewErr.Record(int64(d * 1e6))
		c.ViewSamples++
		done++
	}
	b.viewCursor += done + 1
}

// schedule computes the bot's next wake-up.
func (b *bot) nextWake(now time.Duration) time.Duration {
	switch b.state {
	case botDone:
		return never
	case botIdle:
		return b.startAt
	}
	if b.client == nil {
		return never
	}
	if b.client.State() == handshake.StateClosed {
		return now // tear down at once
	}
	d := b.client.NextDeadline(now)
	if b.state == botConnecting {
		d = min(d, b.endAt)
	}
	if b.state == botRunning {
		d = min(d, b.nextInput, b.endAt)
		if b.sw().cfg.EchoInterval > 0 {
			d = min(d, b.nextEcho)
		}
	}
	if b.state == botDraining {
		if b.drained() {
			return now
		}
		d = min(d, b.drainUntil)
	}
	if b.connected {
		d = min(d, b.nextSample)
	}
	if b.hitchOpen {
		d = min(d, b.hitchEnd)
	}
	if b.pipe != nil {
		if t, ok := b.pipe.AtoB.NextDelivery(); ok {
			d = min(d, t)
		}
		if t, ok := b.pipe.BtoA.NextDelivery(); ok {
			d = min(d, t)
		}
	}
	return d
}

const never = time.Duration(math.MaxInt64)

// pidSessionBits: a bot's player id is base + index<<20 + session, so any
// bot can tell from a ghost's entity id which bot it is (if the zone uses
// player ids as entity ids) without a shared map.
const pidSessionBits = 20

const tokenExpiry = time.Minute

// connectGrace: a handshake still running at the end of the bot's session
// time is given up without blame when it began less than this ago (the
// server answers in milliseconds); past it, the connect has failed.
const connectGrace = time.Second
