package ghost

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// groupBit is the dirty-mask bit of c's group called name.
func groupBit(c *Class, name string) uint64 {
	for i := range c.Groups {
		if c.Groups[i].Name == name {
			return 1 << uint(i)
		}
	}
	panic("no group " + name)
}

// snapView seals ents as one snapshot (entry i is ents[i]) and applies the
// entries named by in to d's table.
func (d *duo) snapView(sw *SnapshotWriter, ents []ViewEntry, in ...int) *Snapshot {
	d.t.Helper()
	s := sw.Next(len(ents))
	for i := range ents {
		s.Set(i, ents[i].Entity, ents[i].Class, &ents[i].State)
	}
	sw.Seal(s)
	refs := make([]ViewRef, len(in))
	for k, i := range in {
		refs[k] = NewViewRef(uint32(i), ents[i].Class, ents[i].Priority)
	}
	d.now += 50_000_000
	if err := d.tab.SetSnapshotView(d.now, s, refs); err != nil {
		d.t.Fatal(err)
	}
	return s
}

func TestSnapshotViewErrorsChangeNothing(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	sw, err := NewSnapshotWriter(d.reg)
	if err != nil {
		t.Fatal(err)
	}
	ents := []ViewEntry{d.npc(1, 0), d.npc(2, 5)}
	d.snapView(sw, ents, 0, 1)
	bad := ents[1]
	bad.State.Pos[0] = math.NaN()
	s := sw.Next(3)
	s.Set(0, 1, d.nc, &ents[0].State)
	s.Set(1, 2, d.nc, &bad.State)
	other := NPCClass(nil) // not registered
	s.Set(2, 3, other, &ents[0].State)
	sw.Seal(s)
	b := DefaultBounds()
	b.Precision = 0.02
	otherReg, _ := NewRegistry(b)
	if err := otherReg.Register(PlayerClass(nil)); err != nil {
		t.Fatal(err)
	}
	osw, _ := NewSnapshotWriter(otherReg)
	os := osw.Next(1)
	osw.Seal(os)
	// Every entry set and accepted (valid): only the indices are checked.
	vs := sw.Next(2)
	vs.Set(0, 1, d.nc, &ents[0].State)
	vs.Set(1, 2, d.nc, &ents[1].State)
	sw.Seal(vs)
	if !vs.valid {
		t.Fatal("a snapshot of two accepted entries is not valid")
	}
	for _, c := range []struct {
		name string
		snap *Snapshot
		refs []ViewRef
		want error
	}{
		{"index out of range", s, []ViewRef{0, 3}, ErrBadState},
		{"index out of range of a valid snapshot, in a block of eight", vs, []ViewRef{0, 1, 0, 1, 2, 0, 1, 0, 1}, ErrBadState},
		{"index out of range of a valid snapshot, in the tail", vs, []ViewRef{0, 1, 0, 1, 0, 1, 0, 1, 1, 0, 2}, ErrBadState},
		{"bad state", s, []ViewRef{0, 1}, ErrBadState},
		{"unregistered class", s, []ViewRef{2}, ErrUnknownClass},
		{"unsealed", sw.Next(1), nil, ErrConfig},
		{"a registry of other bounds", os, nil, ErrConfig},
	} {
		d.now += 50_000_000
		if err := d.tab.SetSnapshotView(d.now, c.snap, c.refs); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
		if d.tab.Len() != 2 || d.tab.snap.Seq() != 1 {
			t.Fatalf("%s: the refused view changed the table (%d ghosts, snapshot %d)", c.name, d.tab.Len(), d.tab.snap.Seq())
		}
	}
}

