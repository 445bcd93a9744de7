package ghost

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestSealCopiesIsSeal: a series sealed with SealCopies (each copy's
// entry left empty) equals the same series with every copy Set and sealed
// by Seal — entries, stamps, view flags and validity, snapshot by
// snapshot — and two tables fed the same views of the two series write the
// same packets. The series mixes what a zone's held half sees: copies of
// live entries, held entries, other states, empty entries, entities and
// classes changing at an index, entities still, refused states, and spare
// snapshots reused.
func TestSealCopiesIsSeal(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		sealCopiesVsSeal(t, seed)
	}
}

func sealCopiesVsSeal(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5ea1))
	reg, pc, nc := newTestRegistry(t)
	wa, wb := writerFor(t, reg), writerFor(t, reg)
	if seed%3 == 0 {
		// The series' numbers wrap at tick 70: the writers start a new
		// series there, whose first snapshot takes every entry as new.
		wa.seq, wb.seq = math.MaxUint32-70, math.MaxUint32-70
	}
	ta, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	tb, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	type slot struct {
		ent       uint64
		cls       *Class
		st, held  State
		heldValid bool
		// carryable: B's previous entry n+i is the held state (a copy, a
		// held or a carried one), as a zone's held entry always is.
		carryable bool
	}
	const n = 24
	slots := make([]slot, n)
	nextID := uint64(1)
	for i := range slots {
		slots[i] = slot{ent: nextID, cls: pc, st: State{Pos: [3]float64{float64(i), 0, 5}, Health: 100}}
		nextID++
	}
	valid, carried := 0, 0     // snapshots with every entry set and accepted; carried entries
	var holdA, holdB *Snapshot // the tables' snapshots, held as their owners do
	now := time.Second
	bufA, bufB := make([]byte, 1200), make([]byte, 1200)
	var w bitstream.Writer
	copies := make([]EntryCopy, 0, n)
	for tick := uint64(1); tick <= 150; tick++ {
		for i := range slots {
			s := &slots[i]
			switch r := rng.IntN(100); {
			case r < 2: // a new entity at the index
				s.ent, nextID = nextID, nextID+1
			case r < 4: // another class
				if s.cls == pc {
					s.cls = nc
				} else {
					s.cls = pc
				}
			case r < 6: // empty, or back
				if s.cls == nil {
					s.cls = pc
				} else {
					s.cls = nil
				}
			case r < 7: // refused (out of bounds), or back
				if s.st.Pos[1] != 0 {
					s.st.Pos[1] = 0
				} else {
					s.st.Pos[1] = 1e6
				}
			case r < 8: // a NaN velocity (not == itself), or back
				if math.IsNaN(s.st.Vel[0]) {
					s.st.Vel[0] = 0
				} else {
					s.st.Vel[0] = math.NaN()
				}
			case r < 40: // still
			case r < 50:
				s.st.Health += int32(rng.IntN(7)) - 3
			case r < 55:
				s.st.Yaw += 0.3
			case r < 57: // below the yaw code's step: no change on the wire
				s.st.Yaw += 1e-9
			case r < 59: // below the velocity code's step
				s.st.Vel[1] += 1e-9
			case r < 61:
				s.st.Flags ^= 1 << rng.IntN(8)
			case r < 63:
				s.st.Extra[rng.IntN(4)] = uint32(rng.IntN(1 << rng.IntN(20)))
			case r < 64:
				s.st.Name, _ = MakeName([]string{"", "ann", "bob"}[rng.IntN(3)])
			default: // walking
				s.st.Pos[0] += rng.Float64() - 0.5
				s.st.Pos[2] += 0.4
				if !math.IsNaN(s.st.Vel[0]) {
					s.st.Vel[0] = float64(rng.IntN(5))
				}
			}
		}
		// Every fifth tick every entry is set and accepted: a valid snapshot.
		clean := tick%5 == 0
		sa, sb := wa.Next(2*n), wb.Next(2*n)
		copies = copies[:0]
		for i := range slots {
			s := &slots[i]
			if clean {
				s.cls, s.st.Pos[1] = pc, 0
				if math.IsNaN(s.st.Vel[0]) {
					s.st.Vel[0] = 0
				}
			}
			sa.Set(i, s.ent, s.cls, &s.st)
			sb.Set(i, s.ent, s.cls, &s.st)
			r := rng.IntN(10)
			if clean {
				r = rng.IntN(4) * 2 // a copy or held: no other state, no empty entry
				if s.held.Pos[1] != 0 || math.IsNaN(s.held.Vel[0]) {
					r = 0 // its held state was refused: refresh it
				}
			}
			switch {
			case r < 4 || !s.heldValid: // refreshed: the live entry again
				s.held, s.heldValid, s.carryable = s.st, true, true
				sa.Set(n+i, s.ent, s.cls, &s.st)
				copies = append(copies, EntryCopy{Dst: uint32(n + i), Src: uint32(i)})
			case r < 8: // held: carried where the writer can, else SetHeld
				sa.SetHeld(n+i, s.ent, s.cls, &s.held)
				if s.carryable && wb.CanCarry(n+i, s.ent, s.cls, s.st.Name) {
					copies = append(copies, EntryCopy{Dst: uint32(n + i), Src: Carry})
					carried++
				} else {
					sb.SetHeld(n+i, s.ent, s.cls, &s.held)
					s.carryable = true
				}
			case r < 9: // another state, Set
				st := s.held
				st.Pos[1] += 1
				sa.Set(n+i, s.ent, s.cls, &st)
				sb.Set(n+i, s.ent, s.cls, &st)
				s.carryable = false
			default: // empty in both
				s.carryable = false
			}
		}
		wa.Seal(sa)
		wb.SealCopies(sb, copies)
		sameSnapshot(t, seed, tick, sa, sb)
		if sa.valid {
			valid++
		}

		// The same view of each into a table: the same packet.
		var view []ViewRef
		for i := range 2 * n {
			if e := &sa.ents[i]; e.class != nil && sa.vw[i].bad == snapOK && rng.IntN(3) > 0 {
				view = append(view, NewViewRef(uint32(i), e.class, 1+float32(i%5)))
			}
		}
		view = dedupEntities(sa, view)
		now += 50 * time.Millisecond
		ea, eb := ta.SetSnapshotView(now, sa, view), tb.SetSnapshotView(now, sb, view)
		if (ea == nil) != (eb == nil) {
			t.Fatalf("seed %d tick %d: views: Seal %v, SealCopies %v", seed, tick, ea, eb)
		}
		if ea == nil {
			sa.Retain()
			sb.Retain()
			if holdA != nil {
				holdA.Release()
				holdB.Release()
			}
			holdA, holdB = sa, sb
		}
		w.Reset(bufA)
		if _, err := ta.Write(&w, tick, now); err != nil {
			t.Fatal(err)
		}
		pa := append([]byte(nil), w.Bytes()...)
		w.Reset(bufB)
		if _, err := tb.Write(&w, tick, now); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(pa, w.Bytes()) {
			t.Fatalf("seed %d tick %d: the tables wrote different packets (%d and %d bytes)", seed, tick, len(pa), len(w.Bytes()))
		}
		if tick > 1 {
			f := notify.Fate{Seq: tick - 1, Delivered: rng.IntN(5) > 0, SentAt: now - 50*time.Millisecond}
			ta.OnFate(f)
			tb.OnFate(f)
		}
	}
	if valid == 0 {
		t.Fatalf("seed %d: no valid snapshot: the test lost its clean ticks", seed)
	}
	if carried == 0 {
		t.Fatalf("seed %d: nothing carried", seed)
	}
}

