package event

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// sec builds event sections field by field, straight from the spec, for
// tests that need sections no honest Sender writes.
type sec struct {
	t   testing.TB
	cfg Config
	w   bitstream.Writer
	has map[int]bool
}

func newSec(t testing.TB, cfg Config) *sec {
	s := &sec{t: t, cfg: cfg, has: map[int]bool{}}
	s.w.Reset(make([]byte, 70000))
	return s
}

func (s *sec) bits(v uint64, n uint) *sec {
	if n > 0 {
		if err := s.w.WriteBits(v, n); err != nil {
			s.t.Fatal(err)
		}
	}
	return s
}

func (s *sec) gamma(v uint64) *sec {
	if err := s.w.WriteGamma(v); err != nil {
		s.t.Fatal(err)
	}
	return s
}

func (s *sec) payload(p []byte) *sec {
	s.gamma(uint64(len(p)) + 1)
	if len(p) > 0 {
		if err := s.w.WriteBytes(p); err != nil {
			s.t.Fatal(err)
		}
	}
	return s
}

// id writes the next flag (when the stream already appeared) as 0 and the
// truncated id.
func (s *sec) id(stream int, id uint64) *sec {
	if s.has[stream] {
		s.bits(0, 1)
	}
	s.has[stream] = true
	b := idWidth(s.cfg.MaxInFlightPerLane)
	return s.bits(id&(1<<b-1), b)
}

func (s *sec) ordered(lane int, id uint64, p []byte) *sec {
	s.bits(1, 1).bits(uint64(Ordered), 2).bits(uint64(lane), bitstream.RangeBits(0, int64(s.cfg.Lanes-1)))
	return s.id(lane, id).bits(0, 1).payload(p)
}

// orderedFrag writes an ordered fragment; fkind 0 first (with total), 1
// middle, 2 last, 3 invalid.
func (s *sec) orderedFrag(lane int, id uint64, fkind uint64, total int, p []byte) *sec {
	s.bits(1, 1).bits(uint64(Ordered), 2).bits(uint64(lane), bitstream.RangeBits(0, int64(s.cfg.Lanes-1)))
	s.id(lane, id).bits(1, 1).bits(fkind, 2)
	if fkind == 0 {
		s.bits(uint64(total-1), 16)
	}
	return s.payload(p)
}

func (s *sec) unordered(id uint64, p []byte) *sec {
	s.bits(1, 1).bits(uint64(Unordered), 2)
	return s.id(s.cfg.Lanes, id).bits(0, 1).payload(p)
}

func (s *sec) unorderedFrag(id uint64, index, total, off int, p []byte) *sec {
	s.bits(1, 1).bits(uint64(Unordered), 2)
	s.id(s.cfg.Lanes, id).bits(1, 1).gamma(uint64(index)+1).bits(uint64(total-1), 16).bits(uint64(off), 16)
	return s.payload(p)
}

func (s *sec) staggered(key, version int, p []byte) *sec {
	s.bits(1, 1).bits(uint64(Staggered), 2).bits(uint64(key), bitstream.RangeBits(0, int64(s.cfg.StaggerKeys-1)))
	return s.bits(uint64(version), 16).payload(p)
}

func (s *sec) unguaranteed(p []byte) *sec {
	return s.bits(1, 1).bits(uint64(Unguaranteed), 2).payload(p)
}

// end closes the section and returns its bytes.
func (s *sec) end() []byte {
	s.bits(0, 1)
	return s.w.Bytes()
}

// read feeds a section to r and returns what it delivered.
func read(r *Receiver, b []byte) ([]got, error) {
	var g []got
	var rd bitstream.Reader
	rd.Reset(b)
	err := r.Read(&rd, func(e Event) { g = append(g, got{e.Class, e.Lane, e.Key, string(e.Payload)}) })
	return g, err
}

