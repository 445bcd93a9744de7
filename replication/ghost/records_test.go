package ghost

import (
	"math/bits"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// wideClass has a position and 59 one-bit groups, group j carrying bit j−1
// of Extra[0..1]: masks wider than an in-flight record's entMaskBits.
func wideClass() *Class {
	gs := []Group{PositionGroup()}
	for j := range 59 {
		w, b := j/32, uint(j%32)
		gs = append(gs, Group{
			Name:   "bit",
			Encode: func(bw *bitstream.Writer, s *State) error { return bw.WriteBits(uint64(s.Extra[w]>>b&1), 1) },
			Decode: func(r *bitstream.Reader, s *State) error {
				v, err := r.ReadBits(1, "bit")
				s.Extra[w] |= uint32(v) << b
				return err
			},
			Changed: func(a, c *State) bool { return (a.Extra[w]^c.Extra[w])>>b&1 != 0 },
		})
	}
	return &Class{ID: 9, Name: "wide", Groups: gs}
}

// wideRegistry is a registry holding wideClass alone.
func wideRegistry(t *testing.T) (*Registry, *Class) {
	t.Helper()
	reg, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	c := wideClass()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	return reg, c
}

// A drop re-dirties exactly the groups no later packet carries, for groups
// above the record's entMaskBits too, and the high mask bits follow their
// records when the ring grows and when it shrinks back.
func TestWideMasksSurviveRingGrowth(t *testing.T) {
	reg, c := wideRegistry(t)
	cfg := DefaultConfig()
	cfg.ResendInterval, cfg.ConfirmDeadline = 0, 0 // one record per packet: the changed group
	tab, err := NewTable(reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tab.entHi() == nil {
		t.Fatalf("a class of %d groups, entMaskBits %d: no entHi ring", len(c.Groups), entMaskBits)
	}
	var buf [MaxPacketBytes]byte
	var w bitstream.Writer
	now, seq := time.Second, uint64(0)
	view := []ViewEntry{{Entity: 7, Class: c, Priority: 1}}
	write := func() uint64 {
		t.Helper()
		seq++
		w.Reset(buf[:])
		if _, err := tab.Write(&w, seq, now); err != nil {
			t.Fatal(err)
		}
		if err := checkInvariants(tab); err != nil {
			t.Fatal(err)
		}
		return seq
	}
	if err := tab.SetView(now, view); err != nil {
		t.Fatal(err)
	}
	tab.OnFate(notify.Fate{Seq: write(), Delivered: true, SentAt: now})
	// 120 packets in flight (below maxSeqSpan, 128), each carrying one
	// high group (toggled): the ring grows from initialRecords (64).
	var sent []uint64
	lastOf := map[int]uint64{} // group → newest packet carrying it
	for k := range 120 {
		g := 41 + k%19 // groups 41..59: bits 40..58 of Extra
		bit := g - 1
		view[0].State.Extra[bit/32] ^= 1 << uint(bit%32)
		now += 50 * time.Millisecond
		if err := tab.SetView(now, view); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, write())
		lastOf[g] = seq
	}
	if tab.recordGrowths == 0 {
		t.Fatal("the record ring never grew")
	}
	id, _ := tab.GhostID(7)
	var want uint64
	for g := range lastOf {
		want |= 1 << uint(g)
	}
	st := tab.Stats()
	for _, s := range sent {
		tab.OnFate(notify.Fate{Seq: s, Delivered: false, SentAt: now})
		if err := checkInvariants(tab); err != nil {
			t.Fatal(err)
		}
	}
	if got := tab.dirtyAt(id); got != want {
		t.Fatalf("dirty %064b after dropping every packet, want %064b", got, want)
	}
	st2 := tab.Stats()
	if r, s := st2.Redirtied-st.Redirtied, st2.Suppressed-st.Suppressed; r != uint64(bits.OnesCount64(want)) || s != 120-r {
		t.Fatalf("redirtied %d suppressed %d, want %d and %d", r, s, bits.OnesCount64(want), 120-bits.OnesCount64(want))
	}
	// Shrink: the trim moves the (now few) records into a smaller ring.
	for range 3 {
		now += time.Second
		if err := tab.SetView(now, view); err != nil {
			t.Fatal(err)
		}
		s := write()
		tab.OnFate(notify.Fate{Seq: s, Delivered: false, SentAt: now})
	}
	if len(tab.ents) >= 256 || len(tab.entHi()) != len(tab.ents) {
		t.Fatalf("after the burst: ring %d, entHi %d", len(tab.ents), len(tab.entHi()))
	}
	if got := tab.dirtyAt(id); got&want != want {
		t.Fatalf("dirty %064b after dropped resends, want ⊇ %064b", got, want)
	}
}

// A class of more than 32 groups keeps the dirty groups from 31 up apart
// from the slot (wideDirty: dirtyHi, bit 31 of the slot's word their mark).
// Under snapshot views of one writer's series — the usual view, whose
// ghosts SetSnapshotView takes in a walk of their own for narrow
// registries — a change of any group, below, at and above bit 31, alone
// or with others in views the table took without a packet between, is
// dirty until written, written, and held by the client.
func TestWideDirtyUnderSnapshotViews(t *testing.T) {
	reg, c := wideRegistry(t)
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	mir, err := NewMirror(reg, DefaultMirrorConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !tab.wideDirty {
		t.Fatalf("a class of %d groups: not wideDirty", len(c.Groups))
	}
	d := &duo{t: t, reg: reg, tab: tab, mir: mir, now: time.Second}
	sw, err := NewSnapshotWriter(reg)
	if err != nil {
		t.Fatal(err)
	}
	ents := []ViewEntry{{Entity: 7, Class: c, Priority: 1}}
	quiet := func() {
		t.Helper()
		for range 20 {
			d.trip()
			d.snapView(sw, ents, 0)
			if !tab.Pending() && tab.InFlight() == 0 {
				return
			}
		}
		t.Fatal("table did not settle")
	}
	d.snapView(sw, ents, 0)
	quiet()
	id, _ := tab.GhostID(7)
	// Each bit is set once (wideClass's decoder ORs its bit in).
	for _, flips := range [][]int{{0}, {29}, {30}, {44}, {58}, {3, 40}, {28, 31, 57}} {
		var want uint64
		for _, j := range flips {
			ents[0].State.Extra[j/32] |= 1 << uint(j%32)
			want |= 1 << uint(j+1) // group j+1 carries bit j
			d.snapView(sw, ents, 0)
		}
		if got := tab.dirtyAt(id); got&want != want || !tab.Pending() {
			t.Fatalf("bits %v set: dirty %b, want %b (pending %v)", flips, got, want, tab.Pending())
		}
		quiet()
		g, ok := mir.Lookup(id)
		if !ok || g.State.Extra != ents[0].State.Extra {
			t.Fatalf("bits %v set: the client holds %x, want %x", flips, g.State.Extra, ents[0].State.Extra)
		}
		if got := tab.dirtyAt(id); got != 0 {
			t.Fatalf("bits %v set and delivered: dirty %b", flips, got)
		}
	}
}

// The record store never wraps: a packet's records go after the live
// ones, which slide to index 0 when the packet's candidates may not fit
// after them, and the store grows up to MaxRecordsInFlight (rounded up to
// a power of two), where Write stalls until fates free records. Every
// packet's records stay in the store (checkInvariants), through the
// slides, the growths, a stall and fates out of order.
func TestRecordStoreSlidesGrowsAndStalls(t *testing.T) {
	reg, _, nc := newTestRegistry(t)
	cfg := DefaultConfig()
	cfg.MaxRecordsInFlight = 256
	tab, err := NewTable(reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	view := make([]ViewEntry, 100)
	for i := range view {
		view[i] = ViewEntry{Entity: uint64(i + 1), Class: nc, Priority: 1}
		view[i].State.Health = 100
		view[i].State.Name = MustName("wolf")
	}
	var buf [MaxPacketBytes]byte
	var w bitstream.Writer
	now, seq := time.Second, uint64(0)
	var inflight []uint64
	slides := 0
	write := func() {
		t.Helper()
		now += 50 * time.Millisecond
		for i := range view { // every ghost moves: each is a candidate every packet
			view[i].State.Pos[0] += 0.5
		}
		if err := tab.SetView(now, view); err != nil {
			t.Fatal(err)
		}
		head, live := tab.entHead, tab.entLen
		seq++
		w.Reset(buf[:])
		if _, err := tab.Write(&w, seq, now); err != nil {
			t.Fatal(err)
		}
		if head > 0 && live > 0 && tab.entHead == 0 {
			slides++
		}
		if len(tab.ents) > 256 {
			t.Fatalf("the store holds %d records' room, want ≤ MaxRecordsInFlight 256", len(tab.ents))
		}
		if err := checkInvariants(tab); err != nil {
			t.Fatal(err)
		}
		inflight = append(inflight, seq)
	}
	fate := func(k int, delivered bool) {
		t.Helper()
		tab.OnFate(notify.Fate{Seq: inflight[k], Delivered: delivered, SentAt: now})
		inflight = append(inflight[:k], inflight[k+1:]...)
		if err := checkInvariants(tab); err != nil {
			t.Fatal(err)
		}
	}
	// The ghosts made (their creates delivered), then no fate: the store
	// grows to its cap and Write stalls.
	for range 10 {
		write()
		fate(0, true)
	}
	for tab.Stats().Stalls == 0 {
		if seq > 100 {
			t.Fatalf("no stall after %d packets without a fate (store %d, %d in flight)", seq, len(tab.ents), tab.entLen)
		}
		write()
	}
	if tab.Stats().RecordGrowths == 0 || len(tab.ents) != 256 {
		t.Fatalf("at the stall: %d growths, store %d, want ≥ 1 and 256", tab.Stats().RecordGrowths, len(tab.ents))
	}
	// Fates out of order: the newest first (its records stay until the
	// older ones are resolved), a loss among them.
	fate(len(inflight)-1, true)
	fate(1, false)
	for len(inflight) > 0 {
		fate(0, true)
	}
	// Fates a packet or two late: the live records slide to index 0 when
	// a packet's candidates may not fit after them.
	for k := range 200 {
		write()
		for len(inflight) > 1+k%2 {
			fate(0, k%9 != 0)
		}
	}
	if slides == 0 {
		t.Fatal("the live records never slid to index 0")
	}
	if tab.Stats().Stalls != 1 {
		t.Fatalf("%d stalls, want the one at the cap", tab.Stats().Stalls)
	}
}
