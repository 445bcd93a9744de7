package move

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

func TestStreamAddRejects(t *testing.T) {
	tests := []struct {
		name string
		m    Move
		err  error
	}{
		{"sequence 0", Move{Seq: 0}, ErrSequence},
		{"sequence skips ahead", Move{Seq: 3}, ErrSequence},
		{"forward −128", Move{Seq: 2, Forward: -128}, ErrInvalidMove},
		{"strafe −128", Move{Seq: 2, Strafe: -128}, ErrInvalidMove},
		{"pitch above max", Move{Seq: 2, Pitch: PitchMax + 1}, ErrInvalidMove},
		{"pitch below min", Move{Seq: 2, Pitch: -PitchMax - 1}, ErrInvalidMove},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Stream
			if err := s.Add(Move{Seq: 1}); err != nil {
				t.Fatal(err)
			}
			if err := s.Add(tc.m); !errors.Is(err, tc.err) {
				t.Fatalf("Add(%+v) = %v, want %v", tc.m, err, tc.err)
			}
			if s.Len() != 1 || s.NextSeq() != 2 {
				t.Fatalf("a refused move changed the stream: len %d next %d", s.Len(), s.NextSeq())
			}
		})
	}
}

func TestStreamWindowAndAck(t *testing.T) {
	s, err := NewStream(Config{InputRate: 30, Window: 4})
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string, wantLen int, wantOldest uint64) {
		t.Helper()
		st := s.Stats()
		if s.Len() != wantLen || (wantLen > 0 && s.Oldest() != wantOldest) {
			t.Fatalf("%s: len %d oldest %d, want %d and %d", step, s.Len(), s.Oldest(), wantLen, wantOldest)
		}
		if st.Added != st.Acked+st.Dropped+uint64(s.Len()) {
			t.Fatalf("%s: stats %+v break Added == Acked + Dropped + Len (%d)", step, st, s.Len())
		}
	}
	for i := 0; i < 3; i++ {
		s.Add(Move{Seq: s.NextSeq()})
	}
	check("three added", 3, 1)
	s.Ack(2)
	check("ack 2", 1, 3)
	s.Ack(1)
	check("older ack ignored", 1, 3)
	for i := 0; i < 6; i++ {
		s.Add(Move{Seq: s.NextSeq()})
	}
	check("window of 4 overflowed", 4, 6)
	if d := s.Stats().Dropped; d != 3 {
		t.Fatalf("dropped %d, want 3 (moves 3, 4 and 5)", d)
	}
	if _, ok := s.Move(5); ok {
		t.Fatal("dropped move 5 still readable")
	}
	if m, ok := s.Move(9); !ok || m.Seq != 9 {
		t.Fatalf("Move(9) = %+v, %v", m, ok)
	}
	s.Ack(100)
	check("ack beyond newest is clamped", 0, 0)
	if s.Acked() != 9 {
		t.Fatalf("Acked = %d, want the clamped 9", s.Acked())
	}
}

