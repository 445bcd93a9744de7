package zone

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// EventHandler is the game's hook for the events clients send: the zone
// actor calls HandleEvent for every event of every *msg.Input, in delivery
// order (an ordered lane's events in lane order), inside Receive, so it must
// not block. A game plugs its own logic in through Params.Events instead of
// editing the zone; the default is the dev game (DevGame).
type EventHandler interface {
	// HandleEvent handles one event player sent. e.Payload is valid only
	// during the call (it aliases the pooled Input, released right after):
	// copy what you keep. c is valid only during the call.
	HandleEvent(c *EventContext, player uint64, e *msg.Event)
}

// IgnoreEvents is an EventHandler that drops every event (they are still
// counted in Metrics.Events).
var IgnoreEvents EventHandler = ignoreEvents{}

type ignoreEvents struct{}

func (ignoreEvents) HandleEvent(*EventContext, uint64, *msg.Event) {}

// DefaultMaxEventBytesPerTick is Params.MaxEventBytesPerTick's default.
const DefaultMaxEventBytesPerTick = 4096

// EventContext is what an EventHandler may do inside the zone actor. One
// value per actor, reused: it allocates nothing.
type EventContext struct {
	a *zoneActor
}

// Now is the node clock.
func (c *EventContext) Now() time.Duration { return c.a.p.Now() }

// Zone is the zone's simulation, for reads (entity positions, interest
// sets). Change it through the context's methods: they also do the
// actor's part (handoff messages, corrections across a handoff).
func (c *EventContext) Zone() *sim.Zone { return c.a.z }

// Send queues an event for player's client (it copies payload). The zone
// sends the queued events as one *msg.Output after the Input is handled.
// Each player gets at most Params.MaxEventBytesPerTick payload bytes per
// tick from the zone (every event counting at least one byte); beyond it,
// or for a player this zone has no connection for, the event is dropped,
// counted in Metrics.EventsOutDropped, and Send returns false. Sending an
// event does not guarantee delivery: the connection drops what its session
// cannot queue (conn's EventsDropped).
func (c *EventContext) Send(player uint64, class event.Class, lane uint8, key uint16, payload []byte) bool {
	return c.a.sendEvent(player, class, lane, key, payload)
}

// Teleport moves an entity to pos at once, clamped to the world, and forces
// a full control-state send to its player (msg.Control.Force). A position in
// another zone hands the entity off at once (dwell or not), and the new
// owner forces the send. An entity this zone handed away is passed on to
// its new owner; one in the middle of a handoff is teleported as soon as
// the handoff settles (retried every tick).
func (c *EventContext) Teleport(entity uint64, pos [3]float32) {
	c.a.teleport(entity, pos)
}

// Malformed counts an event the handler could not parse and ignored
// (Metrics.EventsMalformed).
func (c *EventContext) Malformed() { c.a.m.EventsMalformed.Add(1) }

// The dev game's lanes.
const (
	EchoLane     uint8 = 0 // ordered events on it come back to the sender
	TeleportLane uint8 = 1 // ordered teleport requests (AppendTeleport)
)

// DevGame is the dev world's event logic (Params.Events nil means
// &DevGame{Echo: true, Teleport: true}). It exists for tests, load tests
// (cmd/botswarm) and tools; a production game replaces it with its own
// EventHandler (or IgnoreEvents), because letting clients teleport is a
// cheat.
//
//   - Echo: an ordered event on EchoLane comes back to its sender, byte for
//     byte, on EchoLane (within the per-tick byte budget).
//   - Teleport: an ordered event on TeleportLane whose payload is a
//     teleport request (ParseTeleport) teleports the sender's entity
//     (EventContext.Teleport). Malformed requests are counted and ignored.
//
// Other events are ignored.
type DevGame struct {
	Echo     bool
	Teleport bool
}

// HandleEvent implements EventHandler.
func (d *DevGame) HandleEvent(c *EventContext, player uint64, e *msg.Event) {
	if e.Class != event.Ordered {
		return
	}
	switch e.Lane {
	case EchoLane:
		if d.Echo {
			c.Send(player, event.Ordered, EchoLane, 0, e.Payload)
		}
	case TeleportLane:
		if !d.Teleport {
			return
		}
		x, z, err := ParseTeleport(e.Payload)
		if err != nil {
			c.Malformed()
			return
		}
		c.Teleport(player, [3]float32{x, 0, z})
	}
}

