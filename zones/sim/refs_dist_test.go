package sim

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/interest"
)

// TestViewRefsFarTestAtViewerNow holds AppendViewRefs to a reference
// built the long way — each member's priority from AppendPriorities, its
// far test from its held record and the viewer's position now,
// ghost.WeightedViewRef — in a crowd with far members held, with and
// without players teleported between Step and their views. The far test
// reuses the distance the priority was computed at (heldRefsFastDist) only
// where that is the same distance: a viewer teleported after its set's
// Update is tested where it is now, as before.
func TestViewRefsFarTestAtViewerNow(t *testing.T) {
	for _, teleport := range []bool{false, true} {
		z, now := crowdZoneWith(t, 250, 380, nil)
		var mv []move.Move
		var refs []ghost.ViewRef
		var prio []float32
		r := z.Rect()
		fast, moved := 0, 0
		for tick := range 30 {
			now += 50 * time.Millisecond
			crowdInput(z, 250, now, tick, mv)
			out := z.Step(now)
			if teleport {
				for k := range 20 {
					id := uint64((tick*20+k)%250) + 1
					x := float32(r.Min[0] + 50 + float64((tick*37+k*91)%380))
					zz := float32(r.Min[1] + 50 + float64((tick*53+k*29)%380))
					if err := z.Teleport(now, id, [3]float32{x, 0, zz}); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, v := range out.Views {
				refs = z.AppendViewRefs(refs[:0], v)
				e := &z.ents[v.Slot()]
				set := &e.p().set
				if pv, ok := z.track.Viewer(set); ok {
					if x, zz := pv.At(); x == e.state.Pos[0] && zz == e.state.Pos[2] {
						fast++
					} else {
						moved++
					}
				}
				prio = z.track.AppendPriorities(prio[:0], set)
				px, pz := e.state.Pos[0], e.state.Pos[2]
				for i, en := range set.Entries() {
					sl := en.Slot()
					idx := uint32(sl)
					if h := z.held[sl].xz; (h[0]-px)*(h[0]-px)+(h[1]-pz)*(h[1]-pz) > z.far2 {
						idx += uint32(z.snapN)
					}
					want := ghost.WeightedViewRef(idx, z.refW[z.kinds[sl]%interest.MaxKinds], prio[i])
					if refs[i] != want {
						t.Fatalf("teleport %v, tick %d, player %d, member %d: ref %#x, want %#x", teleport, tick, v.Entity, i, refs[i], want)
					}
				}
			}
		}
		if fast == 0 || teleport && moved == 0 {
			t.Fatalf("teleport %v: %d views at their Update's position, %d moved since: a case not exercised", teleport, fast, moved)
		}
	}
}