func newReceiver(t testing.TB, cfg Config) *Receiver {
	t.Helper()
	r, err := NewReceiver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReceiverOrdering: ordered units arriving out of order are buffered and
// delivered in order, duplicates are discarded by id, other lanes and the
// unordered stream are never held back (RL-2, RL-3, RL-11's 1, 2, 5, 3, 4).
func TestReceiverOrdering(t *testing.T) {
	cfg := DefaultConfig()
	r := newReceiver(t, cfg)
	var order []string
	for _, step := range []struct {
		sec  []byte
		want []string
	}{
		{newSec(t, cfg).ordered(0, 0, []byte("1")).end(), []string{"1"}},
		{newSec(t, cfg).ordered(0, 1, []byte("2")).end(), []string{"2"}},
		{newSec(t, cfg).ordered(0, 4, []byte("5")).ordered(1, 0, []byte("b1")).unordered(7, []byte("u7")).end(), []string{"b1", "u7"}},
		{newSec(t, cfg).ordered(0, 1, []byte("2")).ordered(0, 2, []byte("3")).end(), []string{"3"}},
		{newSec(t, cfg).ordered(0, 4, []byte("5")).unordered(7, []byte("u7")).unordered(0, []byte("u0")).end(), []string{"u0"}},
		{newSec(t, cfg).ordered(0, 3, []byte("4")).end(), []string{"4", "5"}},
	} {
		g, err := read(r, step.sec)
		if err != nil {
			t.Fatal(err)
		}
		if p := payloads(g); !slices.Equal(p, step.want) {
			t.Fatalf("delivered %q, want %q", p, step.want)
		}
		order = append(order, payloads(g)...)
	}
	if want := []string{"1", "2", "b1", "u7", "3", "u0", "4", "5"}; !slices.Equal(order, want) {
		t.Fatalf("overall order %q, want %q", order, want)
	}
	if st := r.Stats(); st.Duplicates != 3 || st.Ordered != 6 || st.Unordered != 2 {
		t.Fatalf("stats %+v", st)
	}
	if r.BufferedBytes() != 0 {
		t.Fatalf("%d bytes still buffered", r.BufferedBytes())
	}
}

// TestStaggeredNewestWins: RL-9's accept: versions 5, 7, 6 → 5 and 7 applied;
// repeats of a version are not delivered again; keys are independent; a
// version far ahead (a receiver that missed many) is still newer.
func TestStaggeredNewestWins(t *testing.T) {
	cfg := DefaultConfig()
	r := newReceiver(t, cfg)
	var applied []string
	for _, v := range []struct{ key, version int }{
		{1, 5}, {1, 7}, {1, 6}, {1, 7}, {2, 6}, {1, 60007}, {1, 8}, {1, 3}, {1, 2},
	} {
		g, err := read(r, newSec(t, cfg).staggered(v.key, v.version, []byte(fmt.Sprintf("k%d:v%d", v.key, v.version))).end())
		if err != nil {
			t.Fatal(err)
		}
		applied = append(applied, payloads(g)...)
	}
	// 60007 is 60000 ahead of 7: newer (a receiver that missed many versions);
	// then 8 is 60000 behind 60007 modulo 2^16, i.e. 5537 ahead: newer again;
	// 3 and 2 are 5 and 6 behind 8: stale.
	want := []string{"k1:v5", "k1:v7", "k2:v6", "k1:v60007", "k1:v8"}
	if !slices.Equal(applied, want) {
		t.Fatalf("applied %q, want %q", applied, want)
	}
	if st := r.Stats(); st.StaleStagger != 4 {
		t.Fatalf("stale %d, want 4", st.StaleStagger)
	}
}

func TestReceiverFragments(t *testing.T) {
	cfg := DefaultConfig()
	t.Run("ordered out of order", func(t *testing.T) {
		r := newReceiver(t, cfg)
		g1, err1 := read(r, newSec(t, cfg).orderedFrag(2, 1, 1, 0, []byte("BB")).orderedFrag(2, 2, 2, 0, []byte("C")).end())
		g2, err2 := read(r, newSec(t, cfg).orderedFrag(2, 0, 0, 5, []byte("AA")).ordered(2, 3, []byte("next")).end())
		if err1 != nil || err2 != nil || len(g1) != 0 {
			t.Fatalf("errors %v %v, early %v", err1, err2, g1)
		}
		if p := payloads(g2); !slices.Equal(p, []string{"AABBC", "next"}) {
			t.Fatalf("got %q", p)
		}
	})
	t.Run("unordered by offset", func(t *testing.T) {
		r := newReceiver(t, cfg)
		g1, _ := read(r, newSec(t, cfg).unorderedFrag(11, 2, 6, 4, []byte("ef")).unorderedFrag(9, 0, 6, 0, []byte("ab")).end())
		g2, err := read(r, newSec(t, cfg).unorderedFrag(10, 1, 6, 2, []byte("cd")).unorderedFrag(10, 1, 6, 2, []byte("cd")).end())
		if err != nil || len(g1) != 0 {
			t.Fatalf("err %v, early %v", err, g1)
		}
		if p := payloads(g2); !slices.Equal(p, []string{"abcdef"}) {
			t.Fatalf("got %q", p)
		}
		if r.Stats().Duplicates != 1 || r.BufferedBytes() != 0 {
			t.Fatalf("stats %+v, buffered %d", r.Stats(), r.BufferedBytes())
		}
	})
}

// TestReceiverRejects: malformed sections are rejected with an error and, when
// the structure is wrong, without delivering or changing anything.
func TestReceiverRejects(t *testing.T) {
	cfg := DefaultConfig()
	small := DefaultConfig()
	small.MaxEventSize = 4096
	small.MaxQueuedBytes = 4096
	small.MaxPartial = 2
	m := uint64(cfg.MaxInFlightPerLane)
	for _, tc := range []struct {
		name  string
		cfg   Config
		build func(s *sec) []byte
		want  error
		whole bool // rejected before anything is delivered
	}{
		{"empty packet", cfg, func(s *sec) []byte { return nil }, io.ErrUnexpectedEOF, true},
		{"no end bit", cfg, func(s *sec) []byte {
			s.ordered(0, 0, []byte("x"))
			return s.w.Bytes()[:s.w.BitLen()/8]
		}, io.ErrUnexpectedEOF, true},
		{"record beyond MaxFragment", cfg, func(s *sec) []byte {
			return s.ordered(0, 0, []byte("ok")).unguaranteed(make([]byte, cfg.MaxFragment+1)).end()
		}, ErrMalformed, true},
		{"fragment kind 3", cfg, func(s *sec) []byte {
			return s.ordered(0, 0, []byte("ok")).orderedFrag(1, 0, 3, 0, []byte("x")).end()
		}, ErrMalformed, true},
		{"first fragment as large as its event", cfg, func(s *sec) []byte { return s.orderedFrag(1, 0, 0, 3, []byte("abc")).end() }, ErrMalformed, true},
		{"event beyond MaxEventSize", small, func(s *sec) []byte { return s.orderedFrag(1, 0, 0, 5000, []byte("abc")).end() }, ErrMalformed, true},
		{"empty fragment", cfg, func(s *sec) []byte { return s.orderedFrag(1, 0, 1, 0, nil).end() }, ErrMalformed, true},
		{"unordered fragment past the end", cfg, func(s *sec) []byte { return s.unorderedFrag(3, 1, 10, 8, []byte("abc")).end() }, ErrMalformed, true},
		{"unordered index without offset", cfg, func(s *sec) []byte { return s.unorderedFrag(3, 1, 10, 0, []byte("abc")).end() }, ErrMalformed, true},
		{"lane beyond Lanes", func() Config { c := cfg; c.Lanes = 9; return c }(), func(s *sec) []byte {
			return s.bits(1, 1).bits(uint64(Ordered), 2).bits(12, 4).bits(0, 15).bits(0, 1).payload(nil).end()
		}, bitstream.ErrOutOfRange, true},
		{"payload past the packet", cfg, func(s *sec) []byte {
			s.bits(1, 1).bits(uint64(Unguaranteed), 2).gamma(101)
			return s.w.Bytes()
		}, io.ErrUnexpectedEOF, true},
		{"id beyond the window", cfg, func(s *sec) []byte { return s.ordered(0, m+5, []byte("x")).end() }, ErrMalformed, false},
		{"middle fragment first", cfg, func(s *sec) []byte { return s.orderedFrag(0, 0, 1, 0, []byte("x")).end() }, ErrMalformed, false},
		{"whole event inside a fragmented one", cfg, func(s *sec) []byte {
			return s.orderedFrag(0, 0, 0, 10, []byte("x")).ordered(0, 1, []byte("y")).end()
		}, ErrMalformed, false},
		{"last fragment short", cfg, func(s *sec) []byte {
			return s.orderedFrag(0, 0, 0, 10, []byte("x")).orderedFrag(0, 1, 2, 0, []byte("y")).end()
		}, ErrMalformed, false},
		{"unordered index before id 0", cfg, func(s *sec) []byte { return s.unorderedFrag(1, 3, 10, 3, []byte("x")).end() }, ErrMalformed, false},
		{"reorder buffer full", small, func(s *sec) []byte {
			for i := uint64(1); i < 6; i++ {
				s.ordered(0, i, make([]byte, 1000))
			}
			return s.end()
		}, ErrReceiverFull, false},
		{"too many partial events", small, func(s *sec) []byte {
			return s.unorderedFrag(0, 0, 10, 0, []byte("a")).unorderedFrag(5, 0, 10, 0, []byte("a")).unorderedFrag(9, 0, 10, 0, []byte("a")).end()
		}, ErrReceiverFull, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReceiver(t, tc.cfg)
			g, err := read(r, tc.build(newSec(t, tc.cfg)))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if tc.whole && (len(g) != 0 || r.Stats().Ordered != 0 || len(r.lanes) > 0 && (r.lanes[0].ln != nil || r.lanes[0].next != 0)) {
				t.Fatalf("rejected section still delivered %v", g)
			}
			if r.BufferedBytes() > tc.cfg.MaxQueuedBytes {
				t.Fatalf("buffered %d > %d", r.BufferedBytes(), tc.cfg.MaxQueuedBytes)
			}
			if r.Stats().Rejected != 1 {
				t.Fatalf("Rejected = %d", r.Stats().Rejected)
			}
		})
	}
}

