package conn

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestPumpAppliesFatesBeforeItsWrite: the ghost fates of every datagram a
// connection received wait in its session until a send is due, and are
// applied before that send's packet is written — also those of datagrams
// handled in the same round, before the pump. Each step's datagrams come
// in the round of the zone's tick (view and Control): written before the
// fates are applied, the second tick's packet would carry no ghosts (the
// creates not known delivered, their updates wait). Then the client is
// silent for 15 steps (its datagrams held back) while each tick sends a
// ghost packet, and its 16 steps of datagrams come in one round with the
// tick's: they resolve 16 ghost packets, as many as the session lets
// wait (notify's MaxInFlight); written before they are applied, that
// tick's packet would carry no ghosts either (GhostStalls).
func TestPumpAppliesFatesBeforeItsWrite(t *testing.T) {
	const steps, quiet, back = 40, 10, 25 // datagrams of steps [quiet, back) come at step back
	x := recordTicking(t, steps)
	s, cs := benchShardWith(t, x, 1, func(c *Config) { c.Session.Notify.MaxInFlight = notify.MinMaxInFlight })
	c := cs[0]
	c.viewsFlow = true
	g := newGhostWorld(t, s.pool.cfg.Registry, 1, 20, 200)
	var ctl move.ControlState
	var held [][]byte
	for i := range steps {
		now := time.Duration(i+1) * benchStep
		held = append(held, x.steps[i]...)
		if i < quiet || i >= back {
			for _, p := range held {
				postClient(s, c, p)
			}
			held = held[:0]
		}
		g.tick(now, benchStep)
		ctl.Pos[0] += 0.2
		m := c.views.NewControl()
		m.Player, m.Tick, m.View = c.player, uint64(i+1), g.publish(c, 0, uint64(i+1))
		m.LastApplied, m.State = c.srv.LastApplied(), ctl
		s.post(c, m)
		before := c.gm.Stats()
		s.round(now)
		after := c.gm.Stats()
		if after.Sections != before.Sections+1 {
			t.Fatalf("step %d: %d ghost sections written, want the tick's one", i, after.Sections-before.Sections)
		}
		if i == back && after.Fates-before.Fates < uint64(notify.MinMaxInFlight) {
			t.Fatalf("step %d: %d fates applied, want the %d the held datagrams resolved", i, after.Fates-before.Fates, notify.MinMaxInFlight)
		}
		if c.srv.GhostFatesWaiting() {
			t.Fatalf("step %d: fates still wait in the session after a pump that sent", i)
		}
	}
	if st := c.srv.Stats(); st.GhostStalls != 0 || st.Rejected() != 0 {
		t.Fatalf("%d packets without ghosts for want of room, %d datagrams rejected; want 0", st.GhostStalls, st.Rejected())
	}
}

// TestPumpAppliesViewBeforeItsWrite: a view taken when its nudge comes
// (ViewReady, handled in the round before any connection is pumped) is
// applied before that round's send: with nothing else to say, the
// packet the open send slot lets go carries the view's ghosts, not an ack
// alone.
func TestPumpAppliesViewBeforeItsWrite(t *testing.T) {
	const steps = 12
	x := record(t, steps)
	s, cs := benchShard(t, x, 1)
	c := cs[0]
	g := newGhostWorld(t, s.pool.cfg.Registry, 1, 20, 200)
	var ctl move.ControlState
	var now time.Duration
	for i := range steps {
		now = time.Duration(i+1) * benchStep
		for _, p := range x.steps[i] {
			feed(s, c, p, now)
		}
		ctl.Pos[0] += 0.2
		control(s, c, now, ctl)
	}
	if n := c.gm.Table().Len(); n != 0 {
		t.Fatalf("%d ghosts before any view", n)
	}
	// Two slots after the last tick's packet: the slot open, ghosts no
	// longer held for a tick's packet (session: holdUntil), and no
	// control state new.
	s.flush()
	now += 2 * benchStep
	g.tick(now, benchStep)
	if !g.publish(c, 0, 1) {
		t.Fatal("the slot asks for no nudge")
	}
	s.post(c, msg.ViewReadyMsg)
	sent := s.pool.sent.Load()
	before := c.gm.Stats()
	s.round(now)
	if after := c.gm.Stats(); after.Sections != before.Sections+1 || s.pool.sent.Load() != sent+1 {
		t.Fatalf("the round sent %d datagrams, %d ghost sections; want one, with the view's ghosts",
			s.pool.sent.Load()-sent, after.Sections-before.Sections)
	}
	if n := c.gm.Table().Len(); n != 20 {
		t.Fatalf("%d ghosts after the view, want 20", n)
	}
}

// TestWaitingFatesKeepTheDeadline: fates left waiting in the session (no
// send due) must not put the connection's next pump later than it would
// be with them applied: a fate can make the table pending (a create known
// delivered lets its ghost's updates go; a lost record is sent again), and
// those ghosts go at the next send slot, not at the keepalive. Two
// connections replay the same client — acks alone (no moves: the session
// does not count it as streaming, so nothing else brings the slot), two of
// the server's datagrams lost — with the same views; after each round of
// the client's datagrams, the second one's fates are applied at once, and
// the first one's deadline must be no later than the second's.
func TestWaitingFatesKeepTheDeadline(t *testing.T) {
	const steps, lost = 40, 12
	x := recordWith(t, steps, false, func(i int) bool { return i == lost || i == lost+1 })
	s, cs := benchShard(t, x, 2)
	a, b := cs[0], cs[1]
	g := newGhostWorld(t, s.pool.cfg.Registry, 1, 20, 200)
	var ctl move.ControlState
	checked, bit := 0, 0
	for i := range steps {
		now := time.Duration(i+1) * benchStep
		for _, c := range cs {
			for _, p := range x.steps[i] {
				postClient(s, c, p)
			}
		}
		s.round(now)
		if a.srv.GhostFatesWaiting() {
			b.applyFates()
			want := max(b.srv.NextDeadlineFor(now, b.gm), now+time.Microsecond)
			checked++
			if a.srv.NextDeadlineFor(now, a.gm) > want {
				bit++ // the table alone (fates not applied) would have put it later
			}
			if a.hidx < 0 || s.heap.deadline(a) > want {
				var at time.Duration
				if a.hidx >= 0 {
					at = s.heap.deadline(a)
				}
				t.Fatalf("step %d: with fates waiting the next pump is at %v (in the heap: %v), want ≤ %v as with them applied",
					i, at, a.hidx >= 0, want)
			}
		}
		now += benchStep / 3
		g.tick(now, benchStep)
		ctl.Pos[0] += 0.2
		for _, c := range cs {
			m := c.views.NewControl()
			m.Player, m.Tick, m.View = c.player, uint64(i+1), g.publish(c, 0, uint64(i+1))
			m.LastApplied, m.State, m.Force = c.srv.LastApplied(), ctl, true
			s.post(c, m)
		}
		s.round(now)
	}
	if a.gm.Stats().Table.UpdatesLost == 0 {
		t.Fatal("no ghost record was lost: the replay did not lose the datagram")
	}
	if checked == 0 || bit == 0 {
		t.Fatalf("fates waited after %d rounds, %d of them with the table alone giving a later deadline: the check did not bite", checked, bit)
	}
	t.Logf("%d rounds left fates waiting; in %d the table alone would have given a later deadline", checked, bit)
}
