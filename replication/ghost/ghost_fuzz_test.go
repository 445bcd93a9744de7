package ghost

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// FuzzGhostDecode feeds arbitrary bytes to Mirror.Read, on a fresh mirror
// and on one already holding ghosts (so updates and kills find targets): it
// must return an error or nil, never panic, and keep memory bounded by
// MaxGhosts.
func FuzzGhostDecode(f *testing.F) {
	reg, pc, nc := newTestRegistry(f)
	// A valid section as a seed: creates, then updates.
	seedTab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		f.Fatal(err)
	}
	w := newWorld(3, reg, pc, nc)
	for range 6 {
		w.ents = append(w.ents, w.spawn())
	}
	var buf [MaxPacketBytes]byte
	var bw bitstream.Writer
	now := time.Second
	var seeds [][]byte
	for i := range 4 {
		now += 50 * time.Millisecond
		for j := range w.ents {
			w.mutate(j)
		}
		if err := seedTab.SetView(now, w.view()); err != nil {
			f.Fatal(err)
		}
		bw.Reset(buf[:])
		if _, err := seedTab.Write(&bw, uint64(i+1), now); err != nil {
			f.Fatal(err)
		}
		seedTab.OnFate(notify.Fate{Seq: uint64(i + 1), Delivered: true, SentAt: now})
		seeds = append(seeds, slices.Clone(bw.Bytes()))
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add([]byte{})
	f.Add([]byte{0x01})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x04, 0x00, 0x00, 0xa0, 0x0f})

	cfg := DefaultMirrorConfig()
	cfg.MaxGhosts = 4096 // bounds what a hostile input can make us allocate
	f.Fuzz(func(t *testing.T, data []byte) {
		fresh, err := NewMirror(reg, cfg)
		if err != nil {
			t.Fatal(err)
		}
		primed, err := NewMirror(reg, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var r bitstream.Reader
		for _, s := range seeds[:1] { // the creates
			r.Reset(s)
			if err := primed.Read(&r, time.Second); err != nil {
				t.Fatalf("seed section: %v", err)
			}
		}
		for _, m := range []*Mirror{fresh, primed} {
			r.Reset(data)
			err := m.Read(&r, 2*time.Second)
			if err != nil {
				var re *bitstream.ReadError
				if !errors.As(err, &re) {
					t.Fatalf("error is not a *bitstream.ReadError: %v", err)
				}
			}
			if m.Len() > cfg.MaxGhosts {
				t.Fatalf("%d ghosts > MaxGhosts", m.Len())
			}
			for g := range m.All() { // whatever was applied is usable
				if _, ok := m.Lookup(g.ID); !ok {
					t.Fatalf("live ghost %d not found by id", g.ID)
				}
				m.Pose(g, 3*time.Second)
			}
		}
	})
}

// FuzzGhostOps drives a Table and a Mirror with an operation script (view
// changes, packet writes, deliveries in any order, losses, fates in send
// order, time) and checks after every step:
//
//   - the table's bookkeeping is consistent (checkInvariants);
//   - the mirror decodes every delivered packet (the position windows hold
//     under any reordering);
//   - no id collision: every ghost the client holds names, on the server,
//     a ghost id in use by the same entity;
//   - nothing is lost (RL-5): a group on which the client differs from the
//     server is dirty or carried by a packet whose fate is unknown;
//   - drop handling matches the reference model (book Listing 7.13, the
//     naive scan): a dropped update re-dirties exactly the groups no later
//     unresolved packet carries;
//
// and at the end, after a lossless quiet period, that the client holds
// exactly the view.
var opsSeeds = [][]byte{
	{0, 7, 1, 0, 2, 1, 3, 2, 0, 1, 200, 2, 0, 4, 5, 10},
	{0, 3, 5, 0, 1, 1, 2, 0, 1, 100, 3, 0, 1, 100, 2, 0, 4, 0, 2, 0, 0, 4, 4, 0, 1, 1, 4},
	{1, 255, 2, 0, 4, 0, 200, 1, 2, 3, 4, 1, 30, 2, 1, 2, 0, 3, 0, 4, 6, 1, 9, 7},
	[]byte("\x00\x07\x01\x00\x11\x02\x22\x03\x33\x01\x05\x44\x01\xff\x02\x00\x02\x00\x04\x00\x09\x08\x01\xff\x03\x00\x02\x00\x04"),
	// Leave and come back before the kill went out, with changes between.
	{0, 2, 4, 0, 5, 2, 1, 200, 7, 0, 2, 4, 0, 5, 2, 1, 30, 0, 3, 4, 0, 5, 17, 5, 5, 4, 1, 200, 7, 0, 1, 4, 0, 1, 200, 3, 0, 7},
}

