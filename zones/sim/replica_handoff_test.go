package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/world"
)

// A handoff whose Commit takes longer than ReplicaTTL to arrive (across
// processes it waits for the player record's write, which took over 2 s
// on a starved host) keeps the entity in view on both sides: the old
// owner, which no longer owns it and whose new owner cannot list it yet,
// and the new owner, which reserved it and hears of it from nobody. Both
// zones dropped it (the old owner after the grace, the new one after
// ReplicaTTL), and every viewer's ghost of it was killed and re-created
// under a new ghost id when the Commit came: a player who never left
// range popped out and back in (TestClusterThreeNodesAcrossBorders, 29–94
// ghost id changes a run on a loaded host).
func TestSlowCommitKeepsReplicasInView(t *testing.T) {
	h := newHarness(t, world.Default(), 0, nil)
	still := func(p *player, tick int) (int8, uint16) { return 0, 0 }
	h.join(1, -5, -300, still)  // in x0z0, 5 m from x1z0: handed over
	h.join(2, 30, -300, still)  // in x1z0, watching it
	h.join(3, -30, -300, still) // in x0z0, watching it
	h.tick(2)
	src, dst := h.zones["x0z0"], h.zones["x1z0"]
	slotOf := func(z *Zone) (int32, uint8) {
		s, ok := z.byID.get(1)
		if !ok {
			return -1, 0
		}
		return s, z.ents[s].gen
	}
	dstSlot, dstGen := slotOf(dst)
	if e, ok := dst.Entity(1); !ok || !e.Replica {
		t.Fatalf("x1z0 has no replica of player 1: %+v", e)
	}
	srcSlot, srcGen := slotOf(src)

	if err := src.Teleport(h.now, 1, [3]float32{20, 0, -300}); err != nil { // into x1z0
		t.Fatal(err)
	}
	offer := src.Pending()
	dst.Handoff(h.now, offer[0]) // accepted: a reservation
	src.Handoff(h.now, dst.Pending()[0])
	if ph, _, _ := src.Handoffs().Status(1); ph != handoff.PhaseCommitting {
		t.Fatalf("player 1 is %v at x0z0, want committing", ph)
	}
	released := h.now

	// The two zones tick and trade batches; every handoff message but
	// the Commit (first copy and resends) gets through. The Commit
	// comes 3 × ReplicaTTL later, its newest copy, as the bridge hands
	// it over once the record is written.
	var commit handoff.Msg
	for _, m := range src.Pending() {
		if m.Kind == handoff.KindCommit {
			commit = m
		}
	}
	hc := src.Handoffs().Config()
	delay := 3 * src.Config().ReplicaTTL
	if delay+hc.RetryInterval >= min(hc.CommitGiveUp, hc.MaxAge) {
		t.Fatalf("the Commit's delay %v would outlast the handoff machine's timers %+v", delay, hc)
	}
	var view []ghost.ViewEntry
	step := func(z *Zone) ([]ReplicaBatch, []handoff.Msg) {
		out := z.Step(h.now)
		for _, v := range out.Views {
			if v.Entity != 2 && v.Entity != 3 {
				continue
			}
			view = z.AppendView(view[:0], v)
			if !slices.ContainsFunc(view, func(e ghost.ViewEntry) bool { return e.Entity == 1 }) {
				t.Fatalf("%v after the release: player %d's view in %s lost player 1 (its Commit due at %v)",
					h.now-released, v.Entity, z.ID(), delay)
			}
		}
		return slices.Clone(out.Replicas), slices.Clone(out.Send)
	}
	due := commit.Sent + delay
	acked := false
	for end := due + 2*src.Config().ReplicaTTL; h.now < end; {
		h.now += h.period
		var msgs []handoff.Msg
		srcB, srcM := step(src)
		dstB, dstM := step(dst)
		msgs = append(append(msgs, srcM...), dstM...)
		for i := range srcB {
			if srcB[i].To == "x1z0" {
				dst.Replicas(h.now, &srcB[i])
			}
		}
		for i := range dstB {
			if dstB[i].To == "x0z0" {
				src.Replicas(h.now, &dstB[i])
			}
		}
		for len(msgs) > 0 {
			m := msgs[0]
			msgs = msgs[1:]
			if m.Kind == handoff.KindCommit && m.Entity == 1 {
				commit = m // the newest copy
				if h.now < due {
					continue
				}
			}
			if m.Kind == handoff.KindCommitAck && m.Entity == 1 {
				acked = true
			}
			z := h.zones[m.To]
			if z == nil { // a Route to a connection
				continue
			}
			z.Handoff(h.now, m)
			msgs = append(msgs, z.Pending()...)
		}
	}
	if e, ok := dst.Entity(1); !ok || !e.Owned || !acked {
		t.Fatalf("player 1 not owned by x1z0 (Commit acknowledged: %v): %+v", acked, e)
	}
	if e, ok := src.Entity(1); !ok || !e.Replica || e.Owner != "x1z0" {
		t.Fatalf("x0z0 does not show player 1 as x1z0's replica: %+v", e)
	}
	// Same slots, same generations: no viewer's interest set changed.
	if s, g := slotOf(dst); s != dstSlot || g != dstGen {
		t.Fatalf("x1z0 re-created player 1: slot %d gen %d, was %d gen %d", s, g, dstSlot, dstGen)
	}
	if s, g := slotOf(src); s != srcSlot || g != srcGen {
		t.Fatalf("x0z0 re-created player 1: slot %d gen %d, was %d gen %d", s, g, srcSlot, srcGen)
	}
	for _, z := range []*Zone{src, dst} {
		if st := z.Stats(); st.ReplicasExpired != 0 || st.ReplicasHeldDropped != 0 {
			t.Fatalf("%s dropped replicas: expired %d, held and dropped %d", z.ID(), st.ReplicasExpired, st.ReplicasHeldDropped)
		}
	}
}