// TestReadScratchSameAsRead: a Receiver reading payloads into the caller's
// scratch (ReadScratch, as a connection shard's Servers share one) delivers
// what one reading into its own does, event for event, with payloads that
// fit the scratch and payloads that do not (its own scratch then), ordered
// lanes buffering what arrives ahead, fragments and unordered events; and
// it keeps no scratch of its own while every payload fits.
func TestReadScratchSameAsRead(t *testing.T) {
	cfg := DefaultConfig()
	p := newPair(t, cfg)
	r2, err := NewReceiver(cfg)
	must(t, err)
	var got2 []got
	collect2 := func(e Event) { got2 = append(got2, got{e.Class, e.Lane, e.Key, string(e.Payload)}) }
	scratch := make([]byte, 48)
	rng := rand.New(rand.NewPCG(7, 7))
	now := time.Duration(0)
	for i := range 400 {
		size := 8 + rng.IntN(40) // fits the scratch
		if i%7 == 0 {
			size = 100 + rng.IntN(3000) // does not; some fragmented
		}
		if i%3 == 0 {
			must(t, p.s.SendUnordered(payload(cfg.Lanes, i, size)))
		} else {
			must(t, p.s.SendOrdered(i%4, payload(i%4, i, size)))
		}
		now += 50 * ms
		seq := p.write(now, 600)
		lost := rng.IntN(5) == 0
		if !lost {
			p.deliver(seq)
			var rd bitstream.Reader
			rd.Reset(p.pkts[seq])
			if err := r2.ReadScratch(&rd, scratch, collect2); err != nil {
				t.Fatalf("ReadScratch seq %d: %v", seq, err)
			}
		}
		p.fate(seq, !lost)
	}
	for range 200 { // drain
		now += 50 * ms
		seq := p.write(now, 1200)
		p.deliver(seq)
		var rd bitstream.Reader
		rd.Reset(p.pkts[seq])
		must(t, r2.ReadScratch(&rd, scratch, collect2))
		p.fate(seq, true)
	}
	g := p.take()
	if len(g) != 400 {
		t.Fatalf("Read delivered %d of 400", len(g))
	}
	if fmt.Sprint(g) != fmt.Sprint(got2) {
		t.Fatalf("ReadScratch delivered differently:\n%v\n%v", g, got2)
	}
	if p.r.Stats() != r2.Stats() {
		t.Fatalf("stats differ: %+v, %+v", p.r.Stats(), r2.Stats())
	}

	// Payloads that all fit: no scratch of the Receiver's own.
	r3, err := NewReceiver(cfg)
	must(t, err)
	q := newPair(t, cfg)
	for i := range 20 {
		must(t, q.s.SendOrdered(0, payload(0, i, 30)))
		seq := q.write(now, 600)
		var rd bitstream.Reader
		rd.Reset(q.pkts[seq])
		must(t, r3.ReadScratch(&rd, scratch, func(Event) {}))
		q.fate(seq, true)
	}
	if r3.scratch != nil || r3.stats.Ordered != 20 {
		t.Fatalf("own scratch %d B, %d delivered: want none, 20", r3.ownLen(), r3.stats.Ordered)
	}
}

// TestEmptySectionFastPath: a section that is its end bit alone (most
// packets') is read without the probe pass: the reader ends after that one
// bit, the section counts, and the bits after it are left alone; no bits at
// all is still a truncated section.
func TestEmptySectionFastPath(t *testing.T) {
	r, err := NewReceiver(DefaultConfig())
	must(t, err)
	var rd bitstream.Reader
	rd.ResetBits([]byte{0b1111_1110}, 8) // end bit, then seven bits of whatever follows
	if err := r.Read(&rd, nil); err != nil {
		t.Fatal(err)
	}
	if rd.Pos() != 1 || r.Stats().Sections != 1 {
		t.Fatalf("reader at bit %d, %d sections; want 1 and 1", rd.Pos(), r.Stats().Sections)
	}
	rd.ResetBits([]byte{0}, 0)
	if err := r.Read(&rd, nil); err == nil || r.Stats().Rejected != 1 || r.Stats().Sections != 1 {
		t.Fatalf("empty input: %v, stats %+v; want a read error, counted as rejected", err, r.Stats())
	}
}
