package handoff

import (
	"errors"
	"fmt"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
)

// Errors returned by Begin and Spawn.
var (
	ErrConfig     = errors.New("handoff: invalid config")
	ErrNotOwner   = errors.New("handoff: entity not owned here")
	ErrInProgress = errors.New("handoff: entity already being handed off")
	ErrSelf       = errors.New("handoff: target is this zone")
	ErrExists     = errors.New("handoff: entity already known here")
	// ErrHandedOn: SpawnAbove of a checkpoint older than a handoff this
	// zone committed of the entity (and still remembers).
	ErrHandedOn = errors.New("handoff: entity handed on since that checkpoint")
)

// Config tunes timers and bounds. The zero Config means DefaultConfig.
type Config struct {
	// RetryInterval: resend an unanswered Offer or Commit this often.
	// Default 50 ms.
	RetryInterval time.Duration
	// OfferTimeout: abort an offer nobody answered. Default 500 ms.
	OfferTimeout time.Duration
	// CommitGiveUp: stop resending an unacknowledged Commit. Default 5 s.
	CommitGiveUp time.Duration
	// MaxAge: drop messages sent longer ago than this. Default 5 s.
	MaxAge time.Duration
	// ForwardTTL: keep forwarding moves (and remembering the epoch) of a
	// handed-off entity this long; ≥ CommitGiveUp + MaxAge. Default 15 s.
	ForwardTTL time.Duration
	// MaxBuffered bounds the moves buffered per entity while its offer is
	// open, and those stashed per entity for a Commit not yet seen. Default
	// 512 (17 s of 30 Hz input).
	MaxBuffered int
	// MaxPending bounds the offers a zone has accepted and not yet seen
	// committed or aborted. Default 4096.
	MaxPending int
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		RetryInterval: 50 * time.Millisecond,
		OfferTimeout:  500 * time.Millisecond,
		CommitGiveUp:  5 * time.Second,
		MaxAge:        5 * time.Second,
		ForwardTTL:    15 * time.Second,
		MaxBuffered:   512,
		MaxPending:    4096,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	set := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	set(&c.RetryInterval, d.RetryInterval)
	set(&c.OfferTimeout, d.OfferTimeout)
	set(&c.CommitGiveUp, d.CommitGiveUp)
	set(&c.MaxAge, d.MaxAge)
	if c.ForwardTTL == 0 {
		c.ForwardTTL = max(d.ForwardTTL, c.CommitGiveUp+c.MaxAge)
	}
	if c.MaxBuffered == 0 {
		c.MaxBuffered = d.MaxBuffered
	}
	if c.MaxPending == 0 {
		c.MaxPending = d.MaxPending
	}
	return c
}

// Validate reports the first unusable field (zero fields: defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.RetryInterval < 0 || c.OfferTimeout < 0 || c.CommitGiveUp < 0 || c.MaxAge < 0 || c.ForwardTTL < 0:
		return fmt.Errorf("%w: negative duration", ErrConfig)
	case c.OfferTimeout < c.RetryInterval:
		return fmt.Errorf("%w: OfferTimeout %v shorter than RetryInterval %v", ErrConfig, c.OfferTimeout, c.RetryInterval)
	case c.ForwardTTL < c.CommitGiveUp+c.MaxAge:
		// A zone must remember a handed-off epoch for as long as any
		// message about it can still arrive: the source may resend Commit
		// for CommitGiveUp, and each copy may take up to MaxAge.
		return fmt.Errorf("%w: ForwardTTL %v < CommitGiveUp %v + MaxAge %v", ErrConfig, c.ForwardTTL, c.CommitGiveUp, c.MaxAge)
	case c.MaxBuffered < 1 || c.MaxPending < 1:
		return fmt.Errorf("%w: MaxBuffered and MaxPending must be positive", ErrConfig)
	}
	return nil
}

// Phase is where an entity stands in one zone's machine.
//
//	owned ──Begin──▶ offering ──Accept──▶ committing ──CommitAck──▶ forwarding ──ForwardTTL──▶ (forgotten)
//	  ▲                │ Reject / OfferTimeout             │ CommitGiveUp ─▶ forwarding
//	  └────────────────┘
//	(unknown, committing or forwarding at an older epoch) ──Commit──▶ owned
//
// Beside its phase a zone may hold a reservation for an entity (it
// accepted an offer and waits for the Commit); Reserved reports it.
type Phase uint8

