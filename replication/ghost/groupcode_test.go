package ghost

import (
	"bytes"
	"errors"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// codeTestClasses are the shipped classes and one of every constructor's
// edge: a 20-bit velocity (60 bits: no code), a health of one value (a
// 0-bit field), a negative range, 32 flag bits, two yaw groups (the
// second is coded) and more coded groups than a snapshot entry holds
// codes of (the last go by Encode).
func codeTestClasses(t testing.TB) (*Registry, []*Class) {
	t.Helper()
	names := bitstream.NewStringTable(4)
	names.Set(0, "wolf")
	reg, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	cs := []*Class{
		PlayerClass(names),
		NPCClass(names),
		{ID: 7, Name: "edge", Groups: []Group{
			YawGroup(16), VelGroup(32, 20), HealthGroup(5, 5), PositionGroup(), HealthGroup(-300, 200),
			FlagsGroup(32), YawGroup(3), ExtraGroup(4), ExtraGroup(1), NameGroup(nil),
		}},
		{ID: 8, Name: "nopos", Groups: []Group{ExtraGroup(2), VelGroup(1, 18), FlagsGroup(1)}},
	}
	if err := reg.Register(cs...); err != nil {
		t.Fatal(err)
	}
	return reg, cs
}

// randCodeState is a random state every group of the code test classes
// accepts: Extra values of every size (wide ones go by Encode), velocities
// inside and outside the clamp, yaw far outside [−π, π).
func randCodeState(r *rand.Rand) State {
	var s State
	s.Pos = [3]float64{r.Float64()*200 - 100, r.Float64()*20 - 10, r.Float64()*200 - 100}
	for a := range s.Vel {
		s.Vel[a] = (r.Float64()*2 - 1) * []float64{0.5, 10, 40}[r.IntN(3)]
	}
	s.Yaw = (r.Float64()*2 - 1) * []float64{math.Pi, 100, 1e10}[r.IntN(3)]
	s.Health = int32(r.IntN(201)) // inside every class's range but "edge"'s one-value group
	s.Flags = uint32(r.IntN(2))
	if r.IntN(2) == 0 {
		s.Flags = uint32(r.IntN(256))
	}
	for i := range s.Extra {
		switch r.IntN(4) {
		case 0:
			s.Extra[i] = uint32(r.IntN(4))
		case 1:
			s.Extra[i] = uint32(r.IntN(1 << 16))
		case 2:
			s.Extra[i] = uint32(r.IntN(1 << 24))
		default:
			s.Extra[i] = r.Uint32()
		}
	}
	s.Name = MustName([]string{"wolf", "Zed"}[r.IntN(2)])
	return s
}

// fitState makes s acceptable to c (the edge class's one-value health, the
// 1-bit flags of "nopos").
func fitState(c *Class, s *State) {
	switch c.Name {
	case "edge":
		s.Health = 5
	case "nopos":
		s.Flags &= 1
	}
}

// A group's code is what its Encode writes: the same bits, or no code at
// all (ok false), for every constructor's groups over random states.
func TestGroupCodeIsEncode(t *testing.T) {
	_, cs := codeTestClasses(t)
	r := rand.New(rand.NewPCG(5, 8))
	for _, c := range cs {
		for i := range c.Groups {
			g := &c.Groups[i]
			if g.code == nil {
				continue
			}
			for range 2000 {
				s := randCodeState(r)
				if r.IntN(8) == 0 {
					s.Health = int32(r.IntN(2000) - 1000) // often refused: Encode fails alike
					s.Flags = r.Uint32()
				}
				v, n, ok := g.code(&s)
				var a [16]byte
				var w bitstream.Writer
				w.Reset(a[:])
				w.WriteBits(5, 3) // not byte-aligned
				err := g.Encode(&w, &s)
				if !ok {
					if g.Check != nil && g.Check(&s) == nil && err == nil && w.BitLen()-3 <= runMax && g.Name != "vel" {
						t.Fatalf("%s.%s: no code for %d bits Encode wrote of an accepted state", c.Name, g.Name, w.BitLen()-3)
					}
					continue
				}
				if n > runMax || v>>n != 0 {
					t.Fatalf("%s.%s: code %#x of %d bits", c.Name, g.Name, v, n)
				}
				var b [16]byte
				var wb bitstream.Writer
				wb.Reset(b[:])
				wb.WriteBits(5, 3)
				if n > 0 {
					wb.WriteBits(v, n)
				}
				if err != nil || w.BitLen() != wb.BitLen() || a != b {
					t.Fatalf("%s.%s of %+v: Encode wrote %d bits %x (%v), the code %d bits %x", c.Name, g.Name, s, w.BitLen(), a, err, wb.BitLen(), b)
				}
			}
		}
	}
}

// Class.prepare gives the first snapCodes coded groups a slot each, the
// first yaw group none (the entry's yawQ codes it).
func TestGroupCodeSlots(t *testing.T) {
	_, cs := codeTestClasses(t)
	for _, tc := range []struct {
		class string
		slots []uint8
	}{
		{"player", []uint8{0, 0, 1, 2, 0, 3, 4}},
		{"npc", []uint8{0, 0, 1, 0, 2}},
		{"edge", []uint8{0, 0, 1, 0, 2, 3, 4, 0, 0, 0}}, // vel (60 bits) has no code
		{"nopos", []uint8{1, 2, 3}},
	} {
		t.Run(tc.class, func(t *testing.T) {
			for _, c := range cs {
				if c.Name != tc.class {
					continue
				}
				for i := range c.Groups {
					if got := c.Groups[i].slot; got != tc.slots[i] {
						t.Fatalf("group %d (%s): slot %d, want %d", i, c.Groups[i].Name, got, tc.slots[i])
					}
				}
			}
		})
	}
}

// An update written from a snapshot's codes has exactly the bits of one
// written by each group's Encode from the state: every class, random
// states and masks, whole records compared.
func TestSnapshotCodesWriteEncodeBits(t *testing.T) {
	reg, cs := codeTestClasses(t)
	tab := tableFor(t, reg)
	sw := writerFor(t, reg)
	r := rand.New(rand.NewPCG(11, 4))
	const n = 64
	classes := make([]*Class, n)
	states := make([]State, n)
	refs := make([]ViewRef, n)
	for i := range n {
		classes[i] = cs[i%len(cs)]
		refs[i] = NewViewRef(uint32(i), classes[i], 1)
	}
	now := time.Second
	coded := 0
	for tick := range 60 {
		sn := sw.Next(n)
		for i := range n {
			if tick == 0 || r.IntN(3) == 0 { // the rest still: codes copied from the previous entry
				states[i] = randCodeState(r)
				fitState(classes[i], &states[i])
			}
			sn.Set(i, uint64(i+1), classes[i], &states[i])
		}
		sw.Seal(sn)
		now += 50 * time.Millisecond
		if err := tab.SetSnapshotView(now, sn, refs); err != nil {
			t.Fatal(err)
		}
		for rc := range uint32(tab.live) {
			id, s := tab.idOf(rc), &tab.slots[rc]
			c := tab.classOf(s)
			q, yaw := tab.latest(rc, s)
			gc := tab.codesOf(s)
			if gc == nil {
				t.Fatal("a snapshot's ghost without codes")
			}
			for range 4 {
				mask := r.Uint64() & c.all
				if mask == 0 {
					mask = c.DefaultMask
				}
				pf := posForm{k: uint(r.IntN(maxWindow + 1))}
				for a := range pf.d {
					pf.d[a] = uint64(r.IntN(2))
				}
				width := uint(bits.Len32(id)) + uint(r.IntN(4))
				var a, b [64]byte
				var wa, wb bitstream.Writer
				wa.Reset(a[:])
				wb.Reset(b[:])
				wa.WriteBits(3, 2)
				wb.WriteBits(3, 2)
				errA := tab.writeUpdate(&wa, id, rc, c, mask, width, &pf, q, yaw, gc)
				errB := tab.writeUpdate(&wb, id, rc, c, mask, width, &pf, q, yaw, nil)
				if errA != nil || errB != nil || wa.BitLen() != wb.BitLen() || a != b {
					t.Fatalf("tick %d ghost %d (%s, %+v) mask %b: from codes %d bits %x (%v), by Encode %d bits %x (%v)",
						tick, id, c.Name, *tab.stateOf(rc), mask, wa.BitLen(), a, errA, wb.BitLen(), b, errB)
				}
				if mask&c.coded != 0 {
					coded++
				}
			}
		}
	}
	if coded < 1000 {
		t.Fatalf("only %d records had a coded group", coded)
	}
}

// A table fed snapshots writes the same packets as one fed the same
// states as entries (whose updates Encode every group): creates, updates
// of random groups, resends after losses, over every class.
func TestSnapshotViewsPackLikeEntryViews(t *testing.T) {
	reg, cs := codeTestClasses(t)
	ta := tableFor(t, reg)
	tb := tableFor(t, reg)
	sw := writerFor(t, reg)
	r := rand.New(rand.NewPCG(2, 17))
	const n = 48
	ents := make([]ViewEntry, n)
	refs := make([]ViewRef, n)
	for i := range ents {
		c := cs[i%len(cs)]
		ents[i] = ViewEntry{Entity: uint64(100 + i), Class: c, Priority: float32(1 + i%5), State: randCodeState(r)}
		fitState(c, &ents[i].State)
		refs[i] = NewViewRef(uint32(i), c, ents[i].Priority)
	}
	now := time.Second
	var ba, bb [MaxPacketBytes]byte
	var wa, wb bitstream.Writer
	for seq := uint64(1); seq <= 300; seq++ {
		for i := range ents {
			e := &ents[i]
			switch r.IntN(6) {
			case 0: // everything
				e.State = randCodeState(r)
				fitState(e.Class, &e.State)
			case 1, 2: // a step and the next move sequence (a walking player)
				e.State.Pos[0] += r.Float64() - 0.5
				e.State.Extra[0]++
			}
		}
		now += 50 * time.Millisecond
		if err := ta.SetView(now, ents); err != nil {
			t.Fatal(err)
		}
		sn := sw.Next(n)
		for i := range ents {
			sn.Set(i, ents[i].Entity, ents[i].Class, &ents[i].State)
		}
		sw.Seal(sn)
		if err := tb.SetSnapshotView(now, sn, refs); err != nil {
			t.Fatal(err)
		}
		wa.Reset(ba[:300])
		wb.Reset(bb[:300])
		na, errA := ta.Write(&wa, seq, now)
		nb, errB := tb.Write(&wb, seq, now)
		if errA != nil || errB != nil || na != nb || wa.BitLen() != wb.BitLen() || !bytes.Equal(wa.Bytes(), wb.Bytes()) {
			t.Fatalf("packet %d: entry views wrote %d records in %d bits (%v), snapshot views %d in %d bits (%v)",
				seq, na, wa.BitLen(), errA, nb, wb.BitLen(), errB)
		}
		if seq > 2 {
			f := notify.Fate{Seq: seq - 2, Delivered: r.IntN(5) != 0, SentAt: now - 100*time.Millisecond}
			ta.OnFate(f)
			tb.OnFate(f)
		}
	}
	if ta.Stats().Updates < 2000 {
		t.Fatalf("only %d updates compared", ta.Stats().Updates)
	}
}

// SetSnapshotView refuses an empty entry of a snapshot of its own
// registry, and an entry of a class its registry lacks in a snapshot of
// another registry (same bounds), changing nothing: the checks the
// snapshot's own registry lets it skip (Seal refused its unknown classes)
// still run where they are needed.
func TestSnapshotViewRefusesEmptyAndForeignEntries(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	sw, err := NewSnapshotWriter(d.reg)
	if err != nil {
		t.Fatal(err)
	}
	ents := []ViewEntry{d.npc(1, 0), d.npc(2, 5)}
	d.snapView(sw, ents, 0, 1)
	holey := sw.Next(3)
	holey.Set(0, 1, d.nc, &ents[0].State)
	holey.Set(2, 2, d.nc, &ents[1].State) // entry 1 stays empty
	sw.Seal(holey)
	otherReg, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	foreign := &Class{ID: 9, Name: "foreign", Groups: []Group{PositionGroup(), HealthGroup(0, 1000)}}
	if err := otherReg.Register(foreign, d.nc); err != nil {
		t.Fatal(err)
	}
	osw, err := NewSnapshotWriter(otherReg)
	if err != nil {
		t.Fatal(err)
	}
	os := osw.Next(2)
	os.Set(0, 1, d.nc, &ents[0].State)
	os.Set(1, 3, foreign, &ents[1].State)
	osw.Seal(os)
	for _, c := range []struct {
		name string
		snap *Snapshot
		refs []ViewRef
	}{
		{"empty entry", holey, []ViewRef{0, 1, 2}},
		{"class of another registry only", os, []ViewRef{0, 1}},
	} {
		d.now += 50_000_000
		if err := d.tab.SetSnapshotView(d.now, c.snap, c.refs); !errors.Is(err, ErrUnknownClass) {
			t.Errorf("%s: got %v, want %v", c.name, err, ErrUnknownClass)
		}
		if d.tab.Len() != 2 || d.tab.snap.Seq() != 1 {
			t.Fatalf("%s: the refused view changed the table (%d ghosts, snapshot %d)", c.name, d.tab.Len(), d.tab.snap.Seq())
		}
	}
	// The same snapshots without the bad entries are taken.
	d.now += 50_000_000
	if err := d.tab.SetSnapshotView(d.now, os, []ViewRef{0}); err != nil {
		t.Fatal(err)
	}
}

// An entry whose previous snapshot's entry was refused (a bad state) is
// coded afresh, not from that entry's codes (which Seal never set), and
// one whose groups did not change keeps the previous entry's codes.
func TestSealCodesAfterABadEntry(t *testing.T) {
	reg, cs := codeTestClasses(t)
	pc := cs[0]
	tab := tableFor(t, reg)
	sw := writerFor(t, reg)
	st := State{Pos: [3]float64{1, 2, 3}, Vel: [3]float64{1, -2, 3}, Yaw: 1, Health: 700, Flags: 5, Extra: [4]uint32{9, 99, 999, 9999}}
	bad := st
	bad.Pos[0] = math.NaN()
	now := time.Second
	for k, s := range []State{st, bad, st, st} {
		sn := sw.Next(1)
		sn.Set(0, 1, pc, &s)
		sw.Seal(sn)
		if k == 1 {
			continue // refused: no view names it
		}
		now += 50 * time.Millisecond
		if err := tab.SetSnapshotView(now, sn, []ViewRef{NewViewRef(0, pc, 1)}); err != nil {
			t.Fatal(err)
		}
		s0 := &tab.slots[0]
		q, yaw := tab.latest(0, s0)
		pf := posForm{}
		var a, b [64]byte
		var wa, wb bitstream.Writer
		wa.Reset(a[:])
		wb.Reset(b[:])
		errA := tab.writeUpdate(&wa, 0, 0, pc, pc.all, 1, &pf, q, yaw, tab.codesOf(s0))
		errB := tab.writeUpdate(&wb, 0, 0, pc, pc.all, 1, &pf, q, yaw, nil)
		if errA != nil || errB != nil || wa.BitLen() != wb.BitLen() || a != b {
			t.Fatalf("snapshot %d: from codes %d bits %x (%v), by Encode %d bits %x (%v)", k, wa.BitLen(), a, errA, wb.BitLen(), b, errB)
		}
	}
}