// A table moves between entry views and snapshot views (a player handed
// between a remote zone and a local one) and between two writers' series
// (a handoff between two zones) without losing a change and without
// resending what did not change: across a switch, the new states are
// diffed against the previous view's.
func TestSnapshotAndEntryViewsMix(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	sw, _ := NewSnapshotWriter(d.reg)
	ents := []ViewEntry{d.npc(1, 0), d.npc(2, 5)}
	d.view(ents...)
	d.settle(ents...)
	ents[1].State.Health = 11
	d.snapView(sw, ents, 0, 1)
	if a, b := d.tab.dirtyAt(0), d.tab.dirtyAt(1); a != 0 || b != groupBit(d.nc, "health") {
		t.Fatalf("first snapshot view after entry views: dirty %b and %b, want only ghost 1's health", a, b)
	}
	d.trip()
	for range 10 {
		d.trip()
		d.snapView(sw, ents, 0, 1)
	}
	if d.tab.Pending() {
		t.Fatal("unchanged snapshots left something pending")
	}
	ents[1].State.Health = 7
	d.snapView(sw, ents, 0, 1)
	if d.tab.dirtyAt(1) != groupBit(d.nc, "health") {
		t.Fatalf("health change: dirty %b", d.tab.dirtyAt(1))
	}
	d.trip()
	ents[0].State.Health = 9
	d.view(ents...) // back to entries: diffed against the snapshot's states
	if a, b := d.tab.dirtyAt(0), d.tab.dirtyAt(1); a != groupBit(d.nc, "health") || b != 0 {
		t.Fatalf("entry view after snapshots: dirty %b and %b, want only ghost 0's health", a, b)
	}
	d.settle(ents...)
	if diff := mismatch(d.reg, d.mir, ents); diff != "" {
		t.Fatal(diff)
	}
	sw2, _ := NewSnapshotWriter(d.reg) // another zone's series
	d.snapView(sw, ents, 0, 1)
	d.settleSnap(sw, ents, 0, 1)
	// The other writer's entries sit elsewhere, its stamps count from 1:
	// only a diff finds ghost 0's flags change.
	ents[0].State.Flags = 2
	other := []ViewEntry{d.npc(9, 9), ents[1], ents[0]}
	d.snapView(sw2, other, 2, 1)
	if a, b := d.tab.dirtyAt(0), d.tab.dirtyAt(1); a != groupBit(d.nc, "flags") || b != 0 {
		t.Fatalf("first view of another writer: dirty %b and %b, want only ghost 0's flags", a, b)
	}
	d.settleSnap(sw2, other, 2, 1)
	if diff := mismatch(d.reg, d.mir, ents); diff != "" {
		t.Fatal(diff)
	}
}

// A ghost that leaves and comes back after views of another writer is
// not matched to the new writer's entry of the same index by chance: its
// stamps count in the old series.
func TestSnapshotReentryAfterWriterSwitch(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	sw, _ := NewSnapshotWriter(d.reg)
	sw2, _ := NewSnapshotWriter(d.reg)
	ents := []ViewEntry{d.npc(1, 0), d.npc(2, 5)}
	d.snapView(sw2, ents, 0, 1)
	for range 10 { // sw runs ahead: the ghosts take seqs past sw2's
		d.snapView(sw, ents, 0, 1)
		d.trip()
	}
	d.snapView(sw, ents, 1) // ghost 0 leaves; its kill waits to go out
	ents[0].State.Health = 44
	d.snapView(sw2, ents, 1)    // sw2 stamps the change with its seq 2
	d.snapView(sw2, ents, 0, 1) // back, same index, before the kill went out
	if id, ok := d.tab.GhostID(1); !ok || d.tab.dirtyAt(id)&groupBit(d.nc, "health") == 0 {
		t.Fatal("the health change of a ghost back from another writer's series was lost")
	}
	d.settleSnap(sw2, ents, 0, 1)
	if diff := mismatch(d.reg, d.mir, ents); diff != "" {
		t.Fatal(diff)
	}
}

// settleSnap is settle with snapshot views of ents (entries in).
func (d *duo) settleSnap(sw *SnapshotWriter, ents []ViewEntry, in ...int) {
	d.t.Helper()
	for range 50 {
		d.trip()
		if !d.tab.Pending() && d.tab.InFlight() == 0 {
			return
		}
		d.snapView(sw, ents, in...)
	}
	d.t.Fatal("table did not settle")
}

// A change in a snapshot the table skipped still counts; a value changed
// and changed back between two taken views may be resent, never lost.
func TestSnapshotSkippedViewsLoseNoChange(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	sw, _ := NewSnapshotWriter(d.reg)
	ents := []ViewEntry{d.npc(1, 0)}
	d.snapView(sw, ents, 0)
	for range 5 {
		d.trip()
		d.snapView(sw, ents, 0)
	}
	ents[0].State.Health = 3
	s := sw.Next(1) // sealed, never given to the table
	s.Set(0, 1, d.nc, &ents[0].State)
	sw.Seal(s)
	d.snapView(sw, ents, 0)
	if d.tab.dirtyAt(0)&groupBit(d.nc, "health") == 0 {
		t.Fatal("a health change in a skipped snapshot was lost")
	}
	d.settleSnap(sw, ents, 0)
	if diff := mismatch(d.reg, d.mir, ents); diff != "" {
		t.Fatal(diff)
	}
}

