package notify

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// craft writes a header field by field straight from the documented layout
// (docs/protocol.md §3), independent of the encoder: tests use it to
// forge packets and to pin the wire format.
type craft struct {
	typ    uint64
	seq    uint64
	seqW   uint // 7, 16 or 32
	ackW   uint // 0: no ack section; 5, 10 or 32
	ackL   uint64
	allOK  bool
	m      uint64   // report range [L-m, L-1] (≥ 1 when !allOK)
	gaps   []uint64 // hole list: gaps from R-1, each ≥ 1 (len = hole count)
	hz     uint64   // horizon code value: H = max(R, L+1-K) + hz
	rawHz  uint64   // when non-zero, written instead of hz+1 (to forge bad codes)
	nholes uint64   // when non-zero, written instead of len(gaps)
	delay  uint64   // delay code
	tail   uint64   // 64-bit payload (the tests' sequence marker)
}

func (c craft) bytes(t testing.TB) []byte {
	t.Helper()
	buf := make([]byte, 64)
	w := bitstream.NewWriter(buf)
	put := func(v uint64, n uint) {
		if n == 0 {
			return
		}
		if err := w.WriteBits(v&(1<<n-1), n); err != nil && n < 64 {
			t.Fatal(err)
		} else if n == 64 {
			if err := w.WriteBits(v, 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(c.typ, 2)
	switch c.seqW {
	case 7:
		put(0, 1)
	case 16:
		put(1, 2)
	case 32:
		put(3, 2)
	default:
		t.Fatalf("bad seq width %d", c.seqW)
	}
	put(c.seq, c.seqW)
	switch c.ackW {
	case 0:
		put(7, 3)
	case 5:
		put(0, 1)
	case 10:
		put(1, 2)
	case 32:
		put(3, 3)
	default:
		t.Fatalf("bad ack width %d", c.ackW)
	}
	if c.ackW != 0 {
		put(c.ackL, c.ackW)
		if c.allOK {
			put(1, 1)
		} else {
			put(0, 1)
			// Elias gamma of v ≥ 1: z zeros, a one, the low z bits of v.
			gamma := func(v uint64) {
				z := uint(0)
				for v>>(z+1) != 0 {
					z++
				}
				put(0, z)
				put(1, 1)
				put(v, z)
			}
			gamma(c.m)
			n := uint64(len(c.gaps))
			if c.nholes != 0 {
				n = c.nholes
			}
			gamma(n)
			for _, g := range c.gaps {
				gamma(g)
			}
			if c.rawHz != 0 {
				gamma(c.rawHz)
			} else {
				gamma(c.hz + 1)
			}
		}
		put(c.delay, 4)
	}
	put(c.tail, 64)
	return append([]byte(nil), w.Bytes()...)
}

func TestReconstructSeq(t *testing.T) {
	for _, tc := range []struct {
		name     string
		expected uint64
		trunc    uint64
		w        uint
		want     uint64
	}{
		{"7-bit in order", 10, 10, 7, 10},
		{"7-bit forward across 128", 126, 2, 7, 130},
		{"7-bit late packet across 128", 130, 126, 7, 126},
		{"7-bit forward across 256", 250, 5, 7, 261},
		{"7-bit upper edge of half range", 100, 36, 7, 164},
		{"7-bit near zero does not underflow", 0, 127, 7, 127},
		{"16-bit forward across 65536", 65530, 3, 16, 65539},
		{"16-bit late across 65536", 65540, 65530, 16, 65530},
		{"32-bit forward across 2^32", 1<<32 - 5, 10, 32, 1<<32 + 10},
		{"32-bit late across 2^32", 1<<32 + 2, 1<<32 - 3, 32, 1<<32 - 3},
		{"32-bit far forward", 1 << 32, 1 << 30, 32, 1<<32 + 1<<30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reconstructSeq(tc.expected, tc.trunc, tc.w); got != tc.want {
				t.Fatalf("reconstructSeq(%d, %d, %d) = %d, want %d", tc.expected, tc.trunc, tc.w, got, tc.want)
			}
		})
	}
}

func TestReconstructAck(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ref, trunc uint64
		w          uint
		want       uint64
	}{
		{"same as ref", 40, 40 & 31, 5, 40},
		{"ahead within width", 40, 50 & 31, 5, 50},
		{"ahead across 32", 30, 33 & 31, 5, 33},
		{"largest span", 30, 61 & 31, 5, 61},
		{"10-bit across 1024", 1020, 1030 & 1023, 10, 1030},
		{"32-bit across 2^32", 1<<32 - 2, 3, 32, 1<<32 + 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reconstructAck(tc.ref, tc.trunc, tc.w); got != tc.want {
				t.Fatalf("reconstructAck(%d, %d, %d) = %d, want %d", tc.ref, tc.trunc, tc.w, got, tc.want)
			}
		})
	}
}

