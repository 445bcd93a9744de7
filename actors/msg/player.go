package msg

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/prefetch"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// Join tells a zone that a player's connection is up (conn → zone). The zone
// answers with Control messages to Conn and publishes views into Views,
// nudging Ghosts with ViewReady. Sent once per connection (and again to the
// new zone's side by whoever runs a handoff).
type Join struct {
	Player uint64
	Conn   *actor.PID // the connection: Control, Output, Redirect, Kick go here
	Ghosts *actor.PID // ViewReady goes here (the connection: its ghost manager lives in it)
	Views  *ViewSlot  // where the zone publishes this player's views
	// ViewWithControl: Ghosts is Conn, and it takes the view with the
	// tick's Control (Control.View) — one message per player per tick
	// instead of a Control and a ViewReady. A zone then publishes a tick's
	// views before its controls and sends ViewReady only for a view that
	// goes with no Control. Takers that do not set it (a cluster link)
	// get a ViewReady for every nudge.
	ViewWithControl bool
	// Port, when its Queue is set, is Conn as its shard knows it: the
	// zone posts its tick's Controls there in a batch a connection shard
	// (ControlBatch), not a Send each. Everything else still goes to
	// Conn. Unset (a cluster link's Join): each Control is sent to Conn.
	Port ControlPort
	// LastApplied is the newest move already applied for this player (0 on a
	// fresh connection): a zone taking over continues after it.
	LastApplied uint64
	// UserData is the opaque user data of the player's connect token. The
	// message owns it (a copy); the zone may keep it.
	UserData []byte
	// Restore, when set, is the player's last checkpoint (from its record):
	// the zone puts the player back as it was instead of at a spawn point.
	Restore *handoff.Checkpoint
	// EventGen is the connection's event generation (Input.EventGen; 0:
	// not known yet, or a cluster link's from a node before
	// PlayerJoin.event_gen): while two logins of the player are both
	// joined, the zone tells their inputs apart by it.
	EventGen uint64
}

// Rejoin asks a connection to join its player again to its zone, restored
// from Restore (cluster → conn): the zone's node died and another node
// took the zone over without the player in it. The connection sends a
// Join with Restore and its own newest applied move as the fence.
type Rejoin struct {
	Player  uint64
	Restore *handoff.Checkpoint
}

// Leave tells a zone that a player's connection ended (conn → zone): the
// player quit, timed out, or was kicked. Nothing more arrives from Conn.
type Leave struct {
	Player uint64
	Conn   *actor.PID
	Reason handshake.Reason
}

// Redirect moves a player to another zone (zone → conn, after a handoff
// committed): from now on the connection sends its Input to Zone. The views
// keep arriving through the same ViewSlot, published by the new owner.
type Redirect struct {
	Player uint64
	Zone   *actor.PID
	// Epoch is the handoff's fencing epoch: a Redirect with an epoch not above
	// the connection's current one is stale and ignored.
	Epoch uint64
	// ConnTag is ConnTag of Control, for a Redirect.
	ConnTag uint32
}

// Kick removes a player (zone → conn): the connection sends Disconnect with
// Reason (ReasonKicked unless the zone says otherwise) and closes.
type Kick struct {
	Player uint64
	Reason handshake.Reason
	// ConnTag is ConnTag of Control, for a Kick.
	ConnTag uint32
}

// Input is a player's input since the previous Input (conn → zone): the new
// moves, each exactly once and in sequence order (replication/move's Applier
// drops the redundant copies), and the events the client sent, in delivery
// order (ordered lanes in order). Pooled: get one with NewInput; the zone
// calls Release when done with it.
type Input struct {
	Player uint64
	// Moves in sequence order, without gaps unless the client dropped moves
	// (move.ApplierStats.Lost). The zone applies each exactly once and reports
	// the newest applied in Control; the connection itself compares the
	// client's CRCs (HasCRC moves) with the state the zone reports.
	Moves []move.Move
	// LostBefore counts the moves right before Moves[0] that the client
	// lost (they never reached the connection), as do the gaps between
	// consecutive Moves: the zone skips those at once instead of waiting
	// for them (handoff.MoveQueue.PushBatch). 0 when nothing is known lost.
	LostBefore uint64
	EventList
	// EventGen is the generation of the events' numbering (Event.Seq;
	// session.Server.EventGen): the zone fences numbered events per
	// player and lane (sim.Zone.TakeEvent). 0: not numbered.
	EventGen uint64
	// Received is when the connection decoded the newest of these (node
	// monotonic clock), for lag compensation and metrics.
	Received time.Duration

	// While released: the next Input of the returns stack and how many
	// are on it from this one down (inputReturns).
	next  *Input
	depth atomic.Int32
}

