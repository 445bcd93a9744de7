// Package scenario generates the bots' movement: pure, seeded steering
// towards waypoints chosen per scenario — wander (random waypoints), crowd
// (everyone converges on one point, the worst case for interest
// management), border (back and forth across the nearest zone border, the
// worst case for handoff), teleport (wander plus admin-style jumps) and
// churn (wander while sessions come and go). A Mover sees only the bot's
// own position and the time it is given, so the same seed gives the same
// inputs whatever the network does.
package scenario

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/world"
)

// Kind names a scenario.
type Kind uint8

const (
	Wander Kind = iota
	Crowd
	Border
	Teleport
	Churn
)

var kindNames = [...]string{"wander", "crowd", "border", "teleport", "churn"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("scenario(%d)", k)
}

// ParseKind reads a scenario name.
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if strings.EqualFold(s, n) {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("scenario: unknown scenario %q (one of %s)", s, strings.Join(kindNames[:], ", "))
}

// Params configure every bot's Mover. The zero values of the optional
// fields take the defaults below.
type Params struct {
	Kind  Kind
	World *world.World // required
	Seed  uint64

	// Margin keeps waypoints this far inside the world's edges, metres.
	Margin float64
	// Arrive is the distance at which a waypoint counts as reached, metres.
	Arrive float64
	// MaxPause is the longest rest at a wander waypoint.
	MaxPause time.Duration

	// CrowdPoint is where the crowd converges (default: the world's centre,
	// which in the default 2×2 world is also the corner of all four zones).
	CrowdPoint *[2]float64
	// CrowdRadius: the crowd mills within this radius of CrowdPoint, metres.
	CrowdRadius float64

	// BorderSwing is how far past the border a border bot walks, metres.
	BorderSwing float64

	// TeleportEvery is the mean time between teleports.
	TeleportEvery time.Duration

	// ChurnLife is the mean session length of a churning bot; ChurnPause
	// the longest wait before it reconnects.
	ChurnLife, ChurnPause time.Duration
}

// Defaults of Params.
const (
	DefaultMargin        = 5.0
	DefaultArrive        = 1.5
	DefaultMaxPause      = 2 * time.Second
	DefaultCrowdRadius   = 15.0
	DefaultBorderSwing   = 25.0
	DefaultTeleportEvery = 5 * time.Second
	DefaultChurnLife     = 10 * time.Second
	DefaultChurnPause    = 2 * time.Second
)

func (p Params) withDefaults() Params {
	if p.Margin <= 0 {
		p.Margin = DefaultMargin
	}
	if p.Arrive <= 0 {
		p.Arrive = DefaultArrive
	}
	if p.MaxPause < 0 {
		p.MaxPause = 0
	} else if p.MaxPause == 0 {
		p.MaxPause = DefaultMaxPause
	}
	if p.CrowdRadius <= 0 {
		p.CrowdRadius = DefaultCrowdRadius
	}
	if p.BorderSwing <= 0 {
		p.BorderSwing = DefaultBorderSwing
	}
	if p.TeleportEvery <= 0 {
		p.TeleportEvery = DefaultTeleportEvery
	}
	if p.ChurnLife <= 0 {
		p.ChurnLife = DefaultChurnLife
	}
	if p.ChurnPause <= 0 {
		p.ChurnPause = DefaultChurnPause
	}
	return p
}

// Validate reports a configuration no Mover can follow.
func (p Params) Validate() error {
	if p.World == nil {
		return fmt.Errorf("scenario: no world")
	}
	if int(p.Kind) >= len(kindNames) {
		return fmt.Errorf("scenario: unknown kind %d", p.Kind)
	}
	q := p.withDefaults()
	b := p.World.Bounds()
	if sx, sz := b.Size(); sx <= 2*q.Margin || sz <= 2*q.Margin {
		return fmt.Errorf("scenario: world %v is smaller than twice the margin %g m", b, q.Margin)
	}
	if p.CrowdPoint != nil {
		c := *p.CrowdPoint
		if !(c[0] >= b.Min[0] && c[0] <= b.Max[0] && c[1] >= b.Min[1] && c[1] <= b.Max[1]) {
			return fmt.Errorf("scenario: crowd point [%g, %g] is outside the world %v", c[0], c[1], b)
		}
	}
	return nil
}