// An AlwaysInScope ghost a snapshot view leaves out keeps its state (the
// table copies it out of the old snapshot) and is written from it.
func TestSnapshotAlwaysInScopeCarried(t *testing.T) {
	reg, flag, npc := flagRegistry(t)
	d := newDuo(t, DefaultConfig())
	d.reg, d.nc = reg, npc
	d.tab, _ = NewTable(reg, DefaultConfig())
	d.mir, _ = NewMirror(reg, DefaultMirrorConfig())
	sw, _ := NewSnapshotWriter(reg)
	f := ViewEntry{Entity: 1, Class: flag, Priority: 1}
	f.State.Pos[0], f.State.Health = 3, 4
	ents := []ViewEntry{f, d.npc(2, 1)}
	d.snapView(sw, ents, 0, 1)
	// Left out before its create was delivered: written from the carry.
	d.snapView(sw, []ViewEntry{d.npc(5, 1), d.npc(6, 1), d.npc(7, 1)}, 2)
	d.snapView(sw, []ViewEntry{d.npc(5, 1)}, 0)
	d.settleSnap(sw, []ViewEntry{d.npc(5, 1)}, 0)
	g, ok := d.mir.ByEntity(1)
	if !ok || g.State.Health != 4 {
		t.Fatalf("carried ghost: %v %+v", ok, g.State)
	}
	if _, ok := d.mir.ByEntity(2); ok {
		t.Fatal("ordinary ghost stayed")
	}
}

