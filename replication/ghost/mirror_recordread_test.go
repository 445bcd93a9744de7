package ghost

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// readSectionBy is Mirror.Read with rec reading each record (readRecord or
// readRecordFields).
func readSectionBy(m *Mirror, r *bitstream.Reader, now time.Duration,
	rec func(m *Mirror, r *bitstream.Reader, width uint, ms int64, now time.Duration) error) error {
	n, width, ms, err := m.readSectionHeader(r, now)
	for ; err == nil && n > 0; n-- {
		err = rec(m, r, width, ms, now)
	}
	return err
}

// TestRecordWindowReadsAsFields: readRecord, which takes a record's id and
// kind from one peeked window, reads a server's sections — players and NPCs
// moving, turning, entering and leaving the view (creates, default and
// explicit updates, kills), a tenth of the packets lost, a sixth of them
// cut short or with a bit flipped, ids past MaxGhosts — exactly as readRecordFields does: the
// same error (field and bit), bits consumed, counts and ghosts.
func TestRecordWindowReadsAsFields(t *testing.T) {
	st, errs, _ := readRecordsBoth(t, 0)
	if st.Creates < 100 || st.Updates < 10000 || st.Kills < 50 || errs < 10 {
		t.Fatalf("%+v, %d errors: the test checked little", st, errs)
	}
	// A mirror with room for fewer ghosts than the table's ids.
	if _, _, past := readRecordsBoth(t, 60); past < 100 {
		t.Fatalf("%d sections with an id past MaxGhosts: the test checked little", past)
	}
}

// readRecordsBoth reads 600 packets' sections (maxGhosts > 0: the mirrors'
// MaxGhosts) into a mirror by readRecord and one by readRecordFields,
// failing at their first difference, and returns the counts, the sections
// with an error and those with an id past MaxGhosts.
func readRecordsBoth(t *testing.T, maxGhosts int) (st MirrorStats, errs, past int) {
	reg, pc, nc := newTestRegistry(t)
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultMirrorConfig()
	if maxGhosts > 0 {
		cfg.MaxGhosts = maxGhosts
	}
	var ms [2]*Mirror
	for k := range ms {
		if ms[k], err = NewMirror(reg, cfg); err != nil {
			t.Fatal(err)
		}
	}
	recs := [2]func(m *Mirror, r *bitstream.Reader, width uint, ms int64, now time.Duration) error{
		(*Mirror).readRecord, (*Mirror).readRecordFields}
	rng := rand.New(rand.NewPCG(11, 12))
	all := make([]ViewEntry, 80)
	for i := range all {
		c := pc
		if i%3 == 0 {
			c = nc
		}
		all[i] = ViewEntry{Entity: uint64(100 + i), Class: c, Priority: 1,
			State: State{Pos: [3]float64{rng.Float64()*100 - 50, 0, rng.Float64()*100 - 50}, Health: 100}}
	}
	var (
		w    bitstream.Writer
		buf  [1200]byte
		view []ViewEntry
	)
	now := time.Second
	for seq := uint64(1); seq <= 600; seq++ {
		now += 50 * time.Millisecond
		view = view[:0]
		for i := range all {
			s := &all[i].State
			s.Pos[0] = max(-500, min(500, s.Pos[0]+rng.Float64()-0.5))
			s.Pos[2] = max(-500, min(500, s.Pos[2]+rng.Float64()-0.5))
			if rng.IntN(4) == 0 {
				s.Yaw = math.Mod(s.Yaw+rng.Float64(), 2*math.Pi)
			}
			if all[i].Class == pc {
				s.Extra[0] = uint32(seq)
			}
			if (i+int(seq)/40)%5 != 0 { // a fifth out of view, changing
				view = append(view, all[i])
			}
		}
		if err := tab.SetView(now, view); err != nil {
			t.Fatal(err)
		}
		w.Reset(buf[:])
		if _, err := tab.Write(&w, seq, now); err != nil {
			t.Fatal(err)
		}
		lost := rng.IntN(10) == 0
		tab.OnFate(notify.Fate{Seq: seq, Delivered: !lost, SentAt: now})
		if lost {
			continue
		}
		data := append([]byte(nil), w.Bytes()...)
		nbits := w.BitLen()
		switch rng.IntN(12) {
		case 0:
			nbits = rng.IntN(nbits + 1)
		case 1:
			b := rng.IntN(nbits)
			data[b/8] ^= 1 << (b % 8)
		}
		var rs [2]bitstream.Reader
		var es [2]error
		for k := range ms {
			rs[k].ResetBits(data, nbits)
			es[k] = readSectionBy(ms[k], &rs[k], now+5*time.Millisecond, recs[k])
		}
		if d := mirrorsDiffer(ms[0], ms[1]); fmt.Sprint(es[0]) != fmt.Sprint(es[1]) || rs[0].Pos() != rs[1].Pos() || d != "" {
			t.Fatalf("packet %d: window read to bit %d, err %v; fields to bit %d, err %v; %s",
				seq, rs[0].Pos(), es[0], rs[1].Pos(), es[1], d)
		}
		if es[0] != nil {
			errs++
		}
		if errors.Is(es[0], ErrIDWidth) {
			past++
		}
	}
	st = ms[0].Stats()
	t.Logf("MaxGhosts %d: %+v, %d sections with an error (%d an id past MaxGhosts)", cfg.MaxGhosts, st, errs, past)
	return st, errs, past
}

// mirrorsDiffer says how two mirrors' counts and live ghosts differ ("" for
// none).
func mirrorsDiffer(a, b *Mirror) string {
	if a.stats != b.stats || a.Len() != b.Len() {
		return fmt.Sprintf("stats %+v, %d ghosts; %+v, %d ghosts", a.stats, a.Len(), b.stats, b.Len())
	}
	for g := range a.All() {
		h, ok := b.Lookup(g.ID)
		if !ok || h.Entity != g.Entity || h.Class != g.Class || h.State != g.State || h.Updated != g.Updated || h.q != g.q {
			return fmt.Sprintf("ghost %d: %+v; %v", g.ID, g.State, ok)
		}
	}
	return ""
}