func TestGamma(t *testing.T) {
	buf := make([]byte, 8)
	for v := uint64(1); v <= 1023; v++ {
		w := bitstream.NewWriter(buf)
		bw := bitWriter{w: w}
		bw.gamma(v)
		bw.flush()
		if bw.err != nil {
			t.Fatal(bw.err)
		}
		if got, want := w.BitLen(), 2*int(math.Floor(math.Log2(float64(v))))+1; got != want {
			t.Fatalf("gamma(%d) took %d bits, want %d", v, got, want)
		}
		br := bitReader{r: bitstream.NewReader(w.Bytes())}
		if got := br.gamma(1023, "t"); br.err != nil || got != v {
			t.Fatalf("gamma round trip %d -> %d (%v)", v, got, br.err)
		}
	}
	for _, tc := range []struct {
		name string
		v    uint64
		max  uint64
	}{
		{"value above max", 300, 255},
		{"prefix longer than max allows", 1023, 255},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := bitstream.NewWriter(buf)
			bw := bitWriter{w: w}
			bw.gamma(tc.v)
			bw.flush()
			br := bitReader{r: bitstream.NewReader(w.Bytes())}
			if _ = br.gamma(tc.max, "t"); !errors.Is(br.err, ErrBadAck) {
				t.Fatalf("got err %v, want ErrBadAck", br.err)
			}
		})
	}
}

func TestDelayCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    time.Duration
		want []uint8 // acceptable codes
	}{
		{"zero", 0, []uint8{0}},
		{"negative clamps to zero", -time.Millisecond, []uint8{0}},
		{"exact table value", 44 * time.Millisecond, []uint8{8}},
		{"between values", 24 * time.Millisecond, []uint8{5, 6}},
		{"top of table", 125 * time.Millisecond, []uint8{14}},
		{"too long: no sample", 128 * time.Millisecond, []uint8{delayNone}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seq := uint64(0); seq < 64; seq++ {
				got := encodeDelay(tc.d, seq)
				ok := false
				for _, w := range tc.want {
					ok = ok || got == w
				}
				if !ok {
					t.Fatalf("encodeDelay(%v, seq %d) = %d, want one of %v", tc.d, seq, got, tc.want)
				}
			}
		})
	}
	// Dithering makes the decoded delay unbiased: average over many packets.
	for _, d := range []time.Duration{3 * time.Millisecond, 24 * time.Millisecond, 47500 * time.Microsecond, 100 * time.Millisecond} {
		var sum time.Duration
		const n = 20000
		for seq := uint64(0); seq < n; seq++ {
			sum += delayValue(encodeDelay(d, seq))
		}
		if mean := sum / n; absDur(mean-d) > 200*time.Microsecond {
			t.Errorf("delay %v decodes to %v on average: quantization biased", d, mean)
		}
	}
}