// randomScripts are longer ops scripts for the snapshot targets' seed
// runs: the hand-written seeds are short, and a missed stamp shows only
// once a ghost that is already held changes a group.
func randomScripts() [][]byte {
	rng := rand.New(rand.NewPCG(13, 1))
	out := make([][]byte, 12)
	for i := range out {
		out[i] = make([]byte, 600)
		for j := range out[i] {
			out[i][j] = byte(rng.Uint32())
		}
	}
	return out
}

func FuzzGhostOps(f *testing.F) {
	for _, s := range opsSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		h := newOpsHarness(t)
		h.run(script)
		h.quiesce()
	})
}

// FuzzGhostOpsSnapshot is FuzzGhostOps with the views given as snapshots
// (SetSnapshotView), some of them skipped, from two writers in turn (a
// handoff between zones): the table must keep every invariant, and
// converge, from stamps and diffs alone.
func FuzzGhostOpsSnapshot(f *testing.F) {
	for _, s := range append(opsSeeds, randomScripts()...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		h := newOpsHarness(t)
		h.snapMode(false)
		h.run(script)
		h.quiesce()
	})
}

// FuzzSnapshotViewsWriteWhatEntryViewsWrite runs the ops scripts with a
// second table taking every view as a snapshot, in lockstep: with no view
// skipped, stamps and diffs must find the same groups, so every packet of
// the two tables must be the same bytes.
func FuzzSnapshotViewsWriteWhatEntryViewsWrite(f *testing.F) {
	for _, s := range append(opsSeeds, randomScripts()...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		h := newOpsHarness(t)
		h.snapMode(true)
		h.run(script)
		h.quiesce()
	})
}

// FuzzMixedViewsWriteWhatEntryViewsWrite is
// FuzzSnapshotViewsWriteWhatEntryViewsWrite with the twin switching between
// snapshot and entry views from view to view, and entities removed from
// both tables between views (Remove; the next view brings them back before
// or after their kill went out): what a table keeps of a ghost across the
// switches and of a ghost that left (its gone record) must give the same
// bytes as the table that keeps every state itself.
func FuzzMixedViewsWriteWhatEntryViewsWrite(f *testing.F) {
	for _, s := range append(opsSeeds, randomScripts()...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		h := newOpsHarness(t)
		h.snapMode(true)
		h.mixed = true
		h.run(script)
		h.quiesce()
	})
}

// FuzzReorderedViewsWriteWhatEntryViewsWrite is
// FuzzSnapshotViewsWriteWhatEntryViewsWrite with views that change order
// from view to view (entities moved, swapped, the order rotated), as a
// zone's do: the snapshot table walks each view in lockstep with the
// previous one's order, and whatever hint it follows, it must find the
// same ghosts as the table that asks its index for every entity.
func FuzzReorderedViewsWriteWhatEntryViewsWrite(f *testing.F) {
	for _, s := range append(opsSeeds, randomScripts()...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		h := newOpsHarness(t)
		h.snapMode(true)
		h.reorder = true
		h.run(script)
		h.quiesce()
	})
}