func TestSnapshotViewAllocatesNothing(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	sw, _ := NewSnapshotWriter(d.reg)
	ents := make([]ViewEntry, 40)
	refs := make([]ViewRef, len(ents))
	for i := range ents {
		ents[i] = d.npc(uint64(i+1), float64(i))
		refs[i] = NewViewRef(uint32(i), ents[i].Class, 1)
	}
	snaps := make([]*Snapshot, 2)
	for k := range snaps {
		snaps[k] = sw.Next(len(ents))
		for i := range ents {
			ents[i].State.Pos[1] = float64(k)
			snaps[k].Set(i, ents[i].Entity, ents[i].Class, &ents[i].State)
		}
		sw.Seal(snaps[k])
	}
	d.now += 50_000_000
	if err := d.tab.SetSnapshotView(d.now, snaps[0], refs); err != nil {
		t.Fatal(err)
	}
	d.trip()
	k := 0
	allocs := testing.AllocsPerRun(100, func() {
		k ^= 1
		d.now += 50_000_000
		if err := d.tab.SetSnapshotView(d.now, snaps[k], refs); err != nil {
			t.Fatal(err)
		}
		d.seq++
		d.w.Reset(d.buf[:])
		if _, err := d.tab.Write(&d.w, d.seq, d.now); err != nil {
			t.Fatal(err)
		}
		d.tab.OnFate(notify.Fate{Seq: d.seq, Delivered: true, SentAt: d.now})
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per snapshot view and packet", allocs)
	}
}

func notifyDelivered(seq uint64, at time.Duration) notify.Fate {
	return notify.Fate{Seq: seq, Delivered: true, SentAt: at}
}

// A ghost that left scope under snapshot views, its kill not yet sent,
// comes back in an entry view: the table kept none of its state (a leaving
// ghost keeps only its position), so the re-entry must take every group —
// a diff against no state (zero) missed a change to a zero value, and the
// client kept health 50.
func TestEntryViewReentryAfterSnapshotViewsTakesEveryGroup(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	sw, _ := NewSnapshotWriter(d.reg)
	ents := []ViewEntry{d.npc(1, 0), d.npc(2, 5)}
	d.snapView(sw, ents, 0, 1)
	d.settleSnap(sw, ents, 0, 1)
	d.snapView(sw, ents, 0) // entity 2 leaves; no packet yet: its kill is not sent
	id, ok := d.tab.GhostID(2)
	if !ok || d.tab.slotOf(id).phase != phaseKilling {
		t.Fatal("entity 2 is not leaving with its kill pending")
	}
	ents[1].State.Health = 0
	d.view(ents...) // back, as entries, at health 0
	if d.tab.dirtyAt(id)&groupBit(d.nc, "health") == 0 {
		t.Fatalf("re-entry after snapshot views: dirty %b, health not among them", d.tab.dirtyAt(id))
	}
	d.settle(ents...)
	if diff := mismatch(d.reg, d.mir, ents); diff != "" {
		t.Fatal(diff)
	}
}

// A table that skipped a snapshot in which a ghost moved away and back
// compares positions, not the position's stamp: the ghost did not move
// (no position update, no rest marker). One that took every snapshot
// reads the stamp, and a move it took is one.
func TestSnapshotPositionStampOnlyWithoutSkips(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	sw, _ := NewSnapshotWriter(d.reg)
	ents := []ViewEntry{d.npc(1, 0), d.npc(2, 5)}
	d.snapView(sw, ents, 0, 1)
	d.settleSnap(sw, ents, 0, 1)
	pos := groupBit(d.nc, "pos")
	// Skipped: entity 2 one metre away.
	moved := ents[1]
	moved.State.Pos[0] += 1
	s := sw.Next(2)
	s.Set(0, ents[0].Entity, ents[0].Class, &ents[0].State)
	s.Set(1, moved.Entity, moved.Class, &moved.State)
	sw.Seal(s)
	d.snapView(sw, ents, 0, 1) // back where the table last saw it
	if sl := d.tab.slotOf(1); d.tab.dirtyAt(1)&pos != 0 || sl.has(flMoving) {
		t.Fatalf("moved and back in a skipped snapshot: dirty %b, moving %v; want neither", d.tab.dirtyAt(1), sl.has(flMoving))
	}
	d.snapView(sw, []ViewEntry{ents[0], moved}, 0, 1) // taken: a move
	if sl := d.tab.slotOf(1); d.tab.dirtyAt(1)&pos == 0 || !sl.has(flMoving) {
		t.Fatalf("a move in the next snapshot: dirty %b, moving %v", d.tab.dirtyAt(1), sl.has(flMoving))
	}
}

// A ghost outside every view keeps the viewGen of its last one, 16 bits:
// an AlwaysInScope ghost left out of 2^16 and more views in a row must not
// read as in the current view when the counter comes round again (its
// carried state would be dropped; pinViewGens prevents it).
func TestSnapshotCarriedAcrossViewGenWrap(t *testing.T) {
	reg, flag, npc := flagRegistry(t)
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	sw, _ := NewSnapshotWriter(reg)
	st := State{Health: 4}
	first := sw.Next(2)
	first.Set(0, 1, flag, &st)
	first.Set(1, 2, npc, &st)
	sw.Seal(first)
	now := time.Second
	if err := tab.SetSnapshotView(now, first, []ViewRef{NewViewRef(0, flag, 1), NewViewRef(1, npc, 1)}); err != nil {
		t.Fatal(err)
	}
	var rest [2]*Snapshot // npc only, taken in turn
	for k := range rest {
		rest[k] = sw.Next(1)
		rest[k].Set(0, 2, npc, &st)
		sw.Seal(rest[k])
	}
	for v := range 3 << 15 {
		now += time.Millisecond
		if err := tab.SetSnapshotView(now, rest[v%2], []ViewRef{NewViewRef(0, npc, 1)}); err != nil {
			t.Fatal(err)
		}
		if err := checkInvariants(tab); err != nil {
			t.Fatalf("view %d: %v", v+2, err)
		}
	}
	id, ok := tab.GhostID(1)
	if !ok || tab.stateOf(tab.recOf(id)).Health != 4 {
		t.Fatalf("the carried ghost: in scope %v", ok)
	}
}

// TestSnapshotCarryAndFreeInOneView: a snapshot view that leaves out both
// AlwaysInScope ghosts (carried: their si moves to the new carry) and
// ordinary ghosts the client never held (freed at once, which asks the
// entity index, and the index reads the entity of every ghost it probes
// where that ghost's si names it) keeps the index whole and the carried
// ghosts in it. Regression: in one walk, a carried ghost's new carry index
// was read from the old carry.
func TestSnapshotCarryAndFreeInOneView(t *testing.T) {
	reg, flag, npc := flagRegistry(t)
	tab := tableFor(t, reg)
	sw := writerFor(t, reg)
	view := func(now time.Duration, ents []ViewEntry) {
		t.Helper()
		sn := sw.Next(len(ents))
		refs := make([]ViewRef, len(ents))
		for i := range ents {
			sn.Set(i, ents[i].Entity, ents[i].Class, &ents[i].State)
			refs[i] = NewViewRef(uint32(i), ents[i].Class, 1)
		}
		sw.Seal(sn)
		if err := tab.SetSnapshotView(now, sn, refs); err != nil {
			t.Fatal(err)
		}
		if err := checkInvariants(tab); err != nil {
			t.Fatal(err)
		}
	}
	const n = 48 // flags first: the lower ids, which the walk meets first
	var all []ViewEntry
	for i := range n {
		e := ViewEntry{Entity: uint64(1000 + 7*i), Class: flag}
		if i >= n/2 {
			e.Class = npc
		}
		e.State.Pos[0] = float64(i)
		all = append(all, e)
	}
	view(time.Second, all)
	// Nothing written: the NPCs left out are freed at once, the flags carried.
	view(time.Second+50*time.Millisecond, []ViewEntry{{Entity: 5, Class: npc}})
	for i, e := range all {
		_, ok := tab.GhostID(e.Entity)
		if want := i < n/2; ok != want {
			t.Errorf("entity %d (%s) in scope %v, want %v", e.Entity, e.Class.Name, ok, want)
		}
	}
	if tab.Len() != n/2+1 {
		t.Errorf("%d ghosts, want %d", tab.Len(), n/2+1)
	}
}

// A snapshot entry keeps its float State only where a group needs it: a
// class with a group built by hand (its Encode reads the State), or an
// entry with a coded group's value too wide for a code (noCode: Encode
// writes it). Such ghosts reach the client as exactly as the others, and
// the entries of the shipped classes with small values keep none.
func TestSnapshotKeepsStatesWhereGroupsNeedThem(t *testing.T) {
	reg, pc, nc := newTestRegistry(t)
	custom := &Class{ID: 40, Name: "lever", Groups: []Group{
		PositionGroup(),
		{
			Name:   "lever",
			Encode: func(w *bitstream.Writer, s *State) error { return w.WriteBits(uint64(s.Extra[2]&0xFF), 8) },
			Decode: func(r *bitstream.Reader, s *State) error {
				v, err := r.ReadBits(8, "lever")
				s.Extra[2] = uint32(v)
				return err
			},
			Changed: func(old, cur *State) bool { return old.Extra[2]&0xFF != cur.Extra[2]&0xFF },
		},
		NameGroup(nil),
	}}
	if err := reg.Register(custom); err != nil {
		t.Fatal(err)
	}
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	mir, err := NewMirror(reg, DefaultMirrorConfig())
	if err != nil {
		t.Fatal(err)
	}
	d := &duo{t: t, reg: reg, pc: pc, nc: nc, tab: tab, mir: mir, now: time.Second}
	sw, _ := NewSnapshotWriter(reg)
	ents := []ViewEntry{d.npc(1, 0), d.npc(2, 0), d.npc(3, 0)}
	ents[1].Class = custom
	ents[2].Class = pc
	for k := range 12 {
		for i := range ents {
			ents[i].State.Pos[0] += 0.25
		}
		ents[1].State.Extra[2] = uint32(k * 37)
		ents[1].State.Name = MustName([]string{"up", "dn"}[k/4%2]) // one length: a Mirror keeps a longer name's tail bytes
		if k%3 == 0 {
			ents[2].State.Extra[0] = 1<<31 + uint32(k) // gamma 63 bits: no code
		} else {
			ents[2].State.Extra[0] = uint32(k)
		}
		s := d.snapView(sw, ents, 0, 1, 2)
		if s.kept(0) != nil || s.kept(1) == nil || (s.kept(2) != nil) != (k%3 == 0) {
			t.Fatalf("tick %d: kept States npc %v lever %v wide extra %v", k, s.kept(0) != nil, s.kept(1) != nil, s.kept(2) != nil)
		}
		d.settleSnap(sw, ents, 0, 1, 2)
		if diff := mismatch(d.reg, d.mir, ents); diff != "" {
			t.Fatalf("tick %d: %s", k, diff)
		}
	}
}
