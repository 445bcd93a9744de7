package notify

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// hdrSim is an allocation-free two-endpoint simulation for the header-size
// benchmarks: each side sends every interval (B offset by half), fixed one-way
// latency (so each direction is FIFO), Bernoulli loss from a seeded PCG. Ticks
// and PopFates run at every event.
type hdrSim struct {
	c        [2]*Conn
	q        [2]pktRing // q[d]: packets from c[d] to c[1-d]
	next     [2]time.Duration
	interval time.Duration
	latency  time.Duration
	loss     float64
	rng      *rand.Rand
	w        bitstream.Writer
	r        bitstream.Reader
	fates    []Fate
	bits     uint64 // header bits written while counting
	pkts     uint64
	counting bool
}

type simPkt struct {
	at  time.Duration
	n   int
	buf [64]byte
}

type pktRing struct {
	p          [64]simPkt
	head, size int
}

func newHdrSim(tb testing.TB, loss float64, seed uint64) *hdrSim {
	s := &hdrSim{interval: 50 * ms, latency: 50 * ms, loss: loss, rng: rand.New(rand.NewPCG(seed, 77)), fates: make([]Fate, 0, 64)}
	for i := range s.c {
		c, err := New(DefaultConfig())
		if err != nil {
			tb.Fatal(err)
		}
		s.c[i] = c
	}
	s.next[1] = s.interval / 2
	return s
}

// step advances to the next send, delivering what is due first, and sends
// exactly one packet.
func (s *hdrSim) step(tb testing.TB) {
	d := 0
	if s.next[1] < s.next[0] {
		d = 1
	}
	now := s.next[d]
	for {
		src := -1
		for i := range s.q {
			if q := &s.q[i]; q.size > 0 && q.p[q.head].at <= now && (src < 0 || q.p[q.head].at < s.q[src].p[s.q[src].head].at) {
				src = i
			}
		}
		if src < 0 {
			break
		}
		q := &s.q[src]
		p := &q.p[q.head]
		q.head = (q.head + 1) % len(q.p)
		q.size--
		dst := s.c[1-src]
		s.r.Reset(p.buf[:p.n])
		h, err := dst.ReadHeader(&s.r)
		if err == nil {
			err = dst.Accept(h, p.at)
		}
		if err != nil {
			tb.Fatalf("receive: %v", err)
		}
	}
	for _, c := range s.c {
		c.Tick(now)
		s.fates = c.PopFates(s.fates[:0])
	}
	c := s.c[d]
	q := &s.q[d]
	p := &q.p[(q.head+q.size)%len(q.p)]
	s.w.Reset(p.buf[:])
	if _, err := c.WriteHeader(&s.w, TypeData, now); err != nil {
		tb.Fatalf("send: %v", err)
	}
	if s.counting {
		// The packet is its header: its bits are what Stats' HeaderBits
		// adds (TestHeaderBitsCounted), read here without Stats, which
		// counts the records in flight.
		s.bits += uint64(s.w.BitLen())
		s.pkts++
	}
	if s.rng.Float64() >= s.loss {
		p.at, p.n = now+s.latency, s.w.Len()
		q.size++
	}
	s.next[d] += s.interval
}

// benchHeader reports the average header size: after a 2 s warm-up, a fixed
// 4,000-packet prefix (100 s of traffic) is counted so -benchtime=1x already
// reports a stable number; every b.Loop iteration then sends one more packet.
func benchHeader(b *testing.B, loss float64) {
	s := newHdrSim(b, loss, 1)
	for s.next[0] < 2*time.Second {
		s.step(b)
	}
	s.counting = true
	for range 4000 {
		s.step(b)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.step(b)
	}
	b.ReportMetric(float64(s.bits)/8/float64(s.pkts), "hdr-B/pkt")
}

// BenchmarkHeaderSteadyState: 20 pkt/s each way, 100 ms RTT, no loss. Target ≤ 3.
func BenchmarkHeaderSteadyState(b *testing.B) { benchHeader(b, 0) }

// BenchmarkHeaderLoss10: the same with 10% loss in each direction.
func BenchmarkHeaderLoss10(b *testing.B) { benchHeader(b, 0.10) }

// BenchmarkNotifyRoundTrip: WriteHeader + ReadHeader + Accept + PopFates for one
// packet between two Conns, alternating direction so acks flow both ways.
func BenchmarkNotifyRoundTrip(b *testing.B) {
	var c [2]*Conn
	for i := range c {
		var err error
		if c[i], err = New(DefaultConfig()); err != nil {
			b.Fatal(err)
		}
	}
	var buf [64]byte
	var w bitstream.Writer
	var r bitstream.Reader
	fates := make([]Fate, 0, 64)
	now := time.Duration(0)
	d := 0
	b.ReportAllocs()
	for b.Loop() {
		now += 25 * ms
		w.Reset(buf[:])
		if _, err := c[d].WriteHeader(&w, TypeData, now); err != nil {
			b.Fatal(err)
		}
		r.Reset(w.Bytes())
		h, err := c[1-d].ReadHeader(&r)
		if err == nil {
			err = c[1-d].Accept(h, now)
		}
		if err != nil {
			b.Fatal(err)
		}
		fates = c[1-d].PopFates(fates[:0])
		d = 1 - d
	}
}

// TestZeroAllocs proves nothing allocates after New, lossless and lossy (ack
// bitmaps, abandonment, Tick).
func TestZeroAllocs(t *testing.T) {
	for _, tc := range []struct {
		name string
		loss float64
	}{
		{"lossless", 0},
		{"10% loss", 0.10},
		{"50% loss", 0.50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newHdrSim(t, tc.loss, 3)
			for range 200 {
				s.step(t) // warm-up
			}
			if n := testing.AllocsPerRun(2000, func() { s.step(t) }); n != 0 {
				t.Fatalf("%.2f allocations per packet, want 0", n)
			}
			for _, c := range s.c {
				if err := checkInvariants(c); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestHeaderBitsCounted: the header benchmarks' count of bits (the
// writer's length, the packet being its header) is what Stats'
// HeaderBits adds, lossless and lossy.
func TestHeaderBitsCounted(t *testing.T) {
	for _, loss := range []float64{0, 0.10} {
		s := newHdrSim(t, loss, 5)
		before := s.c[0].Stats().HeaderBits + s.c[1].Stats().HeaderBits
		s.counting = true
		for range 2000 {
			s.step(t)
		}
		if got := s.c[0].Stats().HeaderBits + s.c[1].Stats().HeaderBits - before; got != s.bits {
			t.Fatalf("loss %.2f: Stats counted %d header bits, the benchmark %d", loss, got, s.bits)
		}
	}
}