// FuzzGhostOpsReorderedSnapshot is FuzzGhostOpsSnapshot with views that
// change order from view to view (FuzzReorderedViewsWriteWhatEntryViewsWrite),
// some skipped, from two writers in turn.
func FuzzGhostOpsReorderedSnapshot(f *testing.F) {
	for _, s := range append(opsSeeds, randomScripts()...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		h := newOpsHarness(t)
		h.snapMode(false)
		h.reorder = true
		h.run(script)
		h.quiesce()
	})
}

const opsUniverse = 24

// leaving reports whether a ghost of t is leaving scope (phaseKilling) or
// will leave with the harness's view.
func (h *opsHarness) leaving(t *Table) bool {
	in := map[uint64]bool{}
	for i := range h.ents {
		if h.in[i] {
			in[h.ents[i].Entity] = true
		}
	}
	for rc := range uint32(t.live) {
		if s := &t.slots[rc]; s.phase == phaseKilling || !in[t.entityOf(rc)] {
			return true
		}
	}
	return false
}

var opsTrace = false

type opsPkt struct {
	seq       uint64
	data      []byte
	sentAt    time.Duration
	delivered bool // processed by the mirror
	lost      bool
	fated     bool
}

type opsHarness struct {
	t      *testing.T
	reg    *Registry
	pc, nc *Class
	tab    *Table
	mir    *Mirror
	ents   [opsUniverse]ViewEntry
	in     [opsUniverse]bool
	pkts   []opsPkt
	next   int // first unfated packet
	seq    uint64
	now    time.Duration
	script []byte
	pos    int
	buf    [MaxPacketBytes]byte
	w      bitstream.Writer
	r      bitstream.Reader
	before map[uint32]uint64 // dirty masks before the fate being checked

	// Snapshot views (snapMode): sw seals a snapshot of the whole universe
	// (entry i is entity i) per view. twin, if set, is a second table
	// taking those snapshots while tab takes ViewEntries, checked to write
	// the same bytes; otherwise tab itself takes the snapshots and op 0
	// skips some.
	sw    *SnapshotWriter
	alt   *SnapshotWriter // the other zone's writer (FuzzGhostOpsSnapshot switches)
	twin  *Table
	mixed bool // the twin takes some views as entries, and op 6 may Remove
	skips int
	tbuf  [MaxPacketBytes]byte
	tw    bitstream.Writer

	// reorder: op 0 also changes the order views list entities in
	// (order, a permutation of the universe; nil: by index).
	reorder bool
	order   []int
}

// snapMode switches the harness to snapshot views (see opsHarness.sw).
func (h *opsHarness) snapMode(twin bool) {
	var err error
	if h.sw, err = NewSnapshotWriter(h.reg); err != nil {
		h.t.Fatal(err)
	}
	if h.alt, err = NewSnapshotWriter(h.reg); err != nil {
		h.t.Fatal(err)
	}
	if twin {
		cfg := DefaultConfig()
		cfg.MaxPacketsInFlight = 16
		cfg.MaxRecordsInFlight = 256
		if h.twin, err = NewTable(h.reg, cfg); err != nil {
			h.t.Fatal(err)
		}
	}
}

// snapshot seals the universe as it is now and returns it with the refs of
// the entities in view.
func (h *opsHarness) snapshot() (*Snapshot, []ViewRef) {
	s := h.sw.Next(opsUniverse)
	var refs []ViewRef
	for i := range h.ents {
		e := &h.ents[i]
		s.Set(i, e.Entity, e.Class, &e.State)
	}
	for _, i := range h.viewOrder() {
		if e := &h.ents[i]; h.in[i] {
			refs = append(refs, NewViewRef(uint32(i), e.Class, e.Priority))
		}
	}
	h.sw.Seal(s)
	return s, refs
}