// dedupEntities keeps the first reference of each entity (a view names an
// entity once).
func dedupEntities(s *Snapshot, view []ViewRef) []ViewRef {
	seen := map[uint64]bool{}
	out := view[:0]
	for _, r := range view {
		if e := s.ents[r.Index()].entity; !seen[e] {
			seen[e] = true
			out = append(out, r)
		}
	}
	return out
}

// sameSnapshot fails unless a and b (two series' snapshots of one tick)
// hold the same entries, stamps, view flags and validity. A refused or
// empty entry's codes are not compared: nothing reads them.
func sameSnapshot(t *testing.T, seed, tick uint64, a, b *Snapshot) {
	t.Helper()
	if a.seq != b.seq || a.valid != b.valid || a.sealed != b.sealed || len(a.ents) != len(b.ents) {
		t.Fatalf("seed %d tick %d: seq %d/%d valid %v/%v sealed %v/%v len %d/%d", seed, tick, a.seq, b.seq, a.valid, b.valid, a.sealed, b.sealed, len(a.ents), len(b.ents))
	}
	for i := range a.ents {
		ea, eb := &a.ents[i], &b.ents[i]
		va, vb := &a.vw[i], &b.vw[i]
		if ea.entity != eb.entity || ea.class != eb.class || va.bad != vb.bad {
			t.Fatalf("seed %d tick %d entry %d: entity %d/%d class %p/%p bad %d/%d", seed, tick, i, ea.entity, eb.entity, ea.class, eb.class, va.bad, vb.bad)
		}
		// The state bit for bit (a NaN is not == itself).
		if ea.class != nil && va.bad == snapOK && (va.qpos != vb.qpos || va.yawQ != vb.yawQ || !sameCodes(ea.class, va, vb) || !sameNameRef(ea.name, eb.name) || va.ent&entState != vb.ent&entState || !sameKept(a.kept(uint32(i)), b.kept(uint32(i)))) {
			t.Fatalf("seed %d tick %d entry %d: Seal %+v (name %q), SealCopies %+v (name %q); %v %v %v %v %v %v", seed, tick, i, *ea, ea.name.String(), *eb, eb.name.String(), va.qpos != vb.qpos, va.yawQ != vb.yawQ, !sameCodes(ea.class, va, vb), !sameNameRef(ea.name, eb.name), va.ent&entState != vb.ent&entState, !sameKept(a.kept(uint32(i)), b.kept(uint32(i))))
		}
		// entIn tells where the writer's states are (a copy was not
		// Set), not what the entry holds.
		wa, wb := *va, *vb
		wa.ent, wb.ent = wa.ent&entState, wb.ent&entState
		if wa != wb {
			t.Fatalf("seed %d tick %d entry %d: view flags %+v, SealCopies %+v", seed, tick, i, a.vw[i], b.vw[i])
		}
		st := a.stride
		for g := range st {
			if a.chg[i*st+g] != b.chg[i*st+g] {
				t.Fatalf("seed %d tick %d entry %d group %d: stamp %d, SealCopies %d", seed, tick, i, g, a.chg[i*st+g], b.chg[i*st+g])
			}
		}
	}
}