// Phases.
const (
	PhaseUnknown    Phase = iota
	PhaseOwned            // this zone owns and simulates the entity
	PhaseOffering         // still the owner, frozen: offered to Peer, moves buffered
	PhaseCommitting       // handed to Peer; resending Commit until acknowledged
	PhaseForwarding       // handed to Peer; forwarding stray moves
)

var phaseNames = [...]string{"unknown", "owned", "offering", "committing", "forwarding"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", p)
}

// Owner reports whether a zone in phase p owns the entity.
func (p Phase) Owner() bool { return p == PhaseOwned || p == PhaseOffering }

// Acquired is an entity this zone now owns: create it from State at Epoch
// and apply Moves (already in sequence order; the MoveQueue drops any it
// has seen) after State.LastApplied.
type Acquired struct {
	State *Snapshot
	Epoch Epoch
	From  string
	Moves []move.Move
}

// Released is an entity this zone no longer owns (it was committed to To):
// stop simulating it (keep showing it as a border replica until the new
// owner's replicas arrive).
type Released struct {
	Entity uint64
	To     string
}

// Resumed is an entity whose offer failed: it is owned here again, unfreeze
// it and apply Moves (buffered while frozen).
type Resumed struct {
	Entity uint64
	Moves  []move.Move
	Reason Reason // ReasonNone: the offer timed out
}

// Deliver is moves for an entity this zone owns that arrived by forwarding:
// queue them like moves from the connection.
type Deliver struct {
	Entity uint64
	Moves  []move.Move
}

// Output collects what one call asks the zone to do. Reuse it: the
// machine appends, the caller acts and then calls Reset.
type Output struct {
	Send     []Msg
	Acquired []Acquired
	Released []Released
	Resumed  []Resumed
	Deliver  []Deliver
}

// Reset empties o, keeping capacity.
func (o *Output) Reset() {
	clear(o.Send)
	clear(o.Acquired)
	clear(o.Resumed)
	clear(o.Deliver)
	o.Send, o.Acquired, o.Released, o.Resumed, o.Deliver = o.Send[:0], o.Acquired[:0], o.Released[:0], o.Resumed[:0], o.Deliver[:0]
}

// Empty reports whether o asks for nothing.
func (o *Output) Empty() bool {
	return len(o.Send)+len(o.Acquired)+len(o.Released)+len(o.Resumed)+len(o.Deliver) == 0
}

// Stats counts what a machine did.
type Stats struct {
	Begun, Offered, Accepted, Rejected, Committed, Acquired, Aborted uint64
	Retries                                                          uint64 // Offer and Commit resends
	Forwarded                                                        uint64 // moves forwarded to a new owner
	Delivered                                                        uint64 // forwarded moves received for an owned entity
	Stashed                                                          uint64 // forwarded moves held for a Commit not yet seen
	StashExpired                                                     uint64 // stashed moves dropped: their Commit never came
	BufferOverflow                                                   uint64 // moves dropped: buffer or stash full
	UnknownInput                                                     uint64 // moves for an entity this zone knows nothing about
	Stale                                                            uint64 // messages about an older epoch, or older than MaxAge
	Misrouted                                                        uint64 // messages addressed to another zone
	Duplicates                                                       uint64 // repeated Offer/Accept/Commit/CommitAck, answered idempotently
	Stranded                                                         uint64 // Commits never acknowledged within CommitGiveUp
	RoutesSent                                                       uint64
	ForwardsForgotten                                                uint64 // forwarding records expired
}

// 48 bytes, the 48-byte size class (56 and the 64-byte class while it
// carried its phase, now its handoff's: an owned entry has none; 88, and
// a map entry for the connection, while every entry carried a handoff's
// state; TestEntrySize): nearly every entity is owned, and what a handoff
// needs is made when one begins (away). One entry an entity, players and
// NPCs: 16 bytes each.
type entry struct {
	epoch Epoch // owned/offering/committing: the owner's epoch e; forwarding: e+1 at Peer
	since time.Duration
	route time.Duration // owned: last Route sent
	conn  string        // owned or offering players: the connection's address, for Route (SetConn)
	away  *away         // offering, committing, forwarding: the handoff (nil while owned)
}

