package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/ghostwire/ghostwire/zones/handoff"

	"github.com/ghostwire/ghostwire/zones/world"
)

// NPC ids: the top bit set, then the zone's index in the world map, then a
// counter, so ids are unique world-wide without coordination and never
// collide with player ids: a player's entity id is its connect token's
// PlayerID, which must stay below 1<<63 (Join refuses others with
// ErrBadID).
const npcBit = 1 << 63

// npcGenShift: an NPC id's counter is the zone run's generation
// (Config.NPCGeneration) above 20 bits of spawn count.
const npcGenShift = 20

// NPCGenerationOf is the NPC generation (Config.NPCGeneration) of a zone
// run that started at lease epoch: the epoch's bits mixed and folded into
// 20, never 0 (a single process's). Two runs of a zone share one with
// probability ≈ 2^-20, and only their NPCs that are still alive at once
// (emigrants of the older run) could then share an id.
func NPCGenerationOf(epoch uint64) uint64 {
	s := epoch
	g := splitmix64(&s) >> (64 - (40 - npcGenShift))
	if g == 0 {
		g = 1
	}
	return g
}

// NPCGenerationOfRestart is the NPC generation of a zone run of generation
// gen restarted in place for the restart-th time (its actor after a panic,
// under the same lease epoch): the NPCs of the run before it may have
// walked into the neighbour zones and live on there under their ids. Never
// gen, never 0; two restarts share one with probability ≈ 2^-20.
func NPCGenerationOfRestart(gen, restart uint64) uint64 {
	s := gen<<32 ^ restart<<1 | 1
	for {
		if g := splitmix64(&s) >> (64 - (40 - npcGenShift)); g != 0 && g != gen {
			return g
		}
	}
}

// NPCID returns the id of the n-th NPC spawned by the zone with index zi.
func NPCID(zi int, n uint64) uint64 { return npcBit | uint64(zi+1)<<40 | n&(1<<40-1) }

// IsNPC reports whether id is an NPC id.
func IsNPC(id uint64) bool { return id&npcBit != 0 }

// splitmix64 is the NPCs' random generator: one uint64 of state that
// travels with the NPC on handoff, so a wanderer walks on exactly as it
// would have in its old zone (TICK-4: a specified algorithm, not math/rand's
// default source).
func splitmix64(s *uint64) uint64 {
	*s += 0x9E3779B97F4A7C15
	x := *s
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}

func unit(s *uint64) float32 { return float32(splitmix64(s)>>40) / (1 << 24) }

func (z *Zone) spawnNPC(now time.Duration) {
	z.npcNext++
	id := NPCID(z.w.Index(z.cfg.Zone), z.cfg.NPCGeneration<<npcGenShift|z.npcNext)
	s := z.slotAlloc(id)
	e := &z.ents[s]
	e.kind, e.role, e.epoch, e.since = KindNPC, roleOwned, 1, now
	n := &npcSlot{rng: z.cfg.Seed ^ id*0x2545F4914F6CDD1D}
	e.np = n
	r := z.self.Rect
	// Keep a margin from the border so no NPC starts mid-handoff.
	mx := min(z.cfg.HandoffMargin*2, (r.Max[0]-r.Min[0])/4)
	mz := min(z.cfg.HandoffMargin*2, (r.Max[1]-r.Min[1])/4)
	e.state.Pos[0] = float32(r.Min[0] + mx + float64(unit(&n.rng))*(r.Max[0]-r.Min[0]-2*mx))
	e.state.Pos[2] = float32(r.Min[1] + mz + float64(unit(&n.rng))*(r.Max[1]-r.Min[1]-2*mz))
	e.health = 100
	z.retarget(n)
	if _, err := z.hand.Spawn(id, now); err != nil {
		panic(err) // ids are unique by construction
	}
}

// retarget picks a new heading, speed and duration for a wanderer.
func (z *Zone) retarget(n *npcSlot) {
	n.turn(unit(&n.rng) * 2 * math.Pi)
	lo, hi := z.cfg.NPCSpeed[0], z.cfg.NPCSpeed[1]
	n.speed = lo + unit(&n.rng)*(hi-lo)
	n.turnIn = uint32(z.cfg.TickRate) * (2 + uint32(splitmix64(&n.rng)%6)) // 2–7 s
}

// turn sets n's heading and its sine and cosine (stepNPC's velocity).
func (n *npcSlot) turn(heading float32) {
	sin, cos := math.Sincos(float64(heading))
	n.heading, n.hsin, n.hcos = heading, float32(sin), float32(cos)
}