// Action is what a bot does this input sample.
type Action struct {
	Forward, Strafe int8
	Yaw             uint16
	// Teleport asks for a jump to To ([x, z]) — the bot carries it out by
	// whatever means the server offers.
	Teleport bool
	To       [2]float64
}

// Mover steers one bot. Not safe for concurrent use; the bot's worker owns
// it.
type Mover struct {
	p    Params
	rng  *rand.Rand
	tgt  [2]float64
	have bool
	rest time.Duration // resting until

	// border: the border line (axis 0 = x = coord, 1 = z = coord) and which
	// side the current target lies on.
	axis   int
	coord  float64
	side   float64
	border bool

	nextTP time.Duration
}

// NewMover returns the Mover of bot i. The same Params, i and inputs give
// the same actions.
func NewMover(p Params, i int) *Mover {
	p = p.withDefaults()
	m := &Mover{p: p, rng: rand.New(rand.NewPCG(p.Seed, uint64(i)*0x9e3779b97f4a7c15+1))}
	m.nextTP = m.jitter(p.TeleportEvery)
	return m
}

// jitter returns d scaled by a uniform factor in [0.5, 1.5).
func (m *Mover) jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.5 + m.rng.Float64()))
}

// Lifetime is how long this bot's next session lasts: forever (0) except
// in the churn scenario, where it is exponentially distributed around
// ChurnLife (clipped to [ChurnLife/10, 5·ChurnLife]).
func (m *Mover) Lifetime() time.Duration {
	if m.p.Kind != Churn {
		return 0
	}
	mean := float64(m.p.ChurnLife)
	d := time.Duration(m.rng.ExpFloat64() * mean)
	return min(max(d, m.p.ChurnLife/10), 5*m.p.ChurnLife)
}

// Pause is how long a churning bot waits before it reconnects.
func (m *Mover) Pause() time.Duration {
	return time.Duration(m.rng.Float64() * float64(m.p.ChurnPause))
}

// Reset forgets the current waypoint (a new session starts where the
// server spawns the bot, not where the last one ended).
func (m *Mover) Reset() { m.have, m.border, m.rest = false, false, 0 }

// Target returns the current waypoint, if any.
func (m *Mover) Target() ([2]float64, bool) { return m.tgt, m.have }

// Step returns the action for the input sample at now, the bot standing at
// pos (metres, Y up).
func (m *Mover) Step(now time.Duration, pos [3]float32) Action {
	x, z := float64(pos[0]), float64(pos[2])
	if m.p.Kind == Teleport && now >= m.nextTP {
		m.nextTP = now + m.jitter(m.p.TeleportEvery)
		to := m.randomPoint()
		m.have = false
		return Action{Teleport: true, To: to}
	}
	if now < m.rest {
		return Action{}
	}
	if !m.have {
		m.pick(x, z)
	}
	dx, dz := m.tgt[0]-x, m.tgt[1]-z
	d := math.Hypot(dx, dz)
	if d <= m.p.Arrive {
		m.arrived(now)
		m.pick(x, z)
		dx, dz = m.tgt[0]-x, m.tgt[1]-z
		d = math.Hypot(dx, dz)
		if now < m.rest || d <= m.p.Arrive {
			return Action{}
		}
	}
	fwd := 1.0
	if d < 3 { // ease in: WalkAccel stops a full-speed bot in ~1.2 m
		fwd = max(d/3, 0.2)
	}
	return Action{Forward: move.Axis(fwd), Yaw: move.YawFromRadians(math.Atan2(dx, dz))}
}

