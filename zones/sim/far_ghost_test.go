package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// ghostRecords runs a viewer, a near and a far walker for ticks ticks with
// tweak's config and returns, per tick, how many ghost records one
// connection's table wrote for each walker: the far one through a table
// whose views hold only it, the near one through another (each view is the
// viewer's, filtered to one entity; one packet a tick, every packet
// delivered).
func ghostRecords(t *testing.T, ticks int, tweak func(*Config), level int) (near, far []int) {
	t.Helper()
	z := snapZone(t, tweak)
	reg := z.cfg.Classes[KindPlayer].Registry()
	var err error
	z.Join(0, 1, "c1", "viewer", [3]float32{-500, 0, -500}, 0)
	z.Join(0, 2, "c2", "near", [3]float32{-490, 0, -500}, 0)
	z.Join(0, 3, "c3", "far", [3]float32{-420, 0, -500}, 0)
	z.SetLevel(level)
	tabs := [2]*ghost.Table{}
	for i := range tabs {
		if tabs[i], err = ghost.NewTable(reg, ghost.DefaultConfig()); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 1200)
	seq := uint64(100)
	now := time.Duration(0)
	var held []*ghost.Snapshot
	for i := range ticks {
		now += 50 * time.Millisecond
		z.Input(now, 2, []move.Move{fwd(uint64(i+1), 0)})
		z.Input(now, 3, []move.Move{fwd(uint64(i+1), 0)})
		out := z.Step(now)
		for _, v := range out.Views {
			if v.Entity != 1 {
				continue
			}
			refs := z.AppendViewRefs(nil, v)
			snap := z.Snapshot()
			for k, want := range [2]uint64{2, 3} {
				var one []ghost.ViewRef
				for _, r := range refs {
					if e, _, _ := snap.Entry(int(r.Index())); e == want {
						one = append(one, r)
					}
				}
				if len(one) != 1 {
					t.Fatalf("tick %d: entity %d in view %d times", i, want, len(one))
				}
				if err := tabs[k].SetSnapshotView(now, snap, one); err != nil {
					t.Fatal(err)
				}
				before := tabs[k].Stats()
				seq++
				w := bitstream.NewWriter(buf)
				if _, err := tabs[k].Write(w, seq, now); err != nil {
					t.Fatal(err)
				}
				tabs[k].OnFate(notify.Fate{Seq: seq, Delivered: true, SentAt: now})
				after := tabs[k].Stats()
				n := int(after.Updates + after.Creates - before.Updates - before.Creates)
				if k == 0 {
					near = append(near, n)
				} else {
					far = append(far, n)
				}
			}
			// The tables read snap until their next view.
			snap.Retain()
			held = append(held, snap)
		}
		for len(held) > 1 {
			held[0].Release()
			held = held[1:]
		}
	}
	return near, far
}

// snapZone is oneZone with its classes registered (so it has snapshots
// and views by reference) and tweak, if not nil, applied.
func snapZone(t *testing.T, tweak func(*Config)) *Zone {
	t.Helper()
	reg, err := ghost.NewRegistry(ghost.DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	pc, nc := ghost.PlayerClass(nil), ghost.NPCClass(nil)
	if err := reg.Register(pc, nc); err != nil {
		t.Fatal(err)
	}
	return oneZone(t, func(c *Config) {
		c.Classes[KindPlayer], c.Classes[KindNPC] = pc, nc
		if tweak != nil {
			tweak(c)
		}
	})
}

// refView is the view of v by reference, resolved to entries (what a ghost
// table of this process reads).
func refView(z *Zone, v ViewRef) []ghost.ViewEntry {
	refs := z.AppendViewRefs(nil, v)
	return z.Snapshot().AppendEntries(nil, refs)
}

func sum(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}

// A far member served a held state costs its connection no ghost record on
// the ticks its state is held (the table takes an unchanged held entry as
// nothing to send, not as a stop); a near member costs one every tick.
func TestHeldFarMemberWritesNoRecord(t *testing.T) {
	const ticks = 40
	for _, tc := range []struct {
		name     string
		farEvery int
		level    int
		every    int // far refresh interval
	}{
		{"default: far members every 2nd tick", 0, 0, 2},
		{"FarEvery 1: every tick", 1, 0, 1},
		{"FarEvery 3", 3, 0, 3},
		{"default at overload level 1: every 4th tick", 0, 1, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			near, far := ghostRecords(t, ticks, func(c *Config) { c.FarEvery = tc.farEvery }, tc.level)
			if sum(near) != ticks {
				t.Fatalf("near walker: records by tick %v, want one a tick", near)
			}
			// The create on the first tick, then a record on each refresh:
			// every every-th tick, none between.
			last := -1
			for i, n := range far {
				switch {
				case i == 0: // the create
				case n > 1:
					t.Fatalf("far walker: %d records at tick %d (all %v)", n, i, far)
				case n == 1 && last >= 0 && i-last != tc.every:
					t.Fatalf("far walker: records at ticks %d and %d, want every %d (all %v)", last, i, tc.every, far)
				case n == 1:
					last = i
				}
			}
			if want := ticks / tc.every; sum(far) < want-1 || sum(far) > want+1 {
				t.Fatalf("far walker: %d records in %d ticks, want ≈ %d (%v)", sum(far), ticks, want, far)
			}
		})
	}
}