// ErrMalformed reports a payload that is not a valid request.
var ErrMalformed = errors.New("zone: malformed event payload")

// Teleport request payloads. The canonical form is "TP" | x f32 | z f32
// (little-endian, 10 bytes); "GWtp" | x f32 | z f32 (12 bytes), which
// cmd/botswarm sends, is accepted too.
const (
	teleportMagic     = "TP"
	teleportMagicLong = "GWtp"
	TeleportLen       = len(teleportMagic) + 8
)

// AppendTeleport appends the canonical teleport request for (x, z) to dst.
func AppendTeleport(dst []byte, x, z float32) []byte {
	dst = append(dst, teleportMagic...)
	dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(x))
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(z))
}

// ParseTeleport decodes a teleport request: the ground position (x, z).
// It fails with ErrMalformed on a wrong size or magic, or on a coordinate
// that is not finite (the zone clamps finite ones to the world).
func ParseTeleport(p []byte) (x, z float32, err error) {
	var b []byte
	switch {
	case len(p) == TeleportLen && string(p[:2]) == teleportMagic:
		b = p[2:]
	case len(p) == len(teleportMagicLong)+8 && string(p[:4]) == teleportMagicLong:
		b = p[4:]
	default:
		return 0, 0, fmt.Errorf("%w: teleport request of %d bytes", ErrMalformed, len(p))
	}
	x = math.Float32frombits(binary.LittleEndian.Uint32(b))
	z = math.Float32frombits(binary.LittleEndian.Uint32(b[4:]))
	if !finite(x) || !finite(z) {
		return 0, 0, fmt.Errorf("%w: teleport to (%g, %g)", ErrMalformed, x, z)
	}
	return x, z, nil
}