func (m *Mover) arrived(now time.Duration) {
	m.have = false
	switch m.p.Kind {
	case Wander, Teleport, Churn:
		if m.p.MaxPause > 0 {
			m.rest = now + time.Duration(m.rng.Float64()*float64(m.p.MaxPause))
		}
	case Border:
		m.side = -m.side // walk back across
		m.have = false
	}
}

// pick chooses the next waypoint from [x, z].
func (m *Mover) pick(x, z float64) {
	switch m.p.Kind {
	case Crowd:
		c := m.crowdPoint()
		r := m.p.CrowdRadius * math.Sqrt(m.rng.Float64())
		a := 2 * math.Pi * m.rng.Float64()
		m.tgt = m.clamp(c[0]+r*math.Sin(a), c[1]+r*math.Cos(a))
	case Border:
		if !m.border {
			axis, coord, ok := NearestBorder(m.p.World, x, z)
			if !ok { // a one-zone world: nothing to cross, wander
				m.tgt = m.randomPoint()
				break
			}
			m.axis, m.coord, m.border = axis, coord, true
			// Start on the far side of the border from where we stand.
			p := x
			if axis == 1 {
				p = z
			}
			m.side = 1
			if p >= coord {
				m.side = -1
			}
		}
		off := m.coord + m.side*m.p.BorderSwing
		// Keep the along-border coordinate, nudged a little so bots spread.
		if m.axis == 0 {
			m.tgt = m.clamp(off, z+m.rng.NormFloat64()*2)
		} else {
			m.tgt = m.clamp(x+m.rng.NormFloat64()*2, off)
		}
	default:
		m.tgt = m.randomPoint()
	}
	m.have = true
}

func (m *Mover) crowdPoint() [2]float64 {
	if m.p.CrowdPoint != nil {
		return *m.p.CrowdPoint
	}
	b := m.p.World.Bounds()
	return [2]float64{(b.Min[0] + b.Max[0]) / 2, (b.Min[1] + b.Max[1]) / 2}
}

func (m *Mover) randomPoint() [2]float64 {
	b := m.p.World.Bounds()
	mg := m.p.Margin
	return [2]float64{
		b.Min[0] + mg + m.rng.Float64()*(b.Max[0]-b.Min[0]-2*mg),
		b.Min[1] + mg + m.rng.Float64()*(b.Max[1]-b.Min[1]-2*mg),
	}
}

// clamp keeps a waypoint Margin inside the world.
func (m *Mover) clamp(x, z float64) [2]float64 {
	b := m.p.World.Bounds()
	mg := m.p.Margin
	return [2]float64{min(max(x, b.Min[0]+mg), b.Max[0]-mg), min(max(z, b.Min[1]+mg), b.Max[1]-mg)}
}

// NearestBorder returns the zone border nearest to [x, z]: an edge of the
// zone holding the point that another zone shares (not the world's edge),
// as an axis (0: the line x = coord, 1: the line z = coord). ok is false
// outside the world or in a world of one zone.
func NearestBorder(w *world.World, x, z float64) (axis int, coord float64, ok bool) {
	zone, in := w.ZoneAt(x, z)
	if !in {
		x, z = w.Clamp(x, z)
		if zone, in = w.ZoneAt(x, z); !in {
			return 0, 0, false
		}
	}
	wb := w.Bounds()
	best := math.Inf(1)
	try := func(ax int, c, edge, worldEdge float64) {
		if c == worldEdge {
			return
		}
		if d := math.Abs(edge - c); d < best {
			best, axis, coord, ok = d, ax, c, true
		}
	}
	try(0, zone.Min[0], x, wb.Min[0])
	try(0, zone.Max[0], x, wb.Max[0])
	try(1, zone.Min[1], z, wb.Min[1])
	try(1, zone.Max[1], z, wb.Max[1])
	return axis, coord, ok
}
