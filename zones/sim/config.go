package sim

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/interest"
	"github.com/ghostwire/ghostwire/zones/world"
)

// ErrConfig reports an unusable Config.
var ErrConfig = errors.New("sim: invalid config")

// Entity kinds (interest.Config.KindWeight and Config.Classes are indexed
// by them).
const (
	KindPlayer uint8 = 0
	KindNPC    uint8 = 1
)

// Config describes one zone. Zero fields take the defaults noted.
type Config struct {
	// Zone is this zone's id in World. Required.
	Zone string
	// World is the world map. Default: world.Default().
	World *world.World
	// TickRate is the fixed simulation rate in Hz. Default 20.
	TickRate int
	// NPCs is how many wanderers this zone spawns at start.
	NPCs int
	// Seed seeds the NPCs (each NPC's own generator is derived from it and
	// the NPC's id, and travels with the NPC on handoff).
	Seed uint64
	// NPCGeneration tells the NPCs this run of the zone spawns from those
	// of its earlier runs: their ids are NPCID(zone, NPCGeneration<<20 | n).
	// A zone started again after its node died spawns its NPCs afresh
	// while some of the old run's may be walking in neighbour zones; with
	// the same ids, two NPCs would share one (each zone's handoffs refuse
	// the other: ReasonOwned). A cluster sets it from the zone's lease
	// epoch (NPCGenerationOf); 0 (one process) keeps the ids 1..NPCs.
	// Below 1<<20.
	NPCGeneration uint64
	// NPCSpeed is the range of wanderer speeds in m/s. Default [1, 3].
	NPCSpeed [2]float32
	// Interest configures scope and priorities.
	Interest interest.Config
	// CellSize is the spatial grid's cell in metres. Default: by the
	// zone's crowding, a quarter of the interest leave radius, or half of
	// it while the zone holds fewer than ≈ 12/LeaveRadius² entities per m²
	// (Config reports the quarter).
	CellSize float64
	// Step is the movement function moves are applied with; it must be the
	// clients' too (their prediction CRCs compare with its results).
	// Default move.Walk.
	Step move.StepFunc
	// MaxSpeed is the horizontal speed no entity may exceed, in m/s. A move
	// that moves its entity faster (a Step bug, an external change) is a
	// teleport: the position is kept but the client is sent a correction.
	// Default move.WalkSpeed.
	MaxSpeed float32
	// MaxCredit bounds the input time a player may bank: each tick adds
	// one tick period, each move applied spends its Dt, and moves beyond
	// the credit wait for later ticks. A client whose clock runs fast
	// (a speed hack) is thus held to real time. Default 250 ms.
	MaxCredit time.Duration
	// HandoffMargin is how far past its zone's border an entity must be
	// before it is handed to the neighbour (metres). Default 8.
	HandoffMargin float64
	// MinDwell is how long an entity stays with a zone before it may be
	// handed on: with HandoffMargin, it bounds ping-pong across a border
	// to one handoff per MinDwell. Default 2 s.
	MinDwell time.Duration
	// BorderRange is how far from a neighbour's rectangle an entity is
	// still replicated to it. Default the interest leave radius.
	BorderRange float64
	// HandoffGrace is how many ticks, on the new owner's clock, a replica
	// handed between zones is held past the moment its old owner let it
	// go: a batch the new owner built later than that and without it
	// drops it (see awaitHeir in replica.go; however late such a batch
	// arrives, ReplicaTTL bounds the wait). It is the margin for mapping
	// the new owner's clock to this zone's. Default 3; zoned uses 20.
	HandoffGrace int
	// ReplicaTTL drops a neighbour's replicas when no batch arrived for
	// this long (a dead or stalled neighbour), counted on the zone's live
	// time: its own tick gaps count up to a few periods each (a stall of
	// this zone is not its neighbour's silence). Default 1 s.
	ReplicaTTL time.Duration
	// Handoff tunes the handoff machine.
	Handoff handoff.Config
	// GapTimeout is how long a player's move queue waits for a missing
	// move. Default handoff.DefaultGapTimeout.
	GapTimeout time.Duration
	// MaxQueuedMoves bounds each player's move queue. Default 256.
	MaxQueuedMoves int
	// Classes gives the ghost class of each kind for view entries.
	// Default: ghost.PlayerClass(nil) and ghost.NPCClass(nil). The ghost
	// managers' registry must hold the same *Class values.
	Classes [interest.MaxKinds]*ghost.Class
	// FarEvery is how often, in ticks, a view's far members (farther from
	// the viewer than Overload.FarFraction × the interest enter radius)
	// get a fresh state (SC-8: less important objects are updated less
	// often). Between, their view entries hold the state of their last
	// refresh, which costs their ghosts no update (ghost.Snapshot.SetHeld).
	// Each entity's refresh ticks are staggered by its slot, so a tick
	// refreshes 1/FarEvery of them. 1 serves every member its state every
	// tick. The overload levels multiply it (×2, ×4, ×8). Default 2 (far
	// members at half the tick rate); at most MaxFarEvery.
	FarEvery int
	// Overload tunes degradation under load.
	Overload OverloadConfig
	// NoSeqExtra leaves players' State.Extra to the game. By default (the
	// dev game's convention) the zone writes each player's last applied
	// move sequence into its replicated state every tick: Extra[0] = low
	// 32 bits, Extra[1] = high 32 bits, so a client (or a test bot) knows
	// exactly which move another player's ghost state reflects. It costs
	// the player class's extra group on every update of a moving player
	// (Elias-gamma coded: 2·⌊log2(seq+1)⌋+4 bits, 36 at seq 100,000).
	NoSeqExtra bool
}