func newOpsHarness(t *testing.T) *opsHarness {
	reg, pc, nc := newTestRegistry(t)
	cfg := DefaultConfig()
	cfg.MaxPacketsInFlight = 16
	cfg.MaxRecordsInFlight = 256
	tab, err := NewTable(reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mir, err := NewMirror(reg, DefaultMirrorConfig())
	if err != nil {
		t.Fatal(err)
	}
	h := &opsHarness{t: t, reg: reg, pc: pc, nc: nc, tab: tab, mir: mir, now: time.Second}
	for i := range h.ents {
		c := nc
		if i%3 == 0 {
			c = pc
		}
		h.ents[i] = ViewEntry{Entity: uint64(500 + i), Class: c, Priority: float32(i+1) / opsUniverse}
		h.ents[i].State.Pos = [3]float64{float64(i), float64(-i), 1}
		h.ents[i].State.Name = MustName("wolf")
	}
	return h
}

func (h *opsHarness) byte() (byte, bool) {
	if h.pos >= len(h.script) {
		return 0, false
	}
	h.pos++
	return h.script[h.pos-1], true
}

func (h *opsHarness) arg() int { b, _ := h.byte(); return int(b) }

func (h *opsHarness) view() []ViewEntry {
	var v []ViewEntry
	for _, i := range h.viewOrder() {
		if h.in[i] {
			v = append(v, h.ents[i])
		}
	}
	return v
}

// viewOrder is the order views list the universe in: by index, or
// h.order once reorder is set.
func (h *opsHarness) viewOrder() []int {
	if h.order == nil {
		h.order = make([]int, opsUniverse)
		for i := range h.order {
			h.order[i] = i
		}
	}
	return h.order
}

// reorderView moves entity a of the view order to position b, or swaps
// two, or rotates the order, as the script says (reorder set): a zone's
// interest sets change order from tick to tick as entities cross grid
// cells.
func (h *opsHarness) reorderView() {
	o := h.viewOrder()
	a, b := h.arg()%opsUniverse, h.arg()%opsUniverse
	switch h.arg() % 3 {
	case 0:
		x := o[a]
		o = slices.Delete(o, a, a+1)
		h.order = slices.Insert(o, b, x)
	case 1:
		o[a], o[b] = o[b], o[a]
	case 2:
		slices.Reverse(o[:a])
		slices.Reverse(o[a:])
		slices.Reverse(o)
	}
}

func (h *opsHarness) setView() {
	h.now += time.Millisecond + time.Duration(h.arg())*time.Millisecond
	h.applyView()
}

func (h *opsHarness) applyView() {
	if h.sw == nil || h.twin != nil {
		if err := h.tab.SetView(h.now, h.view()); err != nil {
			h.t.Fatalf("SetView: %v", err)
		}
	}
	if h.sw == nil {
		return
	}
	s, refs := h.snapshot()
	tab := h.twin
	if tab == nil {
		tab = h.tab
	}
	entries := h.mixed && (h.now/time.Millisecond)%3 == 0
	if h.mixed && entries == tab.snapMode && h.leaving(tab) {
		// No switch while a ghost is leaving or about to: snapshot views
		// keep no state of a leaving ghost, so after a switch either way
		// its re-entry takes every group where the entry-view table takes
		// the changed ones (leaveSnapshots, enterSnapshots): more bytes,
		// never a change missed (TestEntryViewReentryAfterSnapshotViewsTakesEveryGroup).
		entries = !tab.snapMode
	}
	if entries {
		// The zone sealed its snapshot, but this view reaches the twin as
		// entries (a view from another process).
		if err := tab.SetView(h.now, h.view()); err != nil {
			h.t.Fatalf("twin SetView: %v", err)
		}
		return
	}
	if err := tab.SetSnapshotView(h.now, s, refs); err != nil {
		h.t.Fatalf("SetSnapshotView: %v", err)
	}
}

func (h *opsHarness) run(script []byte) {
	h.script = script
	for {
		op, ok := h.byte()
		if !ok {
			return
		}
		if opsTrace {
			s0 := h.tab.slots
			if len(s0) > 0 {
				h.t.Logf("op %d (%d) now %v: slot0 phase %d dirty %b inflight %d created %v; pkts %d next %d", h.pos, op%8, h.now, s0[0].phase, s0[0].dirty, s0[0].inflight, s0[0].has(flCreated), len(h.pkts), h.next)
			}
		}
		switch op % 8 {
		case 0: // view change
			for n := h.arg()%6 + 1; n > 0; n-- {
				i := h.arg() % opsUniverse
				s := &h.ents[i].State
				switch d := h.arg(); d % 5 {
				case 0:
					h.in[i] = !h.in[i]
				case 1:
					b := h.reg.Bounds()
					s.Pos[0] = moveWithin(s.Pos[0], float64(d)/7, b.Min[0], b.Max[0])
					s.Pos[1] = moveWithin(s.Pos[1], -float64(d%13)/3, b.Min[1], b.Max[1])
				case 2:
					s.Health = int32(d * 3)
				case 3:
					s.Yaw += float64(d) / 40
					s.Flags = uint32(d)
				case 4:
					s.Pos[2] = float64(d) / 100
					h.ents[i].Priority = float32(d) / 50
				}
			}
			if h.reorder {
				h.reorderView()
			}
			if h.sw != nil && h.twin == nil && h.arg()%4 == 0 {
				h.sw, h.alt = h.alt, h.sw // a handoff: another zone's series, its own seqs
			}
			if h.sw != nil && h.twin == nil && h.arg()%3 == 0 {
				h.snapshot() // a view the table never takes: its stamps must still count
				h.skips++
				break
			}
			h.setView()
		case 1: // write a packet
			h.write(1+h.arg()*5, false)
		case 2: // deliver an in-flight packet, in any order
			if c := h.candidates(); len(c) > 0 {
				h.deliver(c[h.arg()%len(c)])
			}
		case 3: // lose an in-flight packet
			if c := h.candidates(); len(c) > 0 {
				h.pkts[c[h.arg()%len(c)]].lost = true
			}
		case 4: // fates, in send order, of every decided packet
			h.fates()
		case 5:
			h.now += time.Duration(h.arg()) * time.Millisecond
		case 6: // same view, new time: stamps move on
			if h.mixed && h.arg()%3 == 0 {
				// Out of scope now, in the view again at the next one.
				e := h.ents[h.arg()%opsUniverse].Entity
				h.tab.Remove(e)
				h.twin.Remove(e)
				break
			}
			h.setView()
		case 7: // everything in flight arrives, fates follow
			for _, i := range h.candidates() {
				h.deliver(i)
			}
			h.fates()
		}
		h.check()
	}
}

// moveWithin is v moved by dv inside [lo, hi]. The moves only ever go one
// way, so long scripts walked entities out of the world, and the table
// refuses such a view (ErrBadState) as no zone sends one: a move past an
// edge stops at it, and one from the edge goes on from the other edge (a
// jump across the world), so scripts keep reaching both edges of an axis.
func moveWithin(v, dv, lo, hi float64) float64 {
	switch n := v + dv; {
	case n > hi && v == hi:
		return lo
	case n > hi:
		return hi
	case n < lo && v == lo:
		return hi
	case n < lo:
		return lo
	default:
		return n
	}
}

// candidates are packets neither delivered nor lost.
func (h *opsHarness) candidates() []int {
	var c []int
	for i := h.next; i < len(h.pkts); i++ {
		if p := &h.pkts[i]; !p.delivered && !p.lost {
			c = append(c, i)
		}
	}
	return c
}

func (h *opsHarness) write(budget int, quiet bool) {
	budget = min(budget, MaxPacketBytes)
	h.seq++
	h.w.Reset(h.buf[:budget])
	if _, err := h.tab.Write(&h.w, h.seq, h.now); err != nil {
		h.t.Fatalf("Write: %v", err)
	}
	if h.w.BitLen() > budget*8 {
		h.t.Fatalf("section of %d bits in a %d-byte budget", h.w.BitLen(), budget)
	}
	if h.twin != nil {
		h.tw.Reset(h.tbuf[:budget])
		if _, err := h.twin.Write(&h.tw, h.seq, h.now); err != nil {
			h.t.Fatalf("twin Write: %v", err)
		}
		if !bytes.Equal(h.tw.Bytes(), h.w.Bytes()) {
			h.t.Fatalf("after op %d: packet %d: snapshot views wrote %x, entry views %x", h.pos, h.seq, h.tw.Bytes(), h.w.Bytes())
		}
	}
	h.pkts = append(h.pkts, opsPkt{seq: h.seq, data: slices.Clone(h.w.Bytes()), sentAt: h.now})
}

// maxNetDelay is the longest a packet may take to arrive: the 16-bit
// section stamps are read within ±32.7 s of the client's estimate of the
// server's clock (protocol.md § 6.2), and a stamp is its view's time, up to
// maxViewAgeMS old when the packet leaves; a packet later than the rest of
// the window would throw the client off. The network loses a packet held
// longer instead.
const maxNetDelay = 32*time.Second - maxViewAgeMS*time.Millisecond

func (h *opsHarness) deliver(i int) {
	p := &h.pkts[i]
	if h.now-p.sentAt > maxNetDelay {
		p.lost = true
		return
	}
	p.delivered = true
	h.r.Reset(p.data)
	if err := h.mir.Read(&h.r, h.now); err != nil {
		h.t.Fatalf("Mirror.Read of packet %d: %v", p.seq, err)
	}
}

// fates reports, in send order, every packet whose fate is decided, checking
// drop handling against the reference model.
func (h *opsHarness) fates() {
	for h.next < len(h.pkts) {
		p := &h.pkts[h.next]
		if !p.delivered && !p.lost {
			return
		}
		f := notify.Fate{Seq: p.seq, Delivered: p.delivered, SentAt: p.sentAt}
		var want map[uint32]uint64 // id → groups that must be dirty after the fate
		if !f.Delivered {
			want = h.expectRedirty(f.Seq)
		}
		h.tab.OnFate(f)
		if h.twin != nil {
			h.twin.OnFate(f)
		}
		p.fated = true
		h.next++
		for id, m := range want {
			if h.tab.dirtyAt(id)&m != m {
				h.t.Fatalf("drop of %d: ghost %d should have groups %b dirty again, has %b", f.Seq, id, m, h.tab.dirtyAt(id))
			}
		}
		if !f.Delivered {
			h.checkNotRedirtied(f.Seq, want)
		}
	}
}

// carried lists, from the table's transmission records, the groups each
// unresolved packet carries per ghost (records of a freed id are never in
// flight: checkInvariants).
func (h *opsHarness) carried() map[uint64]map[uint32]uint64 {
	t := h.tab
	out := map[uint64]map[uint32]uint64{}
	for k := 0; k < int(t.pktLen); k++ {
		p := &t.pkts[(int(t.pktHead)+k)&(len(t.pkts)-1)]
		if p.resolved {
			continue
		}
		m := map[uint32]uint64{}
		for j := 0; j < int(p.n); j++ {
			k := int(p.start) + j
			m[t.idOf(t.ents[k].rec())] = t.entMask(k, t.ents[k])
		}
		out[t.lastSeq-uint64(uint32(t.lastSeq)-p.seq)] = m
	}
	return out
}

// expectRedirty is the reference model of Listing 7.13: for each update in
// the dropped packet, the groups no other unresolved later packet carries.
func (h *opsHarness) expectRedirty(seq uint64) map[uint32]uint64 {
	t := h.tab
	c := h.carried()
	want := map[uint32]uint64{}
	h.before = map[uint32]uint64{}
	for k, mask := range c[seq] {
		if !t.inUse(k) {
			continue
		}
		h.before[k] = t.dirtyAt(k)
		isUpdate := false
		for j := 0; j < int(t.pktLen); j++ {
			p := &t.pkts[(int(t.pktHead)+j)&(len(t.pkts)-1)]
			if p.seq == uint32(seq) {
				for i := 0; i < int(p.n); i++ {
					if e := t.ents[int(p.start)+i]; t.idOf(e.rec()) == k && e.kind() == recUpdate {
						isUpdate = true
					}
				}
			}
		}
		if !isUpdate {
			continue
		}
		for later, m := range c {
			if later > seq {
				mask &^= m[k]
			}
		}
		want[k] = mask
	}
	return want
}

func (h *opsHarness) checkNotRedirtied(seq uint64, want map[uint32]uint64) {
	for id, before := range h.before {
		if !h.tab.inUse(id) {
			continue
		}
		if extra := h.tab.dirtyAt(id) &^ before &^ want[id]; extra != 0 {
			h.t.Fatalf("drop of %d: ghost %d got groups %b dirty that a later packet carries", seq, id, extra)
		}
	}
}

// check runs the per-step invariants.
func (h *opsHarness) check() {
	t := h.tab
	if err := checkInvariants(t); err != nil {
		h.t.Fatalf("after op %d: %v", h.pos, err)
	}
	if h.twin != nil {
		if err := checkInvariants(h.twin); err != nil {
			h.t.Fatalf("after op %d: snapshot twin: %v", h.pos, err)
		}
	}
	// No id collision: every client ghost is, on the server, that entity.
	for g := range h.mir.All() {
		if !t.inUse(g.ID) || t.entityOf(t.recOf(g.ID)) != g.Entity {
			h.t.Fatalf("client ghost %d holds entity %d, the server's id %d does not", g.ID, g.Entity, g.ID)
		}
	}
	if h.mir.Stats().Replaced != 0 {
		h.t.Fatalf("a create landed on an id holding another entity")
	}
	// RL-5: what the client lacks is dirty or in flight.
	c := h.carried()
	tol := h.reg.PosMaxError()
	for rc := range uint32(t.live) {
		s := &t.slots[rc]
		if s.phase != phaseLive {
			continue
		}
		i := t.idOf(rc)
		g, ok := h.mir.Lookup(i)
		if !ok || g.Entity != t.entityOf(rc) {
			h.t.Fatalf("ghost %d live on the server (create delivered) but not on the client", i)
		}
		var inFlight uint64
		for _, m := range c {
			inFlight |= m[i]
		}
		cls := t.classOf(s)
		want := t.stateOf(rc)
		for gi := range cls.Groups {
			grp := &cls.Groups[gi]
			var differs bool
			if grp.pos {
				differs = g.q != *t.qposOf(rc, s)
				for a := range 3 {
					if math.Abs(g.State.Pos[a]-want.Pos[a]) > tol && !differs {
						h.t.Fatalf("ghost %d: same code, different position", i)
					}
				}
			} else {
				differs = grp.Changed(&g.State, want)
			}
			bit := uint64(1) << uint(gi)
			if differs && t.dirtyAt(i)&bit == 0 && inFlight&bit == 0 {
				h.t.Fatalf("after op %d: ghost %d group %s differs on the client, is not dirty and not in flight", h.pos, i, grp.Name)
			}
		}
	}
}

// quiesce delivers everything, then runs lossless packets until nothing is
// pending, and checks the client holds exactly the view.
func (h *opsHarness) quiesce() {
	for _, i := range h.candidates() {
		h.deliver(i)
	}
	h.fates()
	for round := 0; round < 200; round++ {
		h.now += 50 * time.Millisecond
		h.applyView()
		if !h.tab.Pending() && h.tab.InFlight() == 0 {
			break
		}
		h.write(MaxPacketBytes, true)
		h.deliver(len(h.pkts) - 1)
		h.fates()
		h.check()
	}
	view := h.view()
	if d := mismatch(h.reg, h.mir, view); d != "" {
		h.t.Fatalf("after a quiet period the client differs: %s", d)
	}
	if h.tab.Len() != len(view) {
		h.t.Fatalf("table holds %d ids for a view of %d (leaked ids)", h.tab.Len(), len(view))
	}
	if h.tab.Pending() || h.tab.InFlight() != 0 {
		h.t.Fatalf("still pending after the quiet period")
	}
}