// phase is e's phase: owned without a handoff, else the handoff's.
func (e *entry) phase() Phase {
	if e.away == nil {
		return PhaseOwned
	}
	return e.away.phase
}

// away is an entry's handoff: the peer zone, the last resend, the
// snapshot offered and the moves that go with it.
type away struct {
	phase Phase // offering, committing or forwarding
	// stranded: forwarding after CommitGiveUp, until a late CommitAck: the
	// new owner may still take the entity (its node's record write, not a
	// crash, outlasted the resends), so the handoff is still in flight.
	stranded bool
	peer     string
	lastSend time.Duration
	snap     *Snapshot
	moves    []move.Move // offering: buffered input; committing: what Commit carries
	// events is the entity's event fence as its owner took events while
	// the offer was open (fenced; TookEvents): the Commit carries it, not
	// the fence in snap, taken at Begin.
	events EventFence
	fenced bool
}

// peer is the zone e's entity is handed to ("" while owned).
func (e *entry) peer() string {
	if e.away == nil {
		return ""
	}
	return e.away.peer
}

// reservation is an accepted offer: the target's promise to take the
// entity if the Commit comes. It lives beside whatever else the zone knows
// about the entity (a forwarding record, typically, when it comes back).
type reservation struct {
	epoch Epoch
	from  string
	since time.Duration
}

type stashed struct {
	epoch Epoch
	at    time.Duration
	moves []move.Move
}

// Machine is one zone's side of every handoff. Create it with New.
type Machine struct {
	zone string
	cfg  Config
	ents map[uint64]*entry
	// timed: the entries in ents that are not owned (offering,
	// committing, forwarding), the only ones Tick's timers and InFlight
	// look at. Nearly every entry is owned, and Tick ran through all of
	// them every tick (≈ 190 instructions an entity, 2 % of a zone's
	// tick). Kept by put, retime and drop.
	timed  map[uint64]*entry
	stash  map[uint64]*stashed
	res    map[uint64]*reservation
	accept bool
	stats  Stats
}