// OverloadConfig says when the zone degrades. The actor measures how long
// each Step took and reports it (ReportTickCost); a tick that took more
// than High × the tick period is an overrun.
type OverloadConfig struct {
	// High: an overrun is a tick costing more than High × period. Default 0.8.
	High float64
	// Low: a tick costing less than Low × period is calm. Default 0.4.
	Low float64
	// Raise: this many overruns in a row raise the level. Default 3.
	Raise int
	// Lower: this many calm ticks in a row lower it. Default 40 (2 s at 20 Hz).
	Lower int
	// FarFraction: entities farther than FarFraction × the enter radius are
	// "far": refreshed every Config.FarEvery ticks, the first to be
	// degraded further. Default 0.5.
	FarFraction float32
}

// DefaultTickRate is the default simulation rate.
const DefaultTickRate = 20

// DefaultFarEvery is Config.FarEvery's default: far view members at half
// the tick rate.
const DefaultFarEvery = 2

// MaxFarEvery bounds Config.FarEvery: a far member refreshed less often
// than every 64 ticks (3.2 s at 20 Hz) would look frozen.
const MaxFarEvery = 64

func (c Config) withDefaults() Config {
	if c.World == nil {
		c.World = world.Default()
	}
	if c.TickRate == 0 {
		c.TickRate = DefaultTickRate
	}
	if c.NPCSpeed == [2]float32{} {
		c.NPCSpeed = [2]float32{1, 3}
	}
	if c.Step == nil {
		c.Step = move.Walk
	}
	if c.MaxSpeed == 0 {
		c.MaxSpeed = move.WalkSpeed
	}
	if c.MaxCredit == 0 {
		c.MaxCredit = 250 * time.Millisecond
	}
	if c.HandoffMargin == 0 {
		c.HandoffMargin = 8
	}
	if c.MinDwell == 0 {
		c.MinDwell = 2 * time.Second
	}
	if c.HandoffGrace <= 0 {
		c.HandoffGrace = handoffGrace
	}
	if c.ReplicaTTL == 0 {
		c.ReplicaTTL = time.Second
	}
	if c.GapTimeout == 0 {
		c.GapTimeout = handoff.DefaultGapTimeout
	}
	if c.MaxQueuedMoves == 0 {
		c.MaxQueuedMoves = 256
	}
	if c.FarEvery == 0 {
		c.FarEvery = DefaultFarEvery
	}
	if c.Classes[KindPlayer] == nil && c.Classes[KindNPC] == nil {
		c.Classes[KindPlayer] = ghost.PlayerClass(nil)
		c.Classes[KindNPC] = ghost.NPCClass(nil)
	}
	o := &c.Overload
	if o.High == 0 {
		o.High = 0.8
	}
	if o.Low == 0 {
		o.Low = 0.4
	}
	if o.Raise == 0 {
		o.Raise = 3
	}
	if o.Lower == 0 {
		o.Lower = 40
	}
	if o.FarFraction == 0 {
		o.FarFraction = 0.5
	}
	return c
}