// TestStreamWriteBudget: for every budget, the section fits, holds the longest
// prefix of the kept moves that fits, and decodes to exactly those moves.
func TestStreamWriteBudget(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := newInputGen(3)
	s := streamWith(t, Config{Window: 32}, 1)
	for i := 0; i < 32; i++ {
		m := gen.next(32)
		m.Seq, m.CRC = s.NextSeq(), rng.Uint32()
		if err := s.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	full := bitstream.NewWriter(make([]byte, 1200))
	if n, _ := s.Write(full); n != 32 {
		t.Fatalf("unbounded Write wrote %d moves, want 32", n)
	}
	var buf [1200]byte
	for budget := 0; budget <= full.BitLen()+8; budget++ {
		// A buffer of whole bytes with 0..7 bits used up front leaves exactly budget bits.
		w := bitstream.NewWriter(buf[:(budget+7)/8])
		for w.Remaining() > budget {
			w.WriteFlag(true)
		}
		start := w.BitLen()
		n, err := s.Write(w)
		used := w.BitLen() - start
		if budget == 0 {
			if !errors.Is(err, bitstream.ErrOverflow) || used != 0 {
				t.Fatalf("budget 0: err %v, %d bits", err, used)
			}
			continue
		}
		if err != nil || used > budget {
			t.Fatalf("budget %d: err %v, used %d bits", budget, err, used)
		}
		// Longest prefix: one more move would not have fit.
		if n < 32 {
			need := sectionHeaderBits + fullMoveBits
			for i := 1; i <= n; i++ {
				need += deltaBits(&s.ring[i], &s.ring[i+1])
			}
			if n > 0 && need <= budget {
				t.Fatalf("budget %d: wrote %d moves, but %d fit in %d bits", budget, n, n+1, need)
			}
			if n == 0 && used != 1 {
				t.Fatalf("budget %d: no move fits, want the 1-bit empty section, got %d bits", budget, used)
			}
		}
		var ap Applier
		var got []Move
		r := bitstream.NewReader(w.Bytes())
		for range start {
			r.ReadFlag("pad")
		}
		if err := ap.Read(r, func(m Move) { got = append(got, m) }); err != nil {
			t.Fatalf("budget %d: %v", budget, err)
		}
		if len(got) != n {
			t.Fatalf("budget %d: decoded %d moves, wrote %d", budget, len(got), n)
		}
		for i, m := range got {
			if want := s.ring[(i+1)%MaxWindow]; m.Seq != uint64(i+1) || !sameInput(&m, &want) {
				t.Fatalf("budget %d: move %d is %+v, want %+v (oldest first)", budget, i, m, want)
			}
		}
		if n > 0 && got[n-1].CRC != s.ring[n].CRC {
			t.Fatalf("budget %d: section CRC %#x is not the last written move's %#x", budget, got[n-1].CRC, s.ring[n].CRC)
		}
	}
}

func TestStreamDue(t *testing.T) {
	t.Run("30 Hz samples at floor(k/30 s), no drift", func(t *testing.T) {
		var s Stream
		start := 7 * time.Millisecond
		k := 0
		for now := start; now <= start+time.Hour; now += time.Millisecond {
			for s.Due(now) {
				want := start + time.Duration(k)*time.Second/30
				if now < want || now-want >= time.Millisecond {
					t.Fatalf("sample %d taken at %v, due at %v", k, now, want)
				}
				k++
			}
		}
		if k != 30*3600+1 {
			t.Fatalf("%d samples in one hour, want %d", k, 30*3600+1)
		}
	})
	t.Run("a stall yields at most Window catch-up samples", func(t *testing.T) {
		s, _ := NewStream(Config{InputRate: 20, Window: 8})
		s.Due(0) // sample 0
		n := 0
		for s.Due(10 * time.Second) {
			n++
		}
		if n != 8 {
			t.Fatalf("%d samples after a 10 s stall, want the window, 8", n)
		}
		if skipped := s.Stats().Skipped; skipped != 200-8 {
			t.Fatalf("skipped %d, want %d", skipped, 200-8)
		}
		if s.Due(10*time.Second + 49*ms) {
			t.Fatal("sample due before the next period")
		}
		if !s.Due(10*time.Second + 50*ms) {
			t.Fatal("no sample at the next period")
		}
	})
	t.Run("a full window holds input, never drops a move, and resumes on an ack", func(t *testing.T) {
		s, _ := NewStream(Config{InputRate: 20, Window: 8})
		now := time.Duration(0)
		// The server acknowledges nothing for 3 s: 60 samples are due.
		for ; now < 3*time.Second; now += 10 * ms {
			for s.Due(now) {
				if err := s.Add(Move{Seq: s.NextSeq(), Dt: 48}); err != nil {
					t.Fatal(err)
				}
			}
		}
		st := s.Stats()
		if st.Added != 8 || s.Len() != 8 || st.Dropped != 0 {
			t.Fatalf("added %d, kept %d, dropped %d; want 8, 8, 0", st.Added, s.Len(), st.Dropped)
		}
		if st.Held != 60-8 {
			t.Fatalf("held %d samples, want %d", st.Held, 60-8)
		}
		s.Ack(3)
		n := 0
		for s.Due(now) {
			n++
		}
		if n != 1 {
			t.Fatalf("%d samples at once after the ack, want 1 (held samples are not replayed)", n)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"default", DefaultConfig(), true},
		{"60 Hz, window 64", Config{InputRate: 60, Window: 64}, true},
		{"7 Hz does not divide 960", Config{InputRate: 7, Window: 32}, false},
		{"2 Hz: Dt would exceed 255", Config{InputRate: 2, Window: 32}, false},
		{"window 65", Config{InputRate: 30, Window: 65}, false},
		{"zero fields mean the defaults", Config{InputRate: 30}, true},
		{"negative window", Config{InputRate: 30, Window: -1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrConfig)) {
				t.Fatalf("Validate = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	if _, err := NewStream(Config{InputRate: 7}); err == nil {
		t.Fatal("NewStream accepted 7 Hz")
	}
	if dt := DefaultConfig().Dt(); dt != 32 {
		t.Fatalf("Dt at 30 Hz = %d, want 32", dt)
	}
	cc := []struct {
		name string
		cfg  ControlConfig
		ok   bool
	}{
		{"default", DefaultControlConfig(), true},
		{"zero", ControlConfig{}, true},
		{"negative period", ControlConfig{Period: -1}, false},
		{"hold over an hour", ControlConfig{HoldTimeout: 2 * time.Hour}, false},
	}
	for _, tc := range cc {
		t.Run("control "+tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrConfig)) {
				t.Fatalf("Validate = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// A stream continued from another (a client following a Redirect) writes
// the same unacknowledged moves under the same numbers, samples on the
// same clock, and its predictor reconciles an ack in that numbering.
func TestContinueCarriesUnackedMoves(t *testing.T) {
	old, _ := NewStream(Config{})
	pold, err := NewPredictor(old, Walk, ControlState{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Duration(0)
	for ; old.Newest() < 10; now += time.Millisecond {
		for old.Due(now) {
			if _, err := pold.Predict(Move{Dt: 32, Forward: 100, Yaw: 300}); err != nil {
				t.Fatal(err)
			}
		}
	}
	pold.Apply(ControlUpdate{Ack: 4})
	s, _ := NewStream(Config{})
	p, _ := NewPredictor(s, Walk, ControlState{})
	s.Continue(old)
	p.Continue(pold)
	if s.Oldest() != 5 || s.Newest() != 10 || s.Len() != 6 || s.Acked() != 4 {
		t.Fatalf("continued stream keeps %d..%d (len %d, acked %d), want 5..10 (6, 4)", s.Oldest(), s.Newest(), s.Len(), s.Acked())
	}
	if st := s.Stats(); st.Added != 0 || st.Acked != 0 {
		t.Fatalf("counters carried over: %+v", st)
	}
	var a, b [256]byte
	wa, wb := bitstream.NewWriter(a[:]), bitstream.NewWriter(b[:])
	if _, err := old.Write(wa); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(wb); err != nil {
		t.Fatal(err)
	}
	// The same moves, with the whole first sequence (the new server has
	// applied nothing to reconstruct a short one around) until told.
	if !s.LongSeq() || wb.BitLen() != wa.BitLen()+longBits-seqBits {
		t.Fatalf("continued stream: long %v, %d bits against the old one's %d", s.LongSeq(), wb.BitLen(), wa.BitLen())
	}
	s.UseShortSeq()
	wb = bitstream.NewWriter(b[:])
	if _, err := s.Write(wb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wa.Bytes(), wb.Bytes()) {
		t.Fatal("the continued stream writes another section than the old one")
	}
	if p.Current() != pold.Current() {
		t.Fatal("the continued predictor starts elsewhere")
	}
	// The next server acknowledges move 7 with the state the client
	// predicted after it: nothing to correct.
	want, _ := p.StateAt(7)
	if !p.Apply(ControlUpdate{Ack: 7, HasState: true, State: want}) || p.Offset() != [3]float32{} || p.Current() != pold.Current() {
		t.Fatalf("reconciling an ack in the old numbering moved the prediction by %v", p.Offset())
	}
	if s.NextSeq() != 11 {
		t.Fatalf("next sequence %d, want 11", s.NextSeq())
	}
}

// TestContinuedStreamPast32768ReachesAFreshServer: a client that played for
// more than 18 minutes (32,768 moves at 30 Hz) follows a Redirect and
// continues its stream on a new connection, whose server has applied
// nothing. The short sequence (16 low bits, reconstructed around the next
// expected move, 1) cannot reach 40,000: before the long form every section
// was rejected (ErrBadSeq) and the player stood still. The whole sequence
// goes until the new server has one; then the short form follows on.
func TestContinuedStreamPast32768ReachesAFreshServer(t *testing.T) {
	old, _ := NewStream(Config{})
	for old.Newest() < 40000 {
		if err := old.Add(Move{Seq: old.NextSeq(), Dt: 32, Forward: 100}); err != nil {
			t.Fatal(err)
		}
		old.Ack(old.Newest() - 3)
	}
	s, _ := NewStream(Config{})
	s.Continue(old)
	var ap Applier // the new connection's: nothing applied
	var got []uint64
	send := func() error {
		var b [1200]byte
		w := bitstream.NewWriter(b[:])
		if _, err := s.Write(w); err != nil {
			t.Fatal(err)
		}
		return ap.Read(bitstream.NewReader(w.Bytes()), func(m Move) { got = append(got, m.Seq) })
	}
	if err := send(); err != nil {
		t.Fatalf("the new server rejects the continued stream: %v", err)
	}
	if len(got) != 3 || got[0] != 39998 || got[2] != 40000 {
		t.Fatalf("the new server applied %v, want 39998..40000", got)
	}
	s.UseShortSeq() // that packet was delivered
	if err := s.Add(Move{Seq: s.NextSeq(), Dt: 32, Forward: 90}); err != nil {
		t.Fatal(err)
	}
	if err := send(); err != nil {
		t.Fatalf("short form after the long one: %v", err)
	}
	if got[len(got)-1] != 40001 || len(got) != 4 {
		t.Fatalf("applied %v, want 40001 last and nothing twice", got)
	}
}