// walkViews steps a zone with a viewer, a near and a far walker for ticks
// ticks and returns the position along z (where the walkers walk) that the
// viewer's view by reference showed of each walker, tick by tick.
func walkViews(t *testing.T, z *Zone, ticks int) (near, far []float64) {
	t.Helper()
	z.Join(0, 1, "c1", "viewer", [3]float32{-500, 0, -500}, 0)
	z.Join(0, 2, "c2", "near", [3]float32{-490, 0, -500}, 0)
	z.Join(0, 3, "c3", "far", [3]float32{-420, 0, -500}, 0)
	now := time.Duration(0)
	for i := range ticks {
		now += 50 * time.Millisecond
		z.Input(now, 2, []move.Move{fwd(uint64(i+1), 0)})
		z.Input(now, 3, []move.Move{fwd(uint64(i+1), 0)})
		out := z.Step(now)
		for _, v := range out.Views {
			if v.Entity != 1 {
				continue
			}
			for _, e := range refView(z, v) {
				switch e.Entity {
				case 2:
					near = append(near, e.State.Pos[2])
				case 3:
					far = append(far, e.State.Pos[2])
				}
			}
		}
	}
	return near, far
}

// By default a far member's state reaches the view every FarEvery-th tick
// (held between: at most FarEvery-1 ticks old), a near member's every tick.
func TestFarMembersRefreshEveryFarEvery(t *testing.T) {
	for _, every := range []int{2, 3, 5} {
		t.Run(fmt.Sprintf("FarEvery=%d", every), func(t *testing.T) {
			const ticks = 30
			z := snapZone(t, func(c *Config) { c.FarEvery = every })
			near, far := walkViews(t, z, ticks)
			if distinct(near) != ticks {
				t.Fatalf("near walker: %d states in %d ticks, want one a tick: %v", distinct(near), ticks, near)
			}
			// Every refresh shows a new position; a run of equal ones is
			// the held state, at most every ticks long (the first tick
			// takes it afresh).
			run := 1
			for i := 1; i < len(far); i++ {
				if far[i] != far[i-1] {
					run = 1
					continue
				}
				if run++; run > every {
					t.Fatalf("far walker held %d ticks at tick %d, want ≤ %d: %v", run, i, every, far)
				}
			}
			if n, want := distinct(far), ticks/every; n < want || n > want+2 {
				t.Fatalf("far walker: %d states in %d ticks, want ≈ %d: %v", n, ticks, want, far)
			}
			if z.Stats().HeldEntries == 0 {
				t.Fatal("held entries not counted")
			}
		})
	}
}

// FarEvery 1 at level 0 serves every member its state of the tick, as a
// zone did before far members were held by default: no held states kept,
// a snapshot of one entry a slot, every reference its member's slot.
func TestFarEveryOneServesEveryTick(t *testing.T) {
	z := snapZone(t, func(c *Config) {
		c.FarEvery = 1
		c.NPCs = 40
	})
	near, far := walkViews(t, z, 20)
	if distinct(near) != 20 || distinct(far) != 20 {
		t.Fatalf("a state a tick: near %v, far %v", near, far)
	}
	for tick := range 10 {
		out := z.Step(time.Duration(21+tick) * 50 * time.Millisecond)
		if z.held != nil {
			t.Fatal("held states kept at FarEvery 1")
		}
		for _, v := range out.Views {
			entries := z.AppendView(nil, v)
			for _, e := range entries {
				s := z.byID.at(e.Entity)
				if want := ghostState(&z.ents[s]); e.State != want {
					t.Fatalf("entity %d: view state %+v, want the tick's %+v", e.Entity, e.State, want)
				}
			}
			refs := z.AppendViewRefs(nil, v)
			if z.Snapshot().Len() != len(z.ents) || len(refs) != len(entries) {
				t.Fatalf("snapshot of %d entries for %d slots, %d refs for %d entries", z.Snapshot().Len(), len(z.ents), len(refs), len(entries))
			}
			for i, r := range refs {
				if id, _, _ := z.Snapshot().Entry(int(r.Index())); id != entries[i].Entity {
					t.Fatalf("ref %d names entity %d, want %d", i, id, entries[i].Entity)
				}
			}
		}
	}
	if z.Stats().HeldEntries != 0 {
		t.Fatalf("%d held entries at FarEvery 1", z.Stats().HeldEntries)
	}
}