// leave returns the effective interest leave radius.
func (c Config) interestConfig() (interest.Config, error) {
	tr, err := interest.NewTracker(c.Interest)
	if err != nil {
		return interest.Config{}, err
	}
	return tr.Config(), nil
}

// Validate reports the first unusable field.
func (c Config) Validate() error {
	c = c.withDefaults()
	if _, ok := c.World.Zone(c.Zone); !ok {
		return fmt.Errorf("%w: zone %q is not in world %q", ErrConfig, c.Zone, c.World.Name())
	}
	ic, err := c.interestConfig()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := c.Handoff.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	bad := func(what string, v any) error { return fmt.Errorf("%w: %s %v", ErrConfig, what, v) }
	switch {
	case c.TickRate < 1 || c.TickRate > 1000:
		return bad("TickRate", c.TickRate)
	case c.NPCs < 0 || c.NPCs >= 1<<npcGenShift:
		return bad("NPCs (want 0 ≤ NPCs < 2^20 a zone)", c.NPCs)
	case c.NPCGeneration >= 1<<(40-npcGenShift):
		return bad("NPCGeneration (want < 2^20)", c.NPCGeneration)
	case !(c.NPCSpeed[0] >= 0 && c.NPCSpeed[1] >= c.NPCSpeed[0] && c.NPCSpeed[1] <= c.MaxSpeed):
		return bad("NPCSpeed (want 0 ≤ min ≤ max ≤ MaxSpeed)", c.NPCSpeed)
	case !(c.MaxSpeed > 0) || math.IsInf(float64(c.MaxSpeed), 0):
		return bad("MaxSpeed", c.MaxSpeed)
	case c.MaxCredit < time.Second/time.Duration(c.TickRate):
		return bad("MaxCredit (at least one tick)", c.MaxCredit)
	case c.HandoffMargin < 0 || math.IsNaN(c.HandoffMargin):
		return bad("HandoffMargin", c.HandoffMargin)
	case c.MinDwell < 0:
		return bad("MinDwell", c.MinDwell)
	case c.CellSize < 0 || math.IsNaN(c.CellSize):
		return bad("CellSize", c.CellSize)
	case c.BorderRange < 0 || math.IsNaN(c.BorderRange):
		return bad("BorderRange", c.BorderRange)
	case c.MaxQueuedMoves < 1:
		return bad("MaxQueuedMoves", c.MaxQueuedMoves)
	case c.FarEvery < 1 || c.FarEvery > MaxFarEvery:
		return bad(fmt.Sprintf("FarEvery (ticks between far members' refreshes: 1 to %d, 0 for the default %d)", MaxFarEvery, DefaultFarEvery), c.FarEvery)
	case c.Classes[KindPlayer] == nil || c.Classes[KindNPC] == nil:
		return bad("Classes (player and NPC classes required)", c.Classes)
	case !(c.Overload.Low < c.Overload.High) || c.Overload.Raise < 1 || c.Overload.Lower < 1:
		return bad("Overload", c.Overload)
	case !(c.Overload.FarFraction > 0) || math.IsInf(float64(c.Overload.FarFraction), 0):
		return bad("Overload.FarFraction (a fraction of the enter radius, > 0)", c.Overload.FarFraction)
	}
	// Replicas come only from neighbours: a zone narrower than the border
	// range would let a non-neighbour's entities be in view unseen.
	br := c.BorderRange
	if br == 0 {
		br = float64(ic.LeaveRadius)
	}
	if side := c.World.MinSide(); side < br+c.HandoffMargin {
		return fmt.Errorf("%w: the smallest zone side %g m is less than BorderRange %g m + HandoffMargin %g m", ErrConfig, side, br, c.HandoffMargin)
	}
	return nil
}