// npcTick is what stepNPC reads of the zone, taken once a tick.
type npcTick struct {
	b     world.Rect
	every uint64
	dt    float32
}

func (z *Zone) npcTick() npcTick {
	every := z.ov.npcEvery
	return npcTick{b: z.w.Bounds(), every: every, dt: z.dt * float32(every)}
}

// stepNPC walks owned wanderer e (slot s) one tick: straight ahead, a new
// heading every few seconds, bouncing off the world's edge. Under heavy
// overload half of them step each tick, by two ticks' worth.
func (z *Zone) stepNPC(t *npcTick, s int, e *entity) {
	b, every, dt := &t.b, t.every, t.dt
	if every > 1 && (z.tick+uint64(s))%every != 0 {
		z.stats.NPCStepsSkipped++
		return
	}
	n := e.np
	if n == nil { // not spawned nor acquired here: the zero state, as before npcSlot
		n = new(npcSlot)
		e.np = n
	}
	if n.turnIn <= uint32(every) {
		z.retarget(n)
	} else {
		n.turnIn -= uint32(every)
	}
	vx, vz := n.hsin*n.speed, n.hcos*n.speed
	x, zz := e.state.Pos[0]+vx*dt, e.state.Pos[2]+vz*dt
	if float64(x) < b.Min[0] || float64(x) > b.Max[0] {
		vx, x = -vx, e.state.Pos[0]
		n.turn(float32(math.Atan2(float64(vx), float64(vz))))
	}
	if float64(zz) < b.Min[1] || float64(zz) > b.Max[1] {
		vz, zz = -vz, e.state.Pos[2]
		n.turn(float32(math.Atan2(float64(vx), float64(vz))))
	}
	e.state.Pos[0], e.state.Pos[2] = x, zz
	e.state.Vel = [3]float32{vx, 0, vz}
	e.state.Yaw = n.heading
}

// NPCState is an NPC a zone hands to its next owner along with the zone
// (a handover: zonectl move-zone, a drain, a rebalance), so the NPCs walk
// on there where and as they were, with their ids, instead of a fresh
// set being spawned: the count stays what it was and no id is used twice.
type NPCState struct {
	Snap  handoff.Snapshot
	Epoch handoff.Epoch // its handoff epoch here
}

// AppendNPCs appends the state of every NPC this zone owns (also one it
// is offering a neighbour: until the Commit it is still this zone's).
// Taken from a zone frozen for a handover, nothing changes after.
func (z *Zone) AppendNPCs(dst []NPCState) []NPCState {
	for s := range z.ents {
		e := &z.ents[s]
		if e.kind != KindNPC || (e.role != roleOwned && e.role != roleFrozen) {
			continue
		}
		dst = append(dst, NPCState{Snap: *z.snapshot(int32(s)), Epoch: e.epoch})
	}
	return dst
}

// RestoreNPC adds an NPC a zone's previous owner handed over with it
// (AppendNPCs): owned here at a handoff epoch above its old one, so
// messages about its old epoch are stale. Refused: a player's id or kind,
// an id this zone already has (not as a replica), a position outside the
// world, an invalid state or a speed past MaxSpeed.
func (z *Zone) RestoreNPC(now time.Duration, st NPCState) error {
	sn := &st.Snap
	if !IsNPC(sn.Entity) || sn.Kind != KindNPC {
		return fmt.Errorf("%w: %#x is not an NPC", ErrBadState, sn.Entity)
	}
	if s, ok := z.byID.get(sn.Entity); ok && z.ents[s].role != roleReplica {
		return fmt.Errorf("%w: %#x", ErrExists, sn.Entity)
	}
	if !(sn.Speed >= 0 && sn.Speed <= z.cfg.MaxSpeed) {
		return fmt.Errorf("%w: speed %g m/s (want 0..%g)", ErrBadState, sn.Speed, z.cfg.MaxSpeed)
	}
	e, err := z.restoreSlot(now, sn.Entity, KindNPC, sn.Control, sn.Name, st.Epoch)
	if err != nil {
		return err
	}
	e.health, e.flags, e.extra = sn.Health, sn.Flags, sn.Extra
	e.np = &npcSlot{rng: sn.Rng[0], speed: sn.Speed, turnIn: sn.TurnIn}
	e.np.turn(sn.Heading)
	return nil
}