// A slot freed and taken by another entity never shows the previous
// occupant's held state (whichever tick of the slot's refresh cycle the
// new one arrives on).
func TestHeldStateNotInheritedBySlot(t *testing.T) {
	for extra := range 2 {
		z := snapZone(t, nil)
		z.Join(0, 1, "c1", "viewer", [3]float32{-500, 0, -500}, 0)
		z.Join(0, 2, "c2", "gone", [3]float32{-420, 0, -500}, 0)
		now := time.Duration(0)
		for range 3 + extra {
			now += 50 * time.Millisecond
			z.Step(now)
		}
		if err := z.Leave(2); err != nil {
			t.Fatal(err)
		}
		now += 50 * time.Millisecond
		z.Step(now)
		// The new entity takes the freed slot, far from the viewer.
		z.Join(now, 3, "c3", "new", [3]float32{-430, 0, -520}, 0)
		if z.byID.at(3) != 1 {
			t.Fatalf("the new entity took slot %d, want the freed 1", z.byID.at(3))
		}
		for range 4 {
			now += 50 * time.Millisecond
			out := z.Step(now)
			for _, v := range out.Views {
				if v.Entity != 1 {
					continue
				}
				for _, e := range refView(z, v) {
					if e.Entity == 3 && (e.State.Pos[0] != -430 || e.State.Pos[2] != -520) {
						t.Fatalf("new entity shown at %v (the slot's previous occupant's state)", e.State.Pos)
					}
				}
			}
		}
	}
}

// Views as entries (AppendView: for a connection in another process, whose
// ghost table cannot tell a held state from a stop) never hold far
// members: every member gets the tick's state, at any level, while the
// views by reference of the same tick hold them.
func TestAppendViewNeverHolds(t *testing.T) {
	for _, level := range []int{0, 2} {
		z := snapZone(t, nil) // FarEvery 2
		z.Join(0, 1, "c1", "viewer", [3]float32{-500, 0, -500}, 0)
		z.Join(0, 3, "c3", "far", [3]float32{-420, 0, -500}, 0)
		z.SetLevel(level)
		now := time.Duration(0)
		var byRef, byEntry []float64
		for i := range 10 {
			now += 50 * time.Millisecond
			z.Input(now, 3, []move.Move{fwd(uint64(i+1), 0)})
			out := z.Step(now)
			for _, v := range out.Views {
				if v.Entity != 1 {
					continue
				}
				for _, e := range z.AppendView(nil, v) {
					if want := ghostState(&z.ents[z.byID.at(e.Entity)]); e.State != want {
						t.Fatalf("level %d tick %d: entry view of %d: %+v, want the tick's %+v", level, i, e.Entity, e.State, want)
					}
					byEntry = append(byEntry, e.State.Pos[2])
				}
				for _, e := range refView(z, v) {
					byRef = append(byRef, e.State.Pos[2])
				}
			}
		}
		// (At level 2 interest is recomputed every 2nd tick: the walker
		// may enter the view a tick late.)
		if len(byEntry) < 9 || distinct(byEntry) != len(byEntry) || distinct(byRef) > len(byRef)/2+1 {
			t.Fatalf("level %d far walker: %d states by entry in %d views (want one a view), %d by reference in %d (want ≤ half)", level, distinct(byEntry), len(byEntry), distinct(byRef), len(byRef))
		}
	}
}

// A far member's held entry lives in the snapshots: a refresh due on a
// tick that built none (no view by reference that tick) happens in the
// next one built, so the held state is never older than FarEvery-1 ticks
// when shown.
func TestFarMemberRefreshNotLostWithoutSnapshot(t *testing.T) {
	const every = 4
	for skip := range every { // the ticks without views start at 10 + skip
		z := snapZone(t, func(c *Config) { c.FarEvery = every })
		z.Join(0, 1, "c1", "viewer", [3]float32{-500, 0, -500}, 0)
		z.Join(0, 3, "c3", "far", [3]float32{-420, 0, -500}, 0)
		now := time.Duration(0)
		var at []float64 // the far walker's true position, tick by tick
		for i := range 24 {
			now += 50 * time.Millisecond
			z.Input(now, 3, []move.Move{fwd(uint64(i+1), 0)})
			out := z.Step(now)
			e, _ := z.Entity(3)
			// As the snapshot keeps it: quantized (it keeps codes, not floats).
			at = append(at, z.cfg.Classes[KindPlayer].Registry().QuantizePos([3]float64{0, 0, float64(e.State.Pos[2])})[2])
			if i >= 10+skip && i < 10+skip+every { // no views: no snapshot
				continue
			}
			for _, v := range out.Views {
				if v.Entity != 1 {
					continue
				}
				for _, e := range refView(z, v) {
					if e.Entity != 3 {
						continue
					}
					age := -1
					for k := i; k >= 0; k-- {
						if at[k] == e.State.Pos[2] {
							age = i - k
							break
						}
					}
					if age < 0 || age > every-1 {
						t.Fatalf("skip %d, tick %d: far walker shown %d ticks old (at %v, positions %v)", skip, i, age, e.State.Pos[2], at)
					}
				}
			}
		}
	}
}
