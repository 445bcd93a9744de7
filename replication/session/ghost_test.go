package session_test

import (
	"math"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/session"
)

// ghostZone moves n entities on circles and feeds a ghost table one view per
// 50 ms tick, as the zone and the ghost manager would.
type ghostZone struct {
	reg    *ghost.Registry
	player *ghost.Class
	npc    *ghost.Class
	tab    *ghost.Table
	n      int
	last   time.Duration
	view   []ghost.ViewEntry
	frozen bool // stop moving: the mirror must converge to the last view
}

func newGhostZone(t *testing.T, reg *ghost.Registry, n int) *ghostZone {
	t.Helper()
	tab, err := ghost.NewTable(reg, ghost.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	pc, _ := reg.Lookup(ghost.PlayerClassID)
	nc, _ := reg.Lookup(ghost.NPCClassID)
	return &ghostZone{reg: reg, player: pc, npc: nc, tab: tab, n: n, last: -time.Hour}
}

func (z *ghostZone) tick(t *testing.T, now time.Duration) {
	if now-z.last < 50*time.Millisecond {
		return
	}
	z.last = now
	if z.frozen && z.view != nil {
		return
	}
	z.view = z.view[:0]
	sec := now.Seconds()
	for i := 0; i < z.n; i++ {
		c := z.npc
		if i%4 == 0 {
			c = z.player
		}
		r := 10 + float64(i)
		a := sec*0.5 + float64(i)
		z.view = append(z.view, ghost.ViewEntry{
			Entity: uint64(1000 + i), Class: c, Priority: 1,
			State: ghost.State{Pos: [3]float64{r * math.Cos(a), 0, r * math.Sin(a)}, Yaw: a, Health: 100},
		})
	}
	if err := z.tab.SetView(now, z.view); err != nil {
		t.Fatal(err)
	}
}

// checkMirror asserts the client holds exactly the view's entities at the
// view's (quantized) positions.
func (z *ghostZone) checkMirror(t *testing.T, c *session.Client) {
	t.Helper()
	m := c.Mirror()
	if m.Len() != len(z.view) {
		t.Fatalf("client holds %d ghosts, view has %d", m.Len(), len(z.view))
	}
	tol := z.reg.PosMaxError() * 1.01
	for _, e := range z.view {
		g, ok := m.ByEntity(e.Entity)
		if !ok {
			t.Fatalf("entity %d missing on the client", e.Entity)
		}
		want := z.reg.QuantizePos(e.State.Pos)
		for k := 0; k < 3; k++ {
			if d := math.Abs(g.State.Pos[k] - want[k]); d > tol {
				t.Fatalf("entity %d axis %d at %v, want %v", e.Entity, k, g.State.Pos[k], want[k])
			}
		}
	}
}

func TestGhostsFromTableInTheConnection(t *testing.T) {
	reg := session.DefaultRegistry()
	w := newWorld(t, withLink(impaired, impaired), withClientConfig(func(c *session.ClientConfig) { c.Registry = reg }))
	z := newGhostZone(t, reg, 40)
	w.ghosts = z.tab
	w.onGhostFate = z.tab.OnFate
	w.connect(5 * time.Second)
	views := make([]session.GhostView, 0, 64)
	for w.now < 20*time.Second {
		z.tick(t, w.now)
		w.step(5 * time.Millisecond)
		views = w.cli.View(w.now, views[:0])
	}
	if len(views) != 40 {
		t.Fatalf("view holds %d ghosts", len(views))
	}
	z.frozen = true
	for end := w.now + 5*time.Second; w.now < end; {
		z.tick(t, w.now)
		w.step(5 * time.Millisecond)
	}
	z.checkMirror(t, w.cli)
	ts := z.tab.Stats()
	if ts.UnknownFates != 0 || z.tab.InFlight() != 0 {
		t.Fatalf("ghost fates out of step: %d unknown, %d in flight", ts.UnknownFates, z.tab.InFlight())
	}
	if ts.UpdatesLost == 0 {
		t.Fatal("no ghost update was lost on a 20 %-loss link: the fates are not wired")
	}
}

func TestGhostsThroughRelay(t *testing.T) {
	reg := session.DefaultRegistry()
	w := newWorld(t, withLink(impaired, impaired), withClientConfig(func(c *session.ClientConfig) { c.Registry = reg }))
	z := newGhostZone(t, reg, 40)
	relay, err := session.NewGhostRelay(session.MaxPacketSize, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.ghosts = relay
	// The "ghost manager": packs under its own sequence numbers into its own
	// buffer, sized by the server's budget hint; takes fates through the relay.
	var g uint64
	buf := make([]byte, session.MaxPacketSize)
	var gw bitstream.Writer
	pack := func() {
		if relay.Pending() || w.srv == nil || !z.tab.Pending() {
			return
		}
		bits := w.srv.GhostBudget(w.now)
		gw.Reset(buf[:bits/8])
		g++
		n, err := z.tab.Write(&gw, g, w.now)
		if err != nil {
			t.Fatal(err)
		}
		if err := relay.Offer(g, n, gw.Bytes(), gw.BitLen(), w.now); err != nil {
			t.Fatal(err)
		}
	}
	w.onGhostFate = func(f notify.Fate) {
		relay.OnFate(f)
		for _, gf := range relay.PopFates(nil) {
			z.tab.OnFate(gf)
		}
	}
	w.connect(5 * time.Second)
	for w.now < 20*time.Second {
		z.tick(t, w.now)
		pack()
		w.step(5 * time.Millisecond)
	}
	z.frozen = true
	for end := w.now + 5*time.Second; w.now < end; {
		z.tick(t, w.now)
		pack()
		w.step(5 * time.Millisecond)
	}
	z.checkMirror(t, w.cli)
	ts := z.tab.Stats()
	if ts.UnknownFates != 0 || z.tab.InFlight() != 0 || relay.Lost() != 0 {
		t.Fatalf("fates out of step: %d unknown, %d in flight, %d lost", ts.UnknownFates, z.tab.InFlight(), relay.Lost())
	}
	if ts.UpdatesLost == 0 {
		t.Fatal("no ghost update was lost on a 20 %-loss link: the fates are not wired")
	}
}