// TestWireSteadyStateExample pins the worked example in
// docs/protocol.md §3: the encoder's bytes equal the crafted layout.
func TestWireExamples(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(t *testing.T) (got []byte)
		want  craft
		hex   string // pinned: the worked examples in the protocol doc
	}{
		{
			name: "steady state: seq 300, ack L 200 all ok, delay 20ms",
			build: func(t *testing.T) []byte {
				c := mustConn(t, DefaultConfig(), 300, 100)
				c.hasPeerL, c.peerL = true, 297 // we know the peer has our 297
				c.rxL, c.rxLAt = 200, 0
				c.setRxH(197)
				for s := uint64(190); s <= 200; s++ {
					c.setAccepted(s)
				}
				c.setConfirmed(197, 198) // a header with L=197 (F=198) is known delivered
				w := bitstream.NewWriter(make([]byte, 16))
				// 20 ms lies between the table values 20 and 27 exactly at 20: code 5.
				if _, err := c.WriteHeader(w, TypeData, 20*time.Millisecond); err != nil {
					t.Fatal(err)
				}
				return append([]byte(nil), w.Bytes()...)
			},
			want: craft{typ: 0, seq: 300, seqW: 7, ackW: 5, ackL: 200, allOK: true, delay: 5},
			hex:  "60 41 0b", // 21 bits
		},
		{
			name: "lossy: seq 301, L 205, 199 abandoned and still unconfirmed",
			build: func(t *testing.T) []byte {
				c := mustConn(t, DefaultConfig(), 301, 100)
				c.hasPeerL, c.peerL = true, 298
				c.rxL, c.rxLAt = 205, 0
				c.setRxH(202)
				for s := uint64(190); s <= 205; s++ {
					if s != 199 {
						c.setAccepted(s)
					}
				}
				// A header carrying F = 199 (199 then missing, not yet abandoned) is
				// known delivered; the abandonment of 199 is not yet confirmed.
				c.setConfirmed(200, 199)
				w := bitstream.NewWriter(make([]byte, 16))
				if _, err := c.WriteHeader(w, TypeData, 0); err != nil {
					t.Fatal(err)
				}
				return append([]byte(nil), w.Bytes()...)
			},
			// R = 199, m = 6 (199..204), one hole at R (gap 1); H' = max(R, L+1-K) = 202.
			want: craft{typ: 0, seq: 301, seqW: 7, ackW: 5, ackL: 205, m: 6, gaps: []uint64{1}, hz: 0, delay: 0},
			hex:  "68 69 e8 01", // 29 bits
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.build(t)
			want := tc.want.bytes(t)
			// craft appends a zero 64-bit tail; the encoder's padding is zero too.
			if string(got) != string(want[:len(got)]) {
				t.Fatalf("encoder wrote % x, layout says % x", got, want)
			}
			if h := fmt.Sprintf("% x", got); h != tc.hex {
				t.Fatalf("bytes %s, documented example %s", h, tc.hex)
			}
		})
	}
}

func mustConn(t testing.TB, cfg Config, localStart, peerStart uint64) *Conn {
	t.Helper()
	c, err := newConn(cfg, localStart, peerStart)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// encodeDelaySearch is encodeDelay as a search of the table (the encoder
// before its lookup): the reference the lookup must match code for code,
// since the codes are on the wire (docs/vectors).
func encodeDelaySearch(d time.Duration, seq uint64) uint8 {
	if d <= 0 {
		return 0
	}
	if d >= delayMax {
		return delayNone
	}
	for c := uint8(0); c < delayNone-1; c++ {
		lo, hi := delayValue(c), delayValue(c+1)
		if d < hi {
			frac := uint64(d-lo) << 32 / uint64(hi-lo)
			if splitmix64(seq)>>32 < frac {
				return c + 1
			}
			return c
		}
	}
	return delayNone - 1
}

// TestEncodeDelayMatchesSearch: the lookup gives the search's code for
// every delay from −1 ms to 130 ms in 250 ns steps (every table value and
// both sides of it), each with a different sequence, and for a few whole
// sequences at each table value's edges.
func TestEncodeDelayMatchesSearch(t *testing.T) {
	seq := uint64(1)
	for d := -time.Millisecond; d <= 130*time.Millisecond; d += 250 * time.Nanosecond {
		seq = splitmix64(seq)
		if got, want := encodeDelay(d, seq), encodeDelaySearch(d, seq); got != want {
			t.Fatalf("encodeDelay(%v, %#x) = %d, the search %d", d, seq, got, want)
		}
	}
	for c := uint8(0); c <= delayNone; c++ {
		v := delayValue(c)
		for _, d := range []time.Duration{v - 1, v, v + 1, delayMax - 1, delayMax} {
			for s := range uint64(256) {
				if got, want := encodeDelay(d, s), encodeDelaySearch(d, s); got != want {
					t.Fatalf("encodeDelay(%v, %d) = %d, the search %d", d, s, got, want)
				}
			}
		}
	}
}
