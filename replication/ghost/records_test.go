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

// A drop re-dirties exactly the groups no later packet carries, for groups
// above the record's entMaskBits too, and the high mask bits follow their
// records when the ring grows and when it shrinks back.
func TestWideMasksSurviveRingGrowth(t *testing.T) {
	reg, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	c := wideClass()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
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
	// 150 packets in flight, each carrying one high group (toggled):
	// the ring grows from initialRecords past 128.
	var sent []uint64
	lastOf := map[int]uint64{} // group → newest packet carrying it
	for k := range 150 {
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
	if got := tab.slots[id].dirty; got != want {
		t.Fatalf("dirty %064b after dropping every packet, want %064b", got, want)
	}
	st2 := tab.Stats()
	if r, s := st2.Redirtied-st.Redirtied, st2.Suppressed-st.Suppressed; r != uint64(bits.OnesCount64(want)) || s != 150-r {
		t.Fatalf("redirtied %d suppressed %d, want %d and %d", r, s, bits.OnesCount64(want), 150-bits.OnesCount64(want))
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
	if got := tab.slots[id].dirty; got&want != want {
		t.Fatalf("dirty %064b after dropped resends, want ⊇ %064b", got, want)
	}
}