func finite(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

// outBudget is one player's event bytes sent in one tick: 8 bytes, a
// map slot of 16 (24 with a uint64 tick and an int count, ≈ 58 B a
// player in the zone actors' budget map at 1,000 players; every player
// sent an event keeps an entry while here). The tick's low 32 bits tell
// this tick's entry from an older one (one 2³² ticks older, 6.8 years at
// 20 Hz, would only start a tick with part of its budget spent); the
// count never exceeds maxOut, at most MaxUint32 (TestOutBudgetSize).
type outBudget struct {
	tick  uint32
	bytes uint32
}

// budgetWindow is the window, in ticks (about three seconds at 20 Hz),
// whose peak newBudgetTick sizes the budget map's room by.
const budgetWindow = 64

// minBudgetRoom is the room (players) below which the budget map is
// never made anew: a map that small costs less than making it.
const minBudgetRoom = 64

// newBudgetTick starts the tick's event budgets (after the zone's Step):
// an entry of an earlier tick is spent nowhere (sendEvent and spent start
// it over), so the map holds only the players sent an event this tick —
// ≈ 25 of a zone's 500 at cmd/capacity's echo a second — where it kept
// one entry for every player sent an event while here (≈ 43 B a player
// at 2,000). A map never gives its room back when emptied, so one made
// for a burst (a late tick's backlog of events, every player's at once)
// is made anew, as small as the use, once a window's peak has used a
// quarter of it or less.
func (a *zoneActor) newBudgetTick() {
	n := len(a.budget)
	a.budgetRoom, a.budgetPeak = max(a.budgetRoom, n), max(a.budgetPeak, n)
	if a.budgetTicks++; a.budgetTicks >= budgetWindow {
		if a.budgetRoom > minBudgetRoom && a.budgetPeak <= a.budgetRoom/4 {
			a.budget = make(map[uint64]outBudget, 2*a.budgetPeak)
			a.budgetRoom, n = a.budgetPeak, 0
		}
		a.budgetPeak, a.budgetTicks = 0, 0
	}
	if n > 0 {
		clear(a.budget)
	}
}

// pendingOut is an Output being filled for one player while an Input is
// handled.
type pendingOut struct {
	conn *actor.PID
	o    *msg.Output
}

// handleEvents runs the game's handler over an Input's events. It must run
// before the Input is released (the payloads alias it); what the handler
// sends is queued in a.outs.
//
// A numbered ordered event the player's fence already covers was applied
// before (a client resending after a Redirect, a connection after a
// restore): it is dropped and counted (Metrics.EventsDuplicate).
//
// No event of a player this zone does not own is applied here, whatever
// its class: applied, it would act on a player the zone does not
// simulate, outside its owner (and a numbered one outside its fence).
// Those of a player it handed away went on to the owner before this
// (eventsAway, every class: the owner applies them in their order among
// the player's others). What is left is dropped, counted by where the
// player is (notOwned):
//   - reserved but not owned yet: the zone holds such a player's inputs
//     for the Commit (holdEarly); one that gets here all the same is
//     dropped, never applied before the Commit brings the player's fence
//     (sim.Zone.TakeEvent), counted apart (Metrics.EventsEarlyDropped);
//   - neither owned nor known where it went (never here, a neighbour's
//     replica, its forwarding record forgotten): nobody's fence would
//     cover it here (Metrics.EventsAwayDropped). A numbered one its
//     client resends on its next connection; an unnumbered or unordered
//     one is lost, as its class allows (no client keeps those for its
//     next connection: only ordered events are numbered, §7.20).
//
// Numbered ordered events are fenced one by one (TakeEvent tells an
// event it refuses); the others ask whether the zone owns the player
// once an Input, at the first of them (sim.Zone.OwnsEvents).
func (a *zoneActor) handleEvents(in *msg.Input) {
	owned := 0 // the others': 0 not asked yet, 1 owned, -1 not
	for i := range in.Events {
		e := &in.Events[i]
		if e.Class == event.Ordered && e.Seq != 0 {
			if !a.z.TakeEvent(in.Player, in.EventGen, int(e.Lane), e.Seq) {
				if a.z.OwnsEvents(in.Player) {
					a.m.EventsDuplicate.Add(1)
				} else {
					a.notOwned(in.Player)
				}
				continue
			}
		} else {
			if owned == 0 {
				owned = -1
				if a.z.OwnsEvents(in.Player) {
					owned = 1
				}
			}
			if owned < 0 {
				a.notOwned(in.Player)
				continue
			}
		}
		a.events.HandleEvent(&a.ectx, in.Player, e)
	}
}

// notOwned counts an event of player, which this zone does not own,
// dropped (handleEvents).
func (a *zoneActor) notOwned(player uint64) {
	if _, reserved := a.z.Handoffs().Reserved(player); reserved {
		a.m.EventsEarlyDropped.Add(1) // holdEarly missed it: never applied early
		return
	}
	a.m.EventsAwayDropped.Add(1)
}

// eventsAway passes in, an Input of a player this zone does not own, on
// to the zone it handed the player to (committing or forwarding), and
// reports whether it did: its events are the owner's to fence and apply,
// exactly once (sim.Zone.TakeEvent). They are the older connection's,
// still sent here before its Route came. Its moves went on already in a
// Forward (sim.Zone.InputBatch): they are taken off, and the Forward is
// sent first, so that the owner queues the moves before it handles the
// events, as it would the Input whole. The Input goes wrapped at
// zonePriority too (passInputOn), to a zone of this process or to a proxy,
// which marks it passed_on so that the receiving node's bridge hands it on
// the same way: a later input's Forward cannot overtake its events at the
// owner. Along a chain
// of handoffs each zone passes it on in turn; a zone that has forgotten
// the player drops the events, counted (handleEvents).
func (a *zoneActor) eventsAway(in *msg.Input) bool {
	ph, _, peer := a.z.Handoffs().Status(in.Player)
	if ph != handoff.PhaseCommitting && ph != handoff.PhaseForwarding {
		return false
	}
	a.flushPending() // the Forward of its moves ahead of it
	in.Moves, in.LostBefore = in.Moves[:0], 0
	a.passInputOn(peer, in)
	a.m.Forwarded.Add(1)
	return true
}

// spent is what player's event budget has spent this tick.
func (a *zoneActor) spent(player uint64) int {
	if b := a.budget[player]; b.tick == uint32(a.z.Tick()) {
		return int(b.bytes)
	}
	return 0
}

func (a *zoneActor) sendEvent(player uint64, class event.Class, lane uint8, key uint16, payload []byte) bool {
	j := a.joins[player]
	if j == nil || j.Conn == nil {
		a.m.EventsOutDropped.Add(1)
		return false
	}
	tick := uint32(a.z.Tick())
	b := a.budget[player]
	if b.tick != tick {
		b = outBudget{tick: tick}
	}
	cost := max(len(payload), 1)
	if int(b.bytes)+cost > a.maxOut {
		a.m.EventsOutDropped.Add(1)
		return false
	}
	b.bytes += uint32(cost) // ≤ maxOut ≤ MaxUint32
	a.budget[player] = b
	// Nobody awaits a redirected connection but for a second after a
	// handoff's Redirect: the map is empty and not looked into (a call
	// and ≈ 20 instructions an event).
	if len(a.awaiting) > 0 {
		if _, ok := a.awaiting[player]; ok {
			return a.holdEvent(player, class, lane, key, payload)
		}
	}
	var o *msg.Output
	for i := range a.outs {
		if a.outs[i].o.Player == player {
			o = a.outs[i].o
			break
		}
	}
	if o == nil {
		o = msg.NewOutput()
		o.Player = player
		_, ep, _ := a.z.Handoffs().Status(player)
		o.Epoch = uint64(ep)
		a.outs = append(a.outs, pendingOut{conn: j.Conn, o: o})
	}
	o.Add(class, lane, key, payload)
	a.m.EventsOut.Add(1)
	return true
}

// flushOutputs sends the Outputs the handler filled; the connections
// release them.
func (a *zoneActor) flushOutputs() {
	for i := range a.outs {
		o := a.outs[i].o
		// The events these answer are applied: reported with them
		// (msg.Output.Applied).
		o.Applied, _ = a.z.EventFence(o.Player)
		a.ctx.Send(a.outs[i].conn, o)
		a.outs[i] = pendingOut{}
	}
	a.outs = a.outs[:0]
}

// maxHeldBytes bounds the events held for one player whose client follows
// a Redirect: seconds of chat-rate events; beyond it they are dropped and
// counted (EventsOutDropped).
const maxHeldBytes = 64 << 10

// holdEvent keeps an event for a player whose connection is redirecting
// its client (it told the zone with its Leave, ReasonRedirected, before it
// sent the Redirect): the old connection would never deliver it, so it
// goes to the new connection when that joins (flushHeld), ahead of
// anything newer. Events the old connection took before are delivered by
// it: it redirects only once they arrived.
func (a *zoneActor) holdEvent(player uint64, class event.Class, lane uint8, key uint16, payload []byte) bool {
	o := a.held[player]
	if o == nil {
		o = msg.NewOutput()
		o.Player = player
		a.held[player] = o
	}
	if o.Bytes()+len(payload) > maxHeldBytes {
		a.m.EventsOutDropped.Add(1)
		return false
	}
	o.Add(class, lane, key, payload)
	a.m.EventsOut.Add(1)
	return true
}

// confirmHold answers the Leave(Redirected) of a player's connection with
// an empty Output: from here on the zone holds the player's events, and
// the answer reaches the connection after every Output sent to it before
// (one sender, one route: the mailbox, or a link's ordered stream), so the
// connection knows when nothing more will come for its client and
// redirects it (actors/conn onRedirect).
func (a *zoneActor) confirmHold(player uint64) {
	j := a.joins[player]
	if j == nil || j.Conn == nil {
		return
	}
	o := msg.NewOutput()
	o.Player = player
	_, ep, _ := a.z.Handoffs().Status(player)
	o.Epoch = uint64(ep)
	a.ctx.Send(j.Conn, o)
}

// flushHeld sends the events held for a player to its new connection.
func (a *zoneActor) flushHeld(j *msg.Join) {
	o := a.held[j.Player]
	if o == nil {
		return
	}
	delete(a.held, j.Player)
	if j.Conn == nil {
		o.Release()
		return
	}
	_, ep, _ := a.z.Handoffs().Status(j.Player)
	o.Epoch = uint64(ep)
	a.ctx.Send(j.Conn, o)
}

func (a *zoneActor) dropHeld(id uint64) {
	if o := a.held[id]; o != nil {
		delete(a.held, id)
		o.Release()
	}
}