var inputPool = sync.Pool{New: func() any { return new(Input) }}

// inputReturns takes released Inputs back to the connection shards that
// make them (InputCache). A shard gets an Input for each datagram with
// new moves and a zone releases it on another processor: through the
// sync.Pool, each Get found the shard's per-P queue empty and took from
// the zone's (≈ 0.8 % of a loaded server's CPU, and the Put's pushHead
// ≈ 0.4 %). Here a release pushes onto one lock-free stack (a CAS) and a
// shard out of Inputs takes the whole stack at once (a swap) into its
// cache: pop-all, so no ABA. Bounded: a release onto a stack of
// maxReturned goes to the pool instead (a depth read before a swap and a
// reuse can undercount it, by at most maxReturned: the stack stays under
// twice the bound); what a shard took stays its own until used.
var inputReturns atomic.Pointer[Input]

// maxReturned bounds the returns stack: 128 KB of Inputs, with their
// moves' room (pooledMoves, 96 bytes each) 224 KB. It is sized for a
// zone's tick, not a shard's round: a zone releases a tick's Inputs at
// once (≈ 750 of them with 500 players at 30 Hz over 20 Hz ticks), and
// with 128 the rest went through the sync.Pool (its Put and Get ≈ 0.9 %
// of a node's CPU at 2,000 players, and what the pool held the GC
// dropped). A backlog's releases beyond it still go to the pool.
const maxReturned = 1024

// maxRoomReturned bounds roomReturns: an Input with event room holds up
// to 640 bytes (pooledEvents, pooledArena), and ≈ one a player-second
// carries events, so the rooms a tick releases are few; 128 of them,
// 80 KB at most.
const maxRoomReturned = 128

// roomReturns is inputReturns for the released Inputs that keep event
// room (pooledEvents, pooledArena): a shard takes their room for an Input
// that gets events (InputCache.Room). Nearly every Input carries moves
// only (30 a player-second against ≈ one event): pooled with the rest,
// the room of an Input that once carried events circulated with it until
// every Input had some, ≈ 100 B a player at 2,000 players never used.
// Here the room stays with the few Inputs that carry events. Bounded as
// inputReturns, and by its own maxRoomReturned.
var roomReturns atomic.Pointer[Input]

// InputCache is one goroutine's — a connection shard's — Inputs, taken
// from the returns stacks whole: free those without event room, rooms
// those with. The zero InputCache is ready. Not safe for concurrent use.
type InputCache struct {
	free  *Input
	rooms *Input
}

// Room gives in, about to get events, the event room of an Input released
// with some, if in has none: the cache's, or the room stack's (none: the
// events' Add makes it). The Input whose room in took joins the cache's
// Inputs. Call it before the first event an Input gets.
func (c *InputCache) Room(in *Input) {
	if cap(in.Events) != 0 || cap(in.arena) != 0 {
		return
	}
	r := c.rooms
	if r == nil {
		if r = roomReturns.Swap(nil); r == nil {
			return
		}
	}
	c.rooms = r.next
	in.Events, in.arena, r.Events, r.arena = r.Events, r.arena, nil, nil
	r.next, c.free = c.free, r
}

// Get returns an empty Input: the cache's, the returns stack's, or the
// pool's. Release it as any other.
func (c *InputCache) Get() *Input {
	in := c.free
	if in == nil {
		if in = inputReturns.Swap(nil); in == nil {
			return NewInput()
		}
	}
	c.free, in.next = in.next, nil
	c.prefetchNext()
	return in
}

