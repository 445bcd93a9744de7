package sim

import (
	"math"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/zones/handoff"
)

// stepNPCRef is stepNPC as it was before a wanderer kept the sine and
// cosine of its heading (entity.turn): math.Sincos every step.
func stepNPCRef(z *Zone, t *npcTick, e *entity) {
	n := e.np
	if n.turnIn <= uint32(t.every) {
		z.retarget(n)
	} else {
		n.turnIn -= uint32(t.every)
	}
	sin, cos := math.Sincos(float64(n.heading))
	vx, vz := float32(sin)*n.speed, float32(cos)*n.speed
	x, zz := e.state.Pos[0]+vx*t.dt, e.state.Pos[2]+vz*t.dt
	if float64(x) < t.b.Min[0] || float64(x) > t.b.Max[0] {
		vx, x = -vx, e.state.Pos[0]
		n.heading = float32(math.Atan2(float64(vx), float64(vz)))
	}
	if float64(zz) < t.b.Min[1] || float64(zz) > t.b.Max[1] {
		vz, zz = -vz, e.state.Pos[2]
		n.heading = float32(math.Atan2(float64(vx), float64(vz)))
	}
	e.state.Pos[0], e.state.Pos[2] = x, zz
	e.state.Vel = [3]float32{vx, 0, vz}
	e.state.Yaw = n.heading
}

// TestAcquiredNPCWalksOn hands a wanderer's snapshot to another zone
// (acquire) and steps it there beside the original for a minute, and a
// copy by stepNPCRef: all three must walk the same path, float for float,
// through their turns and a bounce off the world's edge. A zone that took
// the heading but not its sine and cosine (stepNPC's velocity,
// entity.turn) stopped it; a bounce that did not turn them walked it
// into the edge again.
func TestAcquiredNPCWalksOn(t *testing.T) {
	a, _ := crowdZone(t, 0)
	b, _ := crowdZone(t, 0)
	for _, z := range []*Zone{a, b} {
		for s := range z.ents {
			z.slotFree(int32(s))
		}
	}
	sa := a.slotAlloc(NPCID(7, 1))
	ea := &a.ents[sa]
	ea.kind, ea.role, ea.epoch = KindNPC, roleOwned, 1
	ea.state.Pos = [3]float32{-990, 0, -700}
	ea.np = &npcSlot{rng: 12345, speed: 3}
	a.retarget(ea.np)
	ea.np.turn(-math.Pi / 2) // towards the world's edge, 10 m away: it bounces
	ea.np.turnIn = 200
	now := time.Duration(0)
	for range 5 { // a few ticks on its own first
		now += a.period
		nt := a.npcTick()
		a.stepNPC(&nt, int(sa), ea)
	}
	b.acquire(now, handoff.Acquired{State: a.snapshot(sa), Epoch: 2, From: a.ID()})
	sb, ok := b.byID.get(ea.id)
	if !ok {
		t.Fatal("not acquired")
	}
	eb := &b.ents[sb]
	ref, refNPC := *ea, *ea.np
	ref.np = &refNPC // its own wanderer state, not ea's
	bounced := false
	for tick := range 1200 {
		nt, ntb := a.npcTick(), b.npcTick()
		a.stepNPC(&nt, int(sa), ea)
		b.stepNPC(&ntb, int(sb), eb)
		stepNPCRef(a, &nt, &ref)
		if eb.state != ea.state || eb.np.heading != ea.np.heading || ea.state != ref.state || ea.np.heading != ref.np.heading {
			t.Fatalf("tick %d: acquired %+v heading %g, original %+v heading %g, by the reference %+v heading %g",
				tick, eb.state, eb.np.heading, ea.state, ea.np.heading, ref.state, ref.np.heading)
		}
		bounced = bounced || ea.state.Vel[0] > 0 && tick < 150
	}
	if !bounced {
		t.Fatal("the wanderer did not bounce off the edge")
	}
}