// New returns the machine of zone (its id, as in the world map).
func New(zone string, cfg Config) (*Machine, error) {
	if zone == "" {
		return nil, fmt.Errorf("%w: empty zone id", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Machine{zone: zone, cfg: cfg.withDefaults(), ents: map[uint64]*entry{}, timed: map[uint64]*entry{}, stash: map[uint64]*stashed{}, res: map[uint64]*reservation{}, accept: true}, nil
}

// Zone returns the zone id.
func (m *Machine) Zone() string { return m.zone }

// Config returns the effective config.
func (m *Machine) Config() Config { return m.cfg }

// Stats returns the counters.
func (m *Machine) Stats() Stats { return m.stats }

// SetAccepting makes the zone accept (true, the default) or reject offers
// (draining, overloaded).
func (m *Machine) SetAccepting(ok bool) { m.accept = ok }

// Spawn records a new entity owned here at epoch 1 (a player joining, an
// NPC created). ErrExists if the machine knows it in any phase.
func (m *Machine) Spawn(entity uint64, now time.Duration) (Epoch, error) {
	if e, ok := m.ents[entity]; ok && e.phase() != PhaseForwarding {
		return 0, fmt.Errorf("%w: entity %d is %s", ErrExists, entity, e.phase())
	}
	var epoch Epoch = 1
	if e, ok := m.ents[entity]; ok {
		epoch = e.epoch + 1 // back here after leaving: stay above the forwarded epoch
	}
	m.put(entity, &entry{epoch: epoch, since: now})
	return epoch, nil
}

// put makes e the entry of entity.
func (m *Machine) put(entity uint64, e *entry) {
	m.ents[entity] = e
	m.retime(entity, e)
}

// retime files entity's entry e in timed by its phase: call it after every
// change of an entry's phase.
func (m *Machine) retime(entity uint64, e *entry) {
	if e.phase() == PhaseOwned {
		delete(m.timed, entity)
	} else {
		m.timed[entity] = e
	}
}

// drop forgets entity's entry.
func (m *Machine) drop(entity uint64) {
	delete(m.ents, entity)
	delete(m.timed, entity)
}

// SpawnAbove is Spawn for an entity put back from a checkpoint taken at
// epoch above: its new epoch is above that one, so whoever saw the old
// epoch (a connection, a player record) takes this owner as the newer.
//
// A checkpoint older than a handoff this zone committed of the entity is
// refused while the zone remembers that handoff (ErrHandedOn): the record
// it came from was read before the new owner's write landed (a connection
// that looked its record up while a slow Commit left its zone silent), and
// the entity lives on at the new owner. Put back here, above that owner's
// epoch, it had two owners, and its connection, following the higher
// epoch, dropped the true owner's controls for good. That holds after
// CommitGiveUp too: under load the new owner's record write, not a crashed
// node, is what outlasts it (the Commit lands later); a target that did
// crash leaves the entity to a restore here once the forwarding record
// expires (ForwardTTL), which the record's compare-and-set then fences.
func (m *Machine) SpawnAbove(entity uint64, now time.Duration, above Epoch) (Epoch, error) {
	if e, ok := m.ents[entity]; ok && e.phase() == PhaseForwarding && e.epoch > above {
		return 0, fmt.Errorf("%w: entity %d went to %s at epoch %d, checkpoint of epoch %d", ErrHandedOn, entity, e.away.peer, e.epoch, above)
	}
	epoch, err := m.Spawn(entity, now)
	if err != nil {
		return 0, err
	}
	if epoch <= above {
		epoch = above + 1
		m.ents[entity].epoch = epoch
	}
	return epoch, nil
}

// SetConn records the connection address of an owned player (Spawn it
// first: an entity this zone does not own is ignored), so Route messages
// can be repeated to it (acquired entities get it from their snapshot).
func (m *Machine) SetConn(entity uint64, conn string) {
	if e, ok := m.ents[entity]; ok && e.phase().Owner() {
		e.conn = conn
	}
}

// Conn returns the connection address recorded for entity (SetConn, or
// the snapshot of the Commit that brought it), "" if none or unknown. It
// is the zone's one copy of it (sim.Zone reads it here).
func (m *Machine) Conn(entity uint64) string {
	if e := m.ents[entity]; e != nil {
		return e.conn
	}
	return ""
}

// Despawn forgets an owned entity (a player leaving, an NPC removed).
// Entities mid-handoff cannot be despawned (ErrInProgress).
func (m *Machine) Despawn(entity uint64) error {
	e, ok := m.ents[entity]
	switch {
	case !ok || !e.phase().Owner():
		return fmt.Errorf("%w: entity %d", ErrNotOwner, entity)
	case e.phase() != PhaseOwned:
		return fmt.Errorf("%w: entity %d", ErrInProgress, entity)
	}
	m.drop(entity)
	return nil
}

// Status returns the entity's phase here, its epoch and the peer zone.
func (m *Machine) Status(entity uint64) (Phase, Epoch, string) {
	e, ok := m.ents[entity]
	if !ok {
		return PhaseUnknown, 0, ""
	}
	return e.phase(), e.epoch, e.peer()
}

// Owns reports whether this zone owns entity (owned or offering).
func (m *Machine) Owns(entity uint64) bool {
	e, ok := m.ents[entity]
	return ok && e.phase().Owner()
}

// Len returns how many entities the machine tracks in any phase.
func (m *Machine) Len() int { return len(m.ents) }

// InFlight counts the entities this zone is handing away and whose new
// owner may not own them yet: offered (not yet committed or aborted) or
// committed and not yet acknowledged — given up on (CommitGiveUp) too,
// until a late CommitAck or the forwarding record's expiry: the new owner
// may take such an entity seconds later. While it is not zero, another
// zone's view of those entities may still change without this zone's
// changing.
func (m *Machine) InFlight() int {
	n := 0
	for _, e := range m.timed {
		if ph := e.phase(); ph == PhaseOffering || ph == PhaseCommitting || ph == PhaseForwarding && e.away.stranded {
			n++
		}
	}
	return n
}

func (m *Machine) msg(kind Kind, entity uint64, epoch Epoch, to string, now time.Duration) Msg {
	return Msg{Kind: kind, Entity: entity, Epoch: epoch, From: m.zone, To: to, Sent: now}
}

// Begin offers an owned entity to zone to. snap is its state right now
// (after move snap.LastApplied); queued lists moves the zone has received
// but not applied (its MoveQueue's Queued: held back by a gap, say), which
// travel with the entity. The entity is frozen from here on: stop
// simulating it, and pass its moves to Input, which buffers them. The
// returned Offer is also what Tick resends.
func (m *Machine) Begin(now time.Duration, snap *Snapshot, to string, queued []move.Move) (Msg, error) {
	e, ok := m.ents[snap.Entity]
	switch {
	case to == m.zone:
		return Msg{}, ErrSelf
	case !ok || !e.phase().Owner():
		return Msg{}, fmt.Errorf("%w: entity %d", ErrNotOwner, snap.Entity)
	case e.phase() != PhaseOwned:
		return Msg{}, fmt.Errorf("%w: entity %d to %s", ErrInProgress, snap.Entity, e.peer())
	}
	e.since = now
	e.away = &away{phase: PhaseOffering, peer: to, lastSend: now, snap: snap.clone(), moves: append([]move.Move(nil), queued...)}
	m.retime(snap.Entity, e)
	m.stats.Begun++
	m.stats.Offered++
	o := m.msg(KindOffer, snap.Entity, e.epoch, to, now)
	o.State = e.away.snap
	return o, nil
}

// TookEvents records the event fence f of an entity whose offer is open:
// frozen, it is still this zone's, which takes its events, so the Commit
// must carry f rather than the fence of the snapshot taken at Begin (the
// new owner would otherwise take those events again when the client
// resends them). Anything else is ignored.
func (m *Machine) TookEvents(entity uint64, f EventFence) {
	if e, ok := m.ents[entity]; ok && e.phase() == PhaseOffering {
		e.away.events, e.away.fenced = f, true
	}
}

// InputAction says what Input did with moves.
type InputAction uint8

// Input outcomes.
const (
	InputLocal     InputAction = iota // owned here: queue them for the tick
	InputBuffered                     // frozen by an open offer: held for the new owner or for resuming
	InputForwarded                    // handed off: a Forward is in Output.Send
	InputStashed                      // reserved here: held for the Commit
	InputDropped                      // unknown entity (or buffer full): counted
)

// Input routes a batch of moves (in sequence order) for entity that reached
// this zone. The machine copies what it keeps.
func (m *Machine) Input(now time.Duration, entity uint64, moves []move.Move, out *Output) InputAction {
	e, ok := m.ents[entity]
	if !ok {
		return m.inputUnknown(now, entity, 0, moves)
	}
	switch e.phase() {
	case PhaseOwned:
		return InputLocal
	case PhaseOffering:
		if !m.buffer(&e.away.moves, moves) {
			return InputDropped
		}
		return InputBuffered
	case PhaseCommitting, PhaseForwarding:
		fwdEpoch := e.epoch
		if e.phase() == PhaseCommitting {
			fwdEpoch++
		}
		f := m.msg(KindForward, entity, fwdEpoch, e.away.peer, now)
		f.Moves = append([]move.Move(nil), moves...)
		out.Send = append(out.Send, f)
		m.stats.Forwarded += uint64(len(moves))
		return InputForwarded
	}
	return InputDropped
}

// inputUnknown handles moves for an entity with no record here.
func (m *Machine) inputUnknown(now time.Duration, entity uint64, epoch Epoch, moves []move.Move) InputAction {
	if _, ok := m.res[entity]; ok && m.stashMoves(now, entity, epoch, moves) {
		return InputStashed
	}
	m.stats.UnknownInput += uint64(len(moves))
	return InputDropped
}

func (m *Machine) buffer(dst *[]move.Move, moves []move.Move) bool {
	if len(*dst)+len(moves) > m.cfg.MaxBuffered {
		m.stats.BufferOverflow += uint64(len(moves))
		return false
	}
	*dst = append(*dst, moves...)
	return true
}

func (m *Machine) stashMoves(now time.Duration, entity uint64, epoch Epoch, moves []move.Move) bool {
	s, ok := m.stash[entity]
	if !ok {
		s = &stashed{epoch: epoch}
		m.stash[entity] = s
	}
	if epoch > s.epoch { // a newer incarnation: older stashed moves still belong to the entity
		s.epoch = epoch
	}
	s.at = now
	if !m.buffer(&s.moves, moves) {
		return false
	}
	m.stats.Stashed += uint64(len(moves))
	return true
}

// known returns the newest epoch at which this zone knows the entity to be
// owned (by itself or by the zone it handed it to); 0 if it knows nothing.
func (e *entry) known() Epoch {
	if e == nil {
		return 0
	}
	if e.phase() == PhaseCommitting {
		return e.epoch + 1
	}
	return e.epoch
}

// Reserved reports whether the zone accepted an offer of entity and waits
// for its Commit, and at which epoch.
func (m *Machine) Reserved(entity uint64) (Epoch, bool) {
	r, ok := m.res[entity]
	if !ok {
		return 0, false
	}
	return r.epoch, true
}

// Step handles one message from another zone at time now.
func (m *Machine) Step(now time.Duration, msg Msg, out *Output) {
	if msg.To != m.zone || msg.From == m.zone {
		m.stats.Misrouted++
		return
	}
	e := m.ents[msg.Entity]
	if msg.Kind == KindCommitAck && e != nil && e.phase() == PhaseForwarding && e.away.stranded && e.away.peer == msg.From && e.epoch == msg.Epoch+1 {
		// A Commit given up on was taken after all: its handoff is over,
		// however late the ack (it names the very handoff this zone
		// remembers; it came late because the Commit did).
		e.away.stranded = false
		m.stats.Duplicates++
		return
	}
	if now-msg.Sent > m.cfg.MaxAge {
		m.stats.Stale++
		return
	}
	switch msg.Kind {
	case KindOffer:
		m.onOffer(now, msg, e, out)
	case KindAccept:
		m.onAccept(now, msg, e, out)
	case KindReject:
		if e != nil && e.phase() == PhaseOffering && e.away.peer == msg.From && e.epoch == msg.Epoch {
			m.resume(msg.Entity, e, msg.Reason, out)
			m.stats.Rejected++
		} else {
			m.stats.Stale++
		}
	case KindCommit:
		m.onCommit(now, msg, e, out)
	case KindCommitAck:
		if e != nil && e.phase() == PhaseCommitting && e.away.peer == msg.From && e.epoch == msg.Epoch {
			e.away.phase, e.epoch, e.since = PhaseForwarding, e.epoch+1, now
			e.away.snap, e.away.moves = nil, nil
			m.retime(msg.Entity, e)
		} else {
			m.stats.Duplicates++
		}
	case KindAbort:
		// Only the reservation goes: stashed moves stay until they expire,
		// because an Abort can be an old copy from an earlier attempt whose
		// retry did commit (the Commit may be right behind it).
		if r, ok := m.res[msg.Entity]; ok && r.from == msg.From && r.epoch == msg.Epoch {
			delete(m.res, msg.Entity)
		} else {
			m.stats.Stale++
		}
	case KindForward:
		m.onForward(now, msg, e, out)
	default:
		m.stats.Misrouted++
	}
}

func (m *Machine) onOffer(now time.Duration, msg Msg, e *entry, out *Output) {
	reply := func(k Kind, r Reason) {
		a := m.msg(k, msg.Entity, msg.Epoch, msg.From, now)
		a.Reason = r
		out.Send = append(out.Send, a)
	}
	r := m.res[msg.Entity]
	switch {
	case msg.State == nil || msg.State.Entity != msg.Entity:
		reply(KindReject, ReasonWrongArg)
	case e != nil && e.phase().Owner():
		reply(KindReject, ReasonOwned)
	case msg.Epoch < e.known() || r != nil && msg.Epoch < r.epoch:
		// Someone owned it at a newer epoch than the offerer claims: the
		// offer is an old copy.
		m.stats.Stale++
		reply(KindReject, ReasonStale)
	case r != nil && r.epoch == msg.Epoch && r.from == msg.From:
		m.stats.Duplicates++
		reply(KindAccept, ReasonNone) // our Accept may have been lost
	case !m.accept:
		reply(KindReject, ReasonRefused)
	case r == nil && len(m.res) >= m.cfg.MaxPending:
		reply(KindReject, ReasonBusy)
	default:
		// New, or newer than a reservation that was evidently abandoned.
		m.res[msg.Entity] = &reservation{epoch: msg.Epoch, from: msg.From, since: now}
		m.stats.Accepted++
		reply(KindAccept, ReasonNone)
	}
}

func (m *Machine) onAccept(now time.Duration, msg Msg, e *entry, out *Output) {
	switch {
	case e != nil && e.phase() == PhaseOffering && e.away.peer == msg.From && e.epoch == msg.Epoch:
		// Phase two: give it away. From here this zone is not the owner.
		if e.away.fenced {
			// The Offer shares snap (its target may be reading it): the
			// Commit and its resends get a copy with the fence now.
			s := e.away.snap.clone()
			s.Events, e.away.snap, e.away.fenced = e.away.events, s, false
		}
		e.away.phase, e.since, e.away.lastSend = PhaseCommitting, now, now
		m.retime(msg.Entity, e)
		c := m.msg(KindCommit, msg.Entity, e.epoch, e.away.peer, now)
		c.State, c.Moves = e.away.snap, e.away.moves
		out.Send = append(out.Send, c)
		out.Released = append(out.Released, Released{Entity: msg.Entity, To: e.away.peer})
		e.conn = ""
		m.stats.Committed++
	case e != nil && e.phase() == PhaseCommitting && e.away.peer == msg.From && e.epoch == msg.Epoch,
		e != nil && e.phase() == PhaseForwarding && e.away.peer == msg.From && e.epoch == msg.Epoch+1:
		m.stats.Duplicates++ // Tick resends the Commit until acknowledged
	default:
		// We aborted (timeout) or moved on: make the target drop its
		// reservation.
		m.stats.Stale++
		out.Send = append(out.Send, m.msg(KindAbort, msg.Entity, msg.Epoch, msg.From, now))
	}
}

func (m *Machine) onCommit(now time.Duration, msg Msg, e *entry, out *Output) {
	if msg.State == nil || msg.State.Entity != msg.Entity {
		m.stats.Misrouted++
		return
	}
	ack := m.msg(KindCommitAck, msg.Entity, msg.Epoch, msg.From, now)
	newEpoch := msg.Epoch + 1
	switch {
	case e.known() >= newEpoch:
		// Already took it (or it went on from here): a duplicate.
		m.stats.Duplicates++
		out.Send = append(out.Send, ack)
		return
	case e != nil && e.phase().Owner():
		// We own it at an older epoch than the sender had: impossible with
		// one owner per epoch. Refuse rather than make a second owner.
		m.stats.Stale++
		return
	}
	// A committing record here is older than this commit, so its Commit
	// was received and the entity moved on: stop resending it.
	m.put(msg.Entity, &entry{epoch: newEpoch, since: now, route: now, conn: msg.State.Conn})
	delete(m.res, msg.Entity)
	moves := append([]move.Move(nil), msg.Moves...)
	if s, ok := m.stash[msg.Entity]; ok {
		moves = append(moves, s.moves...)
		delete(m.stash, msg.Entity)
	}
	out.Acquired = append(out.Acquired, Acquired{State: msg.State.clone(), Epoch: newEpoch, From: msg.From, Moves: moves})
	out.Send = append(out.Send, ack)
	if msg.State.Conn != "" {
		out.Send = append(out.Send, m.msg(KindRoute, msg.Entity, newEpoch, msg.State.Conn, now))
		m.stats.RoutesSent++
	}
	m.stats.Acquired++
}

func (m *Machine) onForward(now time.Duration, msg Msg, e *entry, out *Output) {
	if e == nil {
		// Not ours yet (the Commit is behind this message) or never: hold
		// the moves for a while.
		m.stashMoves(now, msg.Entity, msg.Epoch, msg.Moves)
		return
	}
	switch e.phase() {
	case PhaseOwned:
		out.Deliver = append(out.Deliver, Deliver{Entity: msg.Entity, Moves: append([]move.Move(nil), msg.Moves...)})
		m.stats.Delivered += uint64(len(msg.Moves))
		// The connection still sends to the old owner: its Route was lost
		// or is late. Repeat it, not more often than RetryInterval.
		if now-e.route >= m.cfg.RetryInterval {
			e.route = now
			if conn := e.conn; conn != "" {
				out.Send = append(out.Send, m.msg(KindRoute, msg.Entity, e.epoch, conn, now))
				m.stats.RoutesSent++
			}
		}
	case PhaseOffering:
		m.buffer(&e.away.moves, msg.Moves)
	case PhaseCommitting, PhaseForwarding:
		if msg.Epoch > e.known() {
			// Addressed to an incarnation newer than the one we handed on:
			// it is coming back here. Hold the moves for its Commit.
			m.stashMoves(now, msg.Entity, msg.Epoch, msg.Moves)
			return
		}
		m.Input(now, msg.Entity, msg.Moves, out) // pass it on along the chain
	}
}

func (m *Machine) resume(entity uint64, e *entry, r Reason, out *Output) {
	out.Resumed = append(out.Resumed, Resumed{Entity: entity, Moves: e.away.moves, Reason: r})
	e.away = nil
	m.retime(entity, e)
}

// Tick runs the timers: resends, timeouts, expiry.
func (m *Machine) Tick(now time.Duration, out *Output) { m.timers(now, out, true) }

// Expire runs the timers that end things and resends nothing: an offer
// past OfferTimeout is aborted (its Abort sent: it only withdraws the
// offer), a Commit past CommitGiveUp is given up on (stranded),
// forwarding records, reservations and stashed moves expire. It is Tick
// for a zone that may no longer own what it would resend (its lease's
// renewal overdue, actors/zone): a resent Offer or Commit would claim an
// ownership the zone may have lost, a give-up claims nothing.
func (m *Machine) Expire(now time.Duration, out *Output) { m.timers(now, out, false) }

// timers is Tick (resend) or Expire.
func (m *Machine) timers(now time.Duration, out *Output, resend bool) {
	for id, e := range m.timed { // owned entries have no timers
		switch e.phase() {
		case PhaseOffering:
			switch {
			case now-e.since >= m.cfg.OfferTimeout:
				out.Send = append(out.Send, m.msg(KindAbort, id, e.epoch, e.away.peer, now))
				m.resume(id, e, ReasonNone, out)
				m.stats.Aborted++
			case resend && now-e.away.lastSend >= m.cfg.RetryInterval:
				o := m.msg(KindOffer, id, e.epoch, e.away.peer, now)
				o.State = e.away.snap
				out.Send = append(out.Send, o)
				e.away.lastSend = now
				m.stats.Retries++
			}
		case PhaseCommitting:
			switch {
			case now-e.since >= m.cfg.CommitGiveUp:
				e.away.phase, e.epoch, e.since, e.away.snap, e.away.moves = PhaseForwarding, e.epoch+1, now, nil, nil
				e.away.stranded = true
				m.retime(id, e)
				m.stats.Stranded++
			case resend && now-e.away.lastSend >= m.cfg.RetryInterval:
				c := m.msg(KindCommit, id, e.epoch, e.away.peer, now)
				c.State, c.Moves = e.away.snap, e.away.moves
				out.Send = append(out.Send, c)
				e.away.lastSend = now
				m.stats.Retries++
			}
		case PhaseForwarding:
			if now-e.since >= m.cfg.ForwardTTL {
				m.drop(id)
				m.stats.ForwardsForgotten++
			}
		}
	}
	for id, r := range m.res {
		if now-r.since >= m.cfg.ForwardTTL {
			delete(m.res, id)
		}
	}
	for id, s := range m.stash {
		if now-s.at >= m.cfg.CommitGiveUp+m.cfg.MaxAge {
			m.stats.StashExpired += uint64(len(s.moves))
			delete(m.stash, id)
		}
	}
}