// prefetchNext asks the CPU for what the next Gets return, a Get ahead:
// the next Input's room for moves (its line came with the Get before)
// and the Input after it. A released Input has been through a zone's
// hands and a connection's datagram fills the one it gets at once: on a
// loaded node its lines were a trip to memory a datagram (1.4 % of the
// node's samples). The cache's free Inputs are its own, so reading them
// races nothing. A hint: it changes nothing.
func (c *InputCache) prefetchNext() {
	n := c.free
	if n == nil {
		return
	}
	if m := n.Moves; cap(m) > 0 {
		prefetch.Lines(unsafe.Pointer(unsafe.SliceData(m)), min(uintptr(cap(m)), pooledMoves)*unsafe.Sizeof(m[0]))
	}
	if nn := n.next; nn != nil {
		prefetch.Lines(unsafe.Pointer(nn), unsafe.Sizeof(*nn))
	}
}

// pooledMoves is the most room for Moves a released Input keeps (96
// bytes): a datagram's new moves are one to three, a connection's resend
// of moves its zone did not report applied up to 256 (actors/conn), and
// nine or so after a handoff's stall of 300 ms. With room for 16 kept
// (384 bytes), every Input that once carried such a resend circulated
// with its room for good (TestInputMovesRoomFootprint); now the few that
// carry one allocate it.
const pooledMoves = 4

// pooledEvents and pooledArena bound the event room a released Input
// keeps (pooledEvents events, pooledArena bytes of payload): a datagram
// carries an event or two, but one a shard takes from a client whose
// acks came late carries a dozen (its guaranteed events sent again), and
// pooled, an Input kept that room for good (a node behind at 2,000
// players held 1.5 KB a player of event room in its Inputs).
const (
	pooledEvents = 4
	pooledArena  = 256
)

// NewInput returns an empty Input from the pool.
func NewInput() *Input { return inputPool.Get().(*Input) }

// Release returns in to the pool. Neither in nor any slice it handed out
// (Moves, event payloads) may be used afterwards.
func (in *Input) Release() {
	in.Player = 0
	in.Moves = in.Moves[:0]
	if cap(in.Moves) > pooledMoves {
		in.Moves = nil // a resend's or a rejoin's: pooled, it would stay in circulation for good
	}
	in.LostBefore = 0
	in.EventGen = 0
	in.EventList.Reset()
	in.EventList.trim(pooledEvents, pooledArena)
	in.Received = 0
	stack, bound := &inputReturns, int32(maxReturned)
	if cap(in.Events) != 0 || cap(in.arena) != 0 {
		stack, bound = &roomReturns, maxRoomReturned
	}
	for {
		top := stack.Load()
		d := int32(1)
		if top != nil {
			if d = top.depth.Load() + 1; d > bound {
				// To the pool without its event room: NewInput hands
				// pooled Inputs to datagrams of moves, and room kept
				// there would circulate with them for good (roomReturns).
				in.Events, in.arena = nil, nil
				inputPool.Put(in)
				return
			}
		}
		in.next = top
		in.depth.Store(d)
		if stack.CompareAndSwap(top, in) {
			return
		}
	}
}

// Inputs are the inputs a connection shard collected for one zone in one
// round (conn → zone): one message per zone and round instead of one per
// datagram. The zone handles them as if each had come alone, in order: a
// connection's in the order it made them, and each before anything the
// connection sends the zone after it (a shard sends a zone's waiting
// inputs before any other message to it). Pooled: NewInputs; the
// receiver calls Release when done, which releases the Inputs still in
// List (set an entry to nil to keep it).
type Inputs struct {
	List []*Input
}

var inputsPool = sync.Pool{New: func() any { return new(Inputs) }}

// NewInputs returns an empty Inputs from the pool.
func NewInputs() *Inputs { return inputsPool.Get().(*Inputs) }

// Release releases every Input left in b.List and returns b to the pool.
func (b *Inputs) Release() {
	for _, in := range b.List {
		if in != nil {
			in.Release()
		}
	}
	clear(b.List)
	b.List = b.List[:0]
	inputsPool.Put(b)
}

// ReleaseTaken returns b to the pool without releasing its List's Inputs:
// the receiver took every one of them (released or kept each itself). It
// saves the receiver a nil store an Input and Release a second pass over
// List.
func (b *Inputs) ReleaseTaken() {
	clear(b.List)
	b.List = b.List[:0]
	inputsPool.Put(b)
}

// Empty reports whether in carries neither moves nor events.
func (in *Input) Empty() bool { return len(in.Moves) == 0 && len(in.Events) == 0 }

