package swarm

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/session"
)

// extraValue is a random extra integer: zero most often, a move stamp's
// size, or anything up to 2^32 − 1 (codes too long for one window).
func extraValue(rng *rand.Rand) uint32 {
	switch rng.IntN(4) {
	case 0:
		return 0
	case 1:
		return rng.Uint32N(1 << 12)
	case 2:
		return rng.Uint32N(1 << 27)
	}
	return rng.Uint32()
}

// TestFastExtraReadsAsExtraGroup: the bots' decode of an extra group reads
// what ExtraGroup(n)'s Encode wrote exactly as ExtraGroup's own Decode does
// — the same values, the same bits consumed, an error where it errs — at
// any bit offset, from packets cut short anywhere, for n = 1..4; and it
// takes its one-window path for the usual values (a move stamp and zeros).
func TestFastExtraReadsAsExtraGroup(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	fast := 0
	for n := 1; n <= 4; n++ {
		g := ghost.ExtraGroup(n)
		if got := extraCount(g.Decode); got != n {
			t.Fatalf("extraCount(ExtraGroup(%d)) = %d", n, got)
		}
		slowCalls := 0
		slow := func(r *bitstream.Reader, s *ghost.State) error { slowCalls++; return g.Decode(r, s) }
		dec := fastExtra(n, slow)
		for i := range 20000 {
			var in ghost.State
			for k := range n {
				in.Extra[k] = extraValue(rng)
			}
			buf := make([]byte, 64)
			w := bitstream.NewWriter(buf)
			off := rng.IntN(40)
			for range off {
				w.WriteFlag(rng.IntN(2) == 0)
			}
			if err := g.Encode(w, &in); err != nil {
				t.Fatal(err)
			}
			end := w.BitLen()
			for range rng.IntN(80) { // what follows the group in the packet
				w.WriteFlag(rng.IntN(2) == 0)
			}
			nbits := w.BitLen()
			if rng.IntN(4) == 0 {
				nbits = off + rng.IntN(end-off+1) // cut short: the group may not fit
			}
			data := w.Bytes()
			if rng.IntN(2) == 0 {
				data = append(data, make([]byte, rng.IntN(9))...) // room past the limit
			}
			var rs, rf bitstream.Reader
			rs.ResetBits(data, nbits)
			rf.ResetBits(data, nbits)
			if off > 0 {
				rs.ReadBits(uint(off), "junk")
				rf.ReadBits(uint(off), "junk")
			}
			var ss, sf ghost.State
			sf.Extra = [4]uint32{9, 9, 9, 9}
			ss.Extra = sf.Extra
			es := g.Decode(&rs, &ss)
			before := slowCalls
			ef := dec(&rf, &sf)
			if slowCalls == before {
				fast++
			}
			if (es == nil) != (ef == nil) || rs.Pos() != rf.Pos() || (es == nil && sf != ss) {
				t.Fatalf("n %d case %d (%v at bit %d of %d): fast read %v, to bit %d, err %v; ExtraGroup's %v, to bit %d, err %v",
					n, i, in.Extra[:n], off, nbits, sf.Extra[:n], rf.Pos(), ef, ss.Extra[:n], rs.Pos(), es)
			}
			if es == nil && !slices.Equal(ss.Extra[:n], in.Extra[:n]) && nbits >= end {
				t.Fatalf("n %d case %d: read %v, wrote %v", n, i, ss.Extra, in.Extra)
			}
		}
	}
	t.Logf("%d of 80000 groups read from one window", fast)
	if fast < 10000 {
		t.Fatalf("the one-window path read %d of 80000 groups: the test checked the fallback only", fast)
	}
}

// TestBotRegistryReadsAsDefault: a mirror of the bots' registry and one of
// session.DefaultRegistry read the same sections of a server's table (on
// DefaultRegistry: players and NPCs, moving, their extras changing, the
// moves' stamps growing past one window, a tenth of the packets lost) into
// the same ghosts.
func TestBotRegistryReadsAsDefault(t *testing.T) {
	reg := session.DefaultRegistry()
	tab, err := ghost.NewTable(reg, ghost.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	pc, _ := reg.Lookup(ghost.PlayerClassID)
	nc, _ := reg.Lookup(ghost.NPCClassID)
	def, err := ghost.NewMirror(session.DefaultRegistry(), ghost.DefaultMirrorConfig())
	if err != nil {
		t.Fatal(err)
	}
	bot, err := ghost.NewMirror(botRegistry(), ghost.DefaultMirrorConfig())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 9))
	view := make([]ghost.ViewEntry, 48)
	for i := range view {
		c := pc
		if i%3 == 0 {
			c = nc
		}
		view[i] = ghost.ViewEntry{Entity: uint64(1000 + i), Class: c, Priority: 1,
			State: ghost.State{Pos: [3]float64{rng.Float64()*100 - 50, 0, rng.Float64()*100 - 50}, Health: 100}}
	}
	var (
		w   bitstream.Writer
		r   bitstream.Reader
		buf [session.MaxPacketSize]byte
	)
	now := time.Second
	compared := 0
	for seq := uint64(1); seq <= 400; seq++ {
		now += 50 * time.Millisecond
		for i := range view {
			s := &view[i].State
			s.Pos[0] = max(-500, min(500, s.Pos[0]+rng.Float64()-0.5))
			s.Pos[2] = max(-500, min(500, s.Pos[2]+rng.Float64()-0.5))
			s.Yaw = math.Mod(s.Yaw+rng.Float64()*0.2, 2*math.Pi)
			mv := uint64(seq) << (seq / 100 * 9) // from a small count to ≈ 2^35: both halves
			s.Extra[0], s.Extra[1] = uint32(mv), uint32(mv>>32)
			if rng.IntN(10) == 0 {
				s.Extra[2+rng.IntN(2)] = extraValue(rng)
			}
		}
		if err := tab.SetView(now, view); err != nil {
			t.Fatal(err)
		}
		w.Reset(buf[:])
		if _, err := tab.Write(&w, seq, now); err != nil {
			t.Fatal(err)
		}
		lost := rng.IntN(10) == 0 // neither mirror reads it, and the table learns so
		tab.OnFate(notify.Fate{Seq: seq, Delivered: !lost, SentAt: now})
		if lost {
			continue
		}
		for k, m := range []*ghost.Mirror{def, bot} {
			r.Reset(w.Bytes())
			if err := m.Read(&r, now+5*time.Millisecond); err != nil {
				t.Fatalf("packet %d: mirror %d: %v", seq, k, err)
			}
		}
		if def.Len() != bot.Len() {
			t.Fatalf("packet %d: %d ghosts, the default registry's mirror %d", seq, bot.Len(), def.Len())
		}
		for g := range def.All() {
			b, ok := bot.Lookup(g.ID)
			if !ok || b.Entity != g.Entity || b.State != g.State || b.Updated != g.Updated {
				t.Fatalf("packet %d: ghost %d (entity %d) reads %+v at %v, the default registry's %+v at %v",
					seq, g.ID, g.Entity, b.State, b.Updated, g.State, g.Updated)
			}
			compared++
		}
	}
	if st := bot.Stats(); st.Updates < 10000 || compared < 10000 {
		t.Fatalf("%d updates read, %d ghosts compared: the test checked little", st.Updates, compared)
	}
}
