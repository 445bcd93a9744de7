package conn

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/ghostmgr"
	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/session"
)

// Outbox takes sealed datagrams for sending: the gateway's writer. Send
// never blocks; it returns false (and releases d) when its queue is full.
type Outbox interface {
	Send(d *msg.Datagram) bool
}

// Params are what the gateway gives one connection.
type Params struct {
	Config
	Handshake *handshake.Session // the session Grant.Session returned; the actor owns it
	Player    uint64
	Token     handshake.TokenID
	Timeout   time.Duration // the token's idle timeout (0: Config.Session.Timeout)
	UserData  []byte        // the token's user data (owned by the connection)
	Now       func() time.Duration
	Out       Outbox
	Gateway   *actor.PID // receives Verified, Moved, Closed (nil: nobody)
	Zone      *actor.PID // receives Join, Input, Leave (nil: input is dropped and counted)
	// Inflight is the gateway's count of datagrams queued for this
	// connection; the actor decrements it as it takes each one.
	Inflight *atomic.Int32
	Counters *Counters
	Log      *slog.Logger
}

func (p *Params) validate() error {
	switch {
	case p.Handshake == nil:
		return errors.New("conn: Handshake is required")
	case p.Now == nil:
		return errors.New("conn: Now is required")
	case p.Out == nil:
		return errors.New("conn: Out is required")
	}
	return p.Config.Validate()
}

// Props returns the props of one connection actor. It must not be restarted
// (a restart would reuse the session's keys from a fresh state): the gateway
// supervises its connections with a stop-on-failure strategy.
func Props(p Params) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return newConn(p) },
		actor.WithSupervisor(stopOnFailure))
}

// stopOnFailure stops a failed child instead of restarting it: the ghost
// manager's table would restart empty while the client still holds ghosts.
var stopOnFailure = actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })

// StopOnFailure is the supervisor strategy a connection's parent uses.
func StopOnFailure() actor.SupervisorStrategy { return stopOnFailure }

// conn is the actor. Everything runs inside Receive, one message at a time,
// except the timer callback, which only sends a message.
type conn struct {
	p     Params
	srv   *session.Server
	relay *session.GhostRelay
	self  *actor.PID
	ctx   actor.Context // valid during Receive only

	ghosts *actor.PID
	views  msg.ViewSlot

	// Wake timer: one time.Timer, re-armed for NextDeadline.
	timer    *time.Timer
	armedFor time.Duration // deadline the timer is set for (0: not armed)
	stopped  atomic.Bool
	root     *actor.RootContext
	wakeMsg  *wake

	in        *msg.Input // input collected during one Receive call
	spare     *msg.Datagram
	gfates    []notify.Fate
	relayOut  []notify.Fate
	wantOut   bool          // a ghost credit is outstanding
	slot      time.Duration // 1 / SendRate
	verified  bool
	joined    bool
	closed    bool // Closed sent
	zone      *actor.PID
	zoneEpoch uint64
	lastMove  uint64 // the newest move handed to an Input
}

func newConn(p Params) *conn {
	return &conn{p: p, zone: p.Zone, wakeMsg: &wake{}}
}

// Receive implements actor.Actor.
func (c *conn) Receive(ctx actor.Context) {
	c.ctx = ctx
	defer func() { c.ctx = nil }()
	switch m := ctx.Message().(type) {
	case *msg.Datagram:
		c.onDatagram(m)
	case *wake:
		c.armedFor = 0
	case *msg.GhostSection:
		c.onSection(m)
	case *msg.Control:
		if c.srv != nil {
			c.srv.SetControl(m.LastApplied, m.State)
			if m.Force {
				c.srv.ForceControl()
			}
		}
		m.Release()
	case *msg.Output:
		c.onOutput(m)
	case *msg.Redirect:
		if m.Epoch > c.zoneEpoch {
			c.zone, c.zoneEpoch = m.Zone, m.Epoch
		}
	case *msg.Kick:
		reason := m.Reason
		if !reason.IsDisconnect() {
			reason = handshake.ReasonKicked
		}
		c.close(reason)
	case *Shutdown:
		c.close(m.Reason)
	case *StatsRequest:
		var s session.ServerStats
		if c.srv != nil {
			s = c.srv.Stats()
		}
		ctx.Respond(&s)
		return
	case *actor.Started:
		if err := c.start(ctx); err != nil {
			c.logger().Error("connection not started", "err", err)
			if c.p.Handshake != nil {
				c.p.Handshake.Close(handshake.ReasonServerShutdown)
			}
			c.finish(handshake.ReasonServerShutdown)
			return
		}
	case *actor.Stopping:
		c.stopped.Store(true)
		if c.timer != nil {
			c.timer.Stop()
		}
		if c.in != nil {
			c.in.Release()
			c.in = nil
		}
		return
	default:
		return
	}
	c.pump()
}