// sameCodes reports whether views a and b hold equal codes of class c's
// coded groups (the other slots hold whatever a reused entry had).
func sameCodes(c *Class, a, b *snapView) bool {
	for g := range c.Groups {
		if c.coded&(1<<uint(g)) != 0 && a.gc[c.Groups[g].slot-1] != b.gc[c.Groups[g].slot-1] {
			return false
		}
	}
	return true
}

// TestSealCopiesRefusesBadCopies: a copy onto an entry already set, onto
// one twice, or from another copy's destination panics.
func TestSealCopiesRefusesBadCopies(t *testing.T) {
	reg, pc, _ := newTestRegistry(t)
	st := State{Health: 1}
	for _, tc := range []struct {
		name   string
		set    []int
		copies []EntryCopy
	}{
		{name: "destination set", set: []int{0, 1}, copies: []EntryCopy{{Dst: 1, Src: 0}}},
		{name: "destination twice", set: []int{0}, copies: []EntryCopy{{Dst: 1, Src: 0}, {Dst: 1, Src: 0}}},
		{name: "source a destination", set: []int{0}, copies: []EntryCopy{{Dst: 1, Src: 0}, {Dst: 2, Src: 1}}},
		{name: "out of range", set: []int{0}, copies: []EntryCopy{{Dst: 3, Src: 0}}},
		{name: "carry without a previous snapshot", set: []int{0}, copies: []EntryCopy{{Dst: 1, Src: Carry}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := writerFor(t, reg)
			s := w.Next(3)
			for _, i := range tc.set {
				s.Set(i, uint64(i+1), pc, &st)
			}
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			w.SealCopies(s, tc.copies)
		})
	}
}

// TestCanCarry: an entry can be carried only while the latest snapshot
// has it accepted, of the same entity, class and name.
func TestCanCarry(t *testing.T) {
	reg, pc, nc := newTestRegistry(t)
	w := writerFor(t, reg)
	ann, _ := MakeName("ann")
	bob, _ := MakeName("bob")
	if w.CanCarry(0, 1, pc, ann) {
		t.Fatal("carry with no snapshot yet")
	}
	s := w.Next(3)
	st := State{Health: 1, Name: ann}
	s.Set(0, 1, pc, &st)
	bad := st
	bad.Pos[1] = 1e6 // out of bounds: refused
	s.Set(1, 2, pc, &bad)
	w.Seal(s)
	for _, tc := range []struct {
		name   string
		i      int
		entity uint64
		class  *Class
		nm     Name
		want   bool
	}{
		{name: "same", i: 0, entity: 1, class: pc, nm: ann, want: true},
		{name: "another entity", i: 0, entity: 3, class: pc, nm: ann},
		{name: "another class", i: 0, entity: 1, class: nc, nm: ann},
		{name: "another name", i: 0, entity: 1, class: pc, nm: bob},
		{name: "refused", i: 1, entity: 2, class: pc, nm: ann},
		{name: "empty", i: 2, entity: 0, class: pc, nm: Name{}},
		{name: "out of range", i: 3, entity: 1, class: pc, nm: ann},
		{name: "nil class", i: 0, entity: 1, class: nil, nm: ann},
	} {
		if got := w.CanCarry(tc.i, tc.entity, tc.class, tc.nm); got != tc.want {
			t.Errorf("%s: CanCarry %v, want %v", tc.name, got, tc.want)
		}
	}
}

// sameKept reports whether two entries keep the same State bit for bit
// (both none, or equal: a NaN is not == itself).
func sameKept(a, b *State) bool {
	if a == nil || b == nil {
		return a == b
	}
	return samePos(a, b) && sameBeyondPos(a, b)
}