// The holds are bounded: a Commit that never comes (the old owner's node
// died mid-handoff) leaves the target's replica only until no copy of it
// could still be taken, and the old owner's once it stops resending.
func TestLostCommitReplicasExpire(t *testing.T) {
	h := newHarness(t, world.Default(), 0, nil)
	still := func(p *player, tick int) (int8, uint16) { return 0, 0 }
	h.join(1, -5, -300, still)
	h.join(2, 30, -300, still)
	h.tick(2)
	src, dst := h.zones["x0z0"], h.zones["x1z0"]
	if err := src.Teleport(h.now, 1, [3]float32{20, 0, -300}); err != nil {
		t.Fatal(err)
	}
	dst.Handoff(h.now, src.Pending()[0])
	src.Handoff(h.now, dst.Pending()[0])
	released := h.now
	hc := src.Handoffs().Config()
	ttl := src.Config().ReplicaTTL
	grace := time.Duration(src.Config().HandoffGrace) * h.period
	var srcGone, dstGone time.Duration
	for h.now < released+ttl+hc.CommitGiveUp+hc.MaxAge+2*ttl {
		h.now += h.period
		srcOut := src.Step(h.now) // its Commits go nowhere
		for i := range srcOut.Replicas {
			if srcOut.Replicas[i].To == "x1z0" {
				dst.Replicas(h.now, &srcOut.Replicas[i])
			}
		}
		dstOut := dst.Step(h.now)
		for i := range dstOut.Replicas {
			if dstOut.Replicas[i].To == "x0z0" {
				src.Replicas(h.now, &dstOut.Replicas[i])
			}
		}
		if _, ok := src.Entity(1); !ok && srcGone == 0 {
			srcGone = h.now - released
		}
		if _, ok := dst.Entity(1); !ok && dstGone == 0 {
			dstGone = h.now - released
		}
	}
	if srcGone == 0 || srcGone > hc.CommitGiveUp+grace+ttl {
		t.Errorf("x0z0 kept its replica of player 1 for %v after its Commit went unanswered (0: never dropped); CommitGiveUp %v", srcGone, hc.CommitGiveUp)
	}
	if dstGone == 0 || dstGone > ttl+hc.CommitGiveUp+hc.MaxAge+2*h.period {
		t.Errorf("x1z0 kept its reserved replica of player 1 for %v without a Commit (0: never dropped)", dstGone)
	}
	if srcGone < hc.CommitGiveUp || dstGone < ttl+hc.CommitGiveUp+hc.MaxAge {
		t.Errorf("dropped before the Commit could no longer come: x0z0 after %v, x1z0 after %v", srcGone, dstGone)
	}
}