func (c *conn) logger() *slog.Logger {
	if c.p.Log != nil {
		return c.p.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (c *conn) start(ctx actor.Context) error {
	if c.p.Counters == nil {
		c.p.Counters = new(Counters)
	}
	if err := c.p.validate(); err != nil {
		return err
	}
	c.self = ctx.Self()
	c.root = ctx.ActorSystem().Root
	now := c.p.Now()
	srv, err := session.NewServer(c.p.Handshake, c.p.sessionConfig(c.p.Timeout), c, now)
	if err != nil {
		return fmt.Errorf("conn: %w", err)
	}
	relay, err := session.NewGhostRelay(c.p.Session.MaxPacketSize, c.p.Session.Notify.MaxInFlight)
	if err != nil {
		return fmt.Errorf("conn: %w", err)
	}
	c.srv, c.relay = srv, relay
	c.slot = time.Second / time.Duration(c.p.Session.SendRate)
	c.gfates = make([]notify.Fate, 0, 64)
	c.relayOut = make([]notify.Fate, 0, 64)
	gp := ghostmgr.Params{
		Registry: c.p.Registry, Table: c.p.Ghosts, Conn: c.self, Views: &c.views,
		Now: c.p.Now, Player: c.p.Player,
	}
	if err := gp.Validate(); err != nil {
		return err
	}
	c.ghosts = ctx.Spawn(ghostmgr.Props(gp))
	c.timer = time.AfterFunc(time.Hour, c.fire)
	c.timer.Stop()
	return nil
}

// fire runs on the timer's goroutine: it only posts the wake message.
func (c *conn) fire() {
	if !c.stopped.Load() {
		c.root.Send(c.self, c.wakeMsg)
	}
}

func (c *conn) onDatagram(d *msg.Datagram) {
	if c.p.Inflight != nil {
		c.p.Inflight.Add(-1)
	}
	if c.srv == nil {
		d.Release()
		return
	}
	from := c.srv.Addr()
	moved, err := c.srv.Receive(c.p.Now(), d.Bytes(), d.Addr)
	d.Release()
	if err != nil {
		c.p.Counters.count(err)
		if !errors.Is(err, session.ErrProtocol) {
			return
		}
	}
	if moved {
		c.p.Counters.Moved.Add(1)
		if c.p.Gateway != nil {
			c.ctx.Send(c.p.Gateway, &Moved{ID: c.srv.ID(), From: from, To: c.srv.Addr()})
		}
	}
	if !c.verified && c.srv.State() >= handshake.StateConnected {
		c.verified = true
		if c.p.Gateway != nil {
			c.ctx.Send(c.p.Gateway, &Verified{PID: c.self, ID: c.srv.ID(), Token: c.p.Token, Player: c.p.Player})
		}
		if c.zone != nil {
			c.ctx.Send(c.zone, &msg.Join{
				Player: c.p.Player, Conn: c.self, Ghosts: c.ghosts, Views: &c.views,
				UserData: c.p.UserData,
			})
			c.joined = true
		}
	}
	c.flushInput()
}

// Move implements session.ServerHandler: called inside Receive for each new
// move, in order.
func (c *conn) Move(m move.Move) {
	in := c.input()
	if len(in.Moves) == 0 && c.lastMove > 0 && m.Seq > c.lastMove+1 {
		in.LostBefore = m.Seq - c.lastMove - 1 // the client lost them: the zone must not wait
	}
	c.lastMove = m.Seq
	in.Moves = append(in.Moves, m)
}

// Event implements session.ServerHandler: e.Payload is valid during the call
// only, so it is copied into the Input's arena.
func (c *conn) Event(e event.Event) {
	c.input().Add(e.Class, uint8(e.Lane), e.Key, e.Payload)
}

func (c *conn) input() *msg.Input {
	if c.in == nil {
		c.in = msg.NewInput()
	}
	return c.in
}

func (c *conn) flushInput() {
	in := c.in
	if in == nil {
		return
	}
	c.in = nil
	if in.Empty() {
		in.Release()
		return
	}
	if c.zone == nil || !c.joined {
		c.p.Counters.InputsDropped.Add(1)
		in.Release()
		return
	}
	in.Player = c.p.Player
	in.Received = c.p.Now()
	c.ctx.Send(c.zone, in)
}

func (c *conn) onSection(s *msg.GhostSection) {
	c.wantOut = false
	if c.relay != nil && !c.closed {
		if err := c.relay.Offer(s.Seq, s.Records, s.Data[:], s.Bits, c.p.Now()); err != nil {
			c.logger().Warn("ghost section refused", "conn", c.srv.ID(), "err", err)
		}
	}
	s.Release()
}

func (c *conn) onOutput(o *msg.Output) {
	if c.srv != nil {
		for i := range o.Events {
			e := &o.Events[i]
			var err error
			switch e.Class {
			case event.Ordered:
				err = c.srv.SendEvent(int(e.Lane), e.Payload)
			case event.Unordered:
				err = c.srv.SendUnordered(e.Payload)
			case event.Unguaranteed:
				err = c.srv.SendUnguaranteed(e.Payload)
			default:
				err = errStaggered
			}
			if err != nil {
				c.p.Counters.EventsDropped.Add(1)
			}
		}
	}
	o.Release()
}

var errStaggered = errors.New("conn: staggered events are not offered to zones")

func (c *conn) close(r handshake.Reason) {
	if c.srv != nil && c.srv.State() < handshake.StateDraining {
		c.srv.Close(c.p.Now(), r)
	}
}

// pump sends every datagram the session has due, exchanges fates and credit
// with the ghost manager, re-arms the timer, and reports the end.
func (c *conn) pump() {
	if c.srv == nil || c.closed {
		return
	}
	now := c.p.Now()
	for {
		d := c.spare
		if d == nil {
			d = msg.NewDatagram()
		}
		c.spare = nil
		pkt, err := c.srv.Poll(now, d.Buf[:0], c.relay)
		if err != nil || len(pkt) == 0 {
			c.spare = d
			break
		}
		if &pkt[0] != &d.Buf[0] {
			// Poll grew the buffer (cannot happen with a full-size one): copy.
			d.N = copy(d.Buf[:], pkt)
		} else {
			d.N = len(pkt)
		}
		d.Addr = c.srv.Addr()
		if !c.p.Out.Send(d) {
			c.p.Counters.OutDropped.Add(1)
		}
	}
	c.exchangeGhosts(now)
	if c.srv.Done() {
		c.finish(c.srv.Reason())
		return
	}
	c.arm(now)
}

func (c *conn) exchangeGhosts(now time.Duration) {
	c.gfates = c.srv.PopGhostFates(c.gfates[:0])
	for _, f := range c.gfates {
		c.relay.OnFate(f)
	}
	c.relayOut = c.relay.PopFates(c.relayOut[:0])
	want := !c.wantOut && !c.relay.Pending() && c.srv.State() == handshake.StateConnected
	if len(c.relayOut) == 0 && !want {
		return
	}
	gf := msg.NewGhostFates()
	gf.Fates = append(gf.Fates, c.relayOut...)
	gf.Want = want
	// The section will ride in the next send slot, not now: right after a
	// packet the bandwidth credit is spent, and sizing the section by it
	// would starve ghosts down to the minimum packet.
	gf.Budget = c.srv.GhostBudget(now + c.slot)
	gf.Now = now
	if want {
		c.wantOut = true
	}
	c.ctx.Send(c.ghosts, gf)
}

// arm sets the timer for the session's next deadline unless it is already
// set for that time or earlier.
func (c *conn) arm(now time.Duration) {
	next := c.srv.NextDeadline(now)
	if c.armedFor != 0 && c.armedFor <= next && c.armedFor > now {
		return
	}
	d := next - now
	if d < time.Millisecond {
		d = time.Millisecond // never spin: a deadline in the past fires at once anyway
	}
	c.armedFor = now + d
	c.timer.Reset(d)
}

// finish reports the end once: Leave to the zone, Closed to the gateway.
func (c *conn) finish(r handshake.Reason) {
	if c.closed {
		return
	}
	c.closed = true
	c.stopped.Store(true)
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.joined && c.zone != nil {
		c.ctx.Send(c.zone, &msg.Leave{Player: c.p.Player, Conn: c.self, Reason: r})
	}
	var st session.ServerStats
	var id handshake.ConnID
	if c.srv != nil {
		st = c.srv.Stats()
		id = c.srv.ID()
	} else if c.p.Handshake != nil {
		id = c.p.Handshake.ID()
	}
	if c.p.Gateway != nil {
		c.ctx.Send(c.p.Gateway, &Closed{
			PID: c.ctx.Self(), ID: id, Token: c.p.Token, Player: c.p.Player, Reason: r,
			Verified: c.verified, Stats: st,
		})
	} else {
		c.ctx.Stop(c.ctx.Self())
	}
}