// Control is the authoritative state of the object a player controls, once
// per zone tick (zone → conn). The connection acknowledges LastApplied in its
// next packets, checks the CRC the client sent with that move against State
// (session.Server.SetControl), and lets move.ControlWriter decide when State
// goes out in full. Pooled: NewControl / Release.
type Control struct {
	Player uint64
	// LastApplied is the newest move the zone applied; State reflects it and
	// everything the zone simulated since (a collision, a push).
	LastApplied uint64
	State       move.ControlState
	// Force sends State in full with no CRC round trip (teleport, respawn).
	Force bool
	// View is the nudge of a ViewReady carried by the Control (to a
	// connection that joined with Join.ViewWithControl): the player's
	// ViewSlot holds a view, published before this Control was sent. The
	// connection must take it even when it drops the Control (a stale
	// epoch): the slot sends no other nudge until it is taken. (Beside
	// Force, in one word: after Events it padded a word of its own, 184
	// bytes, the 192-byte size class; now 176.)
	View bool
	// ConnTag names, on a cluster link, the connection of another node
	// the zone sent this to (the tagged PID it holds for it, the PID's
	// RequestId): the link's process sets it as the message passes, so
	// the gateway node delivers it to that connection and not to the
	// player's newest there (two logins). It used to wrap each message
	// instead, 24 bytes a message. Zero elsewhere; a connection ignores
	// it. (Beside Force and View, in the padding before Tick: still 176
	// bytes.)
	ConnTag uint32
	// Tick is the zone tick this state belongs to.
	Tick uint64
	// At is that tick's scheduled time on the node clock. The zones of a
	// node tick on one schedule (multiples of the period), so At tells a
	// connection how many ticks passed between two states even when they
	// came from different zones (a handoff).
	At time.Duration
	// Epoch is the player's handoff epoch at the zone that sent this: a
	// Control from an older epoch (the previous owner's, arriving late over
	// another path) is stale and ignored.
	Epoch uint64
	// Events is the player's ordered-event fence: the connection reports
	// it to the client (of its own numbering generation only), which then
	// forgets those events (docs/protocol.md §7.20).
	Events handoff.EventFence

	// home is the slot that made it (ViewSlot.NewControl): Release gives
	// it back there for the player's next tick.
	home *ViewSlot
}

var controlPool = sync.Pool{New: func() any { return new(Control) }}

// NewControl returns a zeroed Control from the pool.
func NewControl() *Control { return controlPool.Get().(*Control) }

// Release returns c to the pool (or to its slot, ViewSlot.NewControl); c
// may not be used afterwards.
func (c *Control) Release() {
	h := c.home
	*c = Control{}
	if h != nil && !h.closed.Load() {
		c.home = h
		if h.ctl.CompareAndSwap(nil, c) {
			return
		}
		c.home = nil
	}
	controlPool.Put(c)
}

// Output carries events from a zone to its player's client (zone → conn).
// Guaranteed events the connection cannot queue (its event sender is full)
// are dropped and counted there. One without events is the zone's answer to
// the connection's Leave(Redirected): it holds the player's events from
// then on (actors/conn onRedirect). Pooled: NewOutput / Release.
type Output struct {
	Player uint64
	// Epoch is the player's handoff epoch at the zone that sent them (0:
	// unknown). After its zone was restored elsewhere, a connection drops
	// the Outputs of the old owner (a paused node that woke up), which
	// carry an epoch at or below the restored checkpoint's.
	Epoch uint64
	// ConnTag is ConnTag of Control, for an Output.
	ConnTag uint32
	// Applied is the player's ordered-event fence as the zone sent these
	// events (Gen 0: none): the connection reports it to the client with
	// them. Left to the tick's Control, an echo of an event the zone
	// applied between two ticks went out a tick before the client heard
	// the event applied, and a node stopped in between (SIGSTOP, a crash)
	// left the client to send it again to the zone's next owner, which
	// applied it a second time from its older checkpoint.
	Applied handoff.EventFence
	EventList
}

var outputPool = sync.Pool{New: func() any { return new(Output) }}

// NewOutput returns an empty Output from the pool.
func NewOutput() *Output { return outputPool.Get().(*Output) }

// Release returns o to the pool; neither o nor its payloads may be used afterwards.
func (o *Output) Release() {
	o.Player, o.Epoch, o.ConnTag, o.Applied = 0, 0, 0, handoff.EventFence{}
	o.EventList.Reset()
	outputPool.Put(o)
}
