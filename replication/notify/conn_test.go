package notify

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

const ms = time.Millisecond

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		ok     bool
	}{
		{"default", func(*Config) {}, true},
		{"window below 256", func(c *Config) { c.AckWindow = 255 }, false},
		{"window above max", func(c *Config) { c.AckWindow = MaxAckWindow + 1 }, false},
		{"window 1024", func(c *Config) { c.AckWindow = 1024 }, true},
		{"K zero", func(c *Config) { c.ReorderThreshold = 0 }, false},
		{"K one", func(c *Config) { c.ReorderThreshold = 1 }, true},
		{"K too large", func(c *Config) { c.ReorderThreshold = MaxReorderThreshold + 1 }, false},
		{"negative reorder time", func(c *Config) { c.MinReorderTime = -1 }, false},
		{"zero initial RTT", func(c *Config) { c.InitialRTT = 0 }, false},
		{"in-flight too small", func(c *Config) { c.MaxInFlight = MinMaxInFlight - 1 }, false},
		{"in-flight too large", func(c *Config) { c.MaxInFlight = MaxMaxInFlight + 1 }, false},
		{"in-flight not a power of two", func(c *Config) { c.MaxInFlight = 1000 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mutate(&cfg)
			err := cfg.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
			if _, nerr := New(cfg); (nerr == nil) != tc.ok {
				t.Fatalf("New() = %v, want ok=%v", nerr, tc.ok)
			}
		})
	}
}

// wireSeqWidth reads the sequence width a packet was written with.
func wireSeqWidth(t testing.TB, p []byte) uint {
	t.Helper()
	r := bitstream.NewReader(p)
	if _, err := r.ReadBits(2, "type"); err != nil {
		t.Fatal(err)
	}
	if f, _ := r.ReadFlag("w"); !f {
		return 7
	}
	if f, _ := r.ReadFlag("w"); !f {
		return 16
	}
	return 32
}

// TestWraparound crosses the wrap point of every sequence width. B stays
// silent for the first `silent` packets so A's span since the last ack forces the
// width under test; B must reconstruct every sequence exactly (the payload
// carries the full number) in both directions.
func TestWraparound(t *testing.T) {
	for _, tc := range []struct {
		name     string
		start    uint64
		silent   int // A packets sent while B stays silent
		total    int
		width    uint
		boundary uint64
		inflight int
	}{
		{"7-bit across 128, 256, 384", 128 - 20, 0, 300, 7, 256, DefaultMaxInFlight},
		{"16-bit across 65536", 1<<16 - 100, 150, 400, 16, 1 << 16, DefaultMaxInFlight},
		{"32-bit across 2^32", 1<<32 - (1 << 15) - 40, 1<<15 + 200, 1<<15 + 500, 32, 1 << 32, MaxMaxInFlight},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.MaxInFlight = tc.inflight
			a := newEndpoint(t, "A", cfg, tc.start, tc.start)
			b := newEndpoint(t, "B", cfg, tc.start, tc.start)
			var below, above bool
			now := time.Duration(0)
			for i := 0; i < tc.total; i++ {
				now += 10 * ms
				seq, p := a.send(t, now, TypeData)
				if w := wireSeqWidth(t, p); w == tc.width {
					below = below || seq < tc.boundary
					above = above || seq >= tc.boundary
				}
				got, err := b.recv(t, now, p)
				if err != nil || got != seq {
					t.Fatalf("B: packet %d decoded as %d, err %v", seq, got, err)
				}
				if i >= tc.silent {
					bseq, bp := b.send(t, now, TypeAck)
					if got, err := a.recv(t, now, bp); err != nil || got != bseq {
						t.Fatalf("A: packet %d decoded as %d, err %v", bseq, got, err)
					}
				}
				a.pop(t)
				b.pop(t)
				if a.c.InFlight() < 2048 || i%1024 == 0 { // the check walks every record
					mustInvariants(t, a, b)
				}
			}
			if !below || !above {
				t.Fatalf("no %d-bit packet on both sides of %d (below %v, above %v)", tc.width, tc.boundary, below, above)
			}
			checkAgreement(t, a, b)
			checkAgreement(t, b, a)
			// Once acks flow again A's width returns to 7 bits.
			_, p := a.send(t, now+10*ms, TypeData)
			if w := wireSeqWidth(t, p); w != 7 {
				t.Fatalf("width after acks resumed = %d, want 7", w)
			}
			if tc.silent < DefaultAckWindow {
				// Within the window nothing was lost: every A packet is delivered.
				for s, d := range a.fateOf {
					if !d {
						t.Fatalf("seq %d reported dropped on a lossless path", s)
					}
				}
			} else if b.c.Stats().WindowEvicted == 0 {
				t.Fatal("acks withheld beyond the window but B counted no WindowEvicted")
			}
		})
	}
}

// lockstepPair returns two endpoints after A sent seqs 0..n-1 and B accepted
// those in recv (in that order, at 10 ms spacing).
func lockstepPair(t *testing.T, cfg Config, n int, recv []uint64) (a, b *endpoint, pkts [][]byte, now time.Duration) {
	t.Helper()
	a = newEndpoint(t, "A", cfg, 0, 0)
	b = newEndpoint(t, "B", cfg, 0, 0)
	for i := 0; i < n; i++ {
		_, p := a.send(t, now, TypeData)
		pkts = append(pkts, p)
	}
	for _, s := range recv {
		now += 10 * ms
		if _, err := b.recv(t, now, pkts[s]); err != nil {
			t.Fatalf("B rejected %d: %v", s, err)
		}
	}
	mustInvariants(t, a, b)
	return a, b, pkts, now
}

// TestRejectWithoutStateChange: duplicates, stale and forged packets are
// refused with the right error and leave the protocol state untouched; the
// connection keeps working afterwards.
func TestRejectWithoutStateChange(t *testing.T) {
	cfg := DefaultConfig()
	// B accepted 0,2,3,5,6: L=6, H=3 (K=4); 1 abandoned, 4 missing but acceptable.
	base := []uint64{0, 2, 3, 5, 6}
	for _, tc := range []struct {
		name string
		pkt  func(pkts [][]byte) []byte
		want error
	}{
		{"duplicate of newest", func(p [][]byte) []byte { return p[6] }, ErrDuplicate},
		{"duplicate of older", func(p [][]byte) []byte { return p[2] }, ErrDuplicate},
		{"stale below horizon", func(p [][]byte) []byte { return p[1] }, ErrStale},
		{"forged 16-bit far ahead", func([][]byte) []byte {
			return craft{seq: 6 + 300, seqW: 16}.bytes(t)
		}, ErrTooFar},
		{"forged 32-bit far ahead", func([][]byte) []byte {
			return craft{seq: 6 + 1<<20, seqW: 32}.bytes(t)
		}, ErrTooFar},
		{"forged 32-bit far behind", func([][]byte) []byte {
			return craft{seq: 1<<32 - 5, seqW: 32}.bytes(t) // reconstructs near 2^32: too far
		}, ErrTooFar},
		{"reserved type", func([][]byte) []byte { return craft{typ: 3, seq: 7, seqW: 7}.bytes(t) }, ErrBadType},
		{"ack of a packet never sent", func([][]byte) []byte {
			return craft{seq: 7, seqW: 7, ackW: 5, ackL: 3, allOK: true}.bytes(t) // B sent nothing yet
		}, ErrBadAck},
		{"truncated", func([][]byte) []byte { return []byte{0x00} }, bitstream.ErrOutOfRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, pkts, now := lockstepPair(t, cfg, 10, base)
			before := takeSnapshot(b.c)
			statsBefore := b.c.Stats()
			b.r.Reset(tc.pkt(pkts))
			_, err := b.c.ReadHeader(&b.r)
			var re *bitstream.ReadError
			switch {
			case tc.want == bitstream.ErrOutOfRange: // stands for "a read error"
				if !errors.As(err, &re) {
					t.Fatalf("ReadHeader error %v, want *bitstream.ReadError", err)
				}
			case !errors.Is(err, tc.want):
				t.Fatalf("ReadHeader error %v, want %v", err, tc.want)
			}
			if !takeSnapshot(b.c).equal(before) {
				t.Fatal("rejected packet changed the protocol state")
			}
			st := b.c.Stats()
			if rejected := st.Duplicates + st.Stale + st.TooFar + st.BadHeader - statsBefore.Duplicates - statsBefore.Stale - statsBefore.TooFar - statsBefore.BadHeader; rejected != 1 {
				t.Fatalf("rejection counters moved by %d, want 1", rejected)
			}
			// The connection keeps working: the missing 4 and new packets are accepted
			// and acknowledged, and A learns every fate.
			for _, s := range []uint64{4, 7, 8, 9} {
				now += 10 * ms
				if _, err := b.recv(t, now, pkts[s]); err != nil {
					t.Fatalf("after rejection, B refused %d: %v", s, err)
				}
			}
			_, p := b.send(t, now, TypeAck)
			if _, err := a.recv(t, now+10*ms, p); err != nil {
				t.Fatal(err)
			}
			fates := a.pop(t)
			if len(fates) != 10 {
				t.Fatalf("A resolved %d fates, want 10", len(fates))
			}
			for _, f := range fates {
				if f.Delivered != (f.Seq != 1) {
					t.Fatalf("fate %+v: only seq 1 was dropped", f)
				}
			}
			checkAgreement(t, a, b)
			mustInvariants(t, a, b)
		})
	}
}

// TestAcceptTwice: Accept re-checks, so committing one header twice is harmless.
func TestAcceptTwice(t *testing.T) {
	a, b, _, now := lockstepPair(t, DefaultConfig(), 3, []uint64{0, 1})
	_, p := a.send(t, now, TypeData)
	b.r.Reset(p)
	h, err := b.c.ReadHeader(&b.r)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.c.Accept(h, now); err != nil {
		t.Fatal(err)
	}
	before := takeSnapshot(b.c)
	if err := b.c.Accept(h, now); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("second Accept = %v, want ErrDuplicate", err)
	}
	if !takeSnapshot(b.c).equal(before) {
		t.Fatal("second Accept changed state")
	}
	if err := b.c.Accept(Header{Seq: 9}, now); !errors.Is(err, ErrNotDecoded) {
		t.Fatalf("Accept(zero Header) = %v, want ErrNotDecoded", err)
	}
}

// TestReorderWithinWindow: packets displaced by up to K-1 slots are accepted
// and acknowledged; displaced by K they are abandoned, and both ends agree.
func TestReorderWithinWindow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		order   []uint64
		dropped []uint64 // expected fates "dropped"
	}{
		{"swap of neighbours (PN-3 contrast: 3 is kept)", []uint64{0, 1, 3, 2, 4, 5}, nil},
		{"displaced by 3", []uint64{0, 2, 3, 4, 1, 5}, nil},
		{"displaced by 4 is abandoned", []uint64{0, 2, 3, 4, 5, 1}, []uint64{1}},
		{"reverse of a burst", []uint64{3, 2, 1, 0, 4, 5}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newEndpoint(t, "A", DefaultConfig(), 0, 0)
			b := newEndpoint(t, "B", DefaultConfig(), 0, 0)
			var pkts [][]byte
			now := time.Duration(0)
			for range tc.order {
				_, p := a.send(t, now, TypeData)
				pkts = append(pkts, p)
			}
			for _, s := range tc.order {
				now += ms // well inside the reorder time
				b.c.Tick(now)
				_, err := b.recv(t, now, pkts[s])
				if want := contains(tc.dropped, s); (err != nil) != want {
					t.Fatalf("recv %d: err %v, want rejected=%v", s, err, want)
				}
			}
			_, p := b.send(t, now, TypeAck)
			if _, err := a.recv(t, now+ms, p); err != nil {
				t.Fatal(err)
			}
			fates := a.pop(t)
			if len(fates) != len(tc.order) {
				t.Fatalf("%d fates, want %d", len(fates), len(tc.order))
			}
			for _, f := range fates {
				if f.Delivered == contains(tc.dropped, f.Seq) {
					t.Fatalf("fate %+v, dropped set %v", f, tc.dropped)
				}
			}
			checkAgreement(t, a, b)
			mustInvariants(t, a, b)
		})
	}
}

func contains(s []uint64, v uint64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestPN7 is checklist PN-7's acceptance in this protocol: A has 1..5 in flight
// (our seqs 0..4), B receives only 3 and 4 (seqs 2, 3) → 1, 2 failed, 3, 4
// delivered, 5 still in flight, each exactly once.
func TestPN7(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    int
		tick bool // abandon by time instead of by packet count
	}{
		{"packet threshold (K=2)", 2, false},
		{"time threshold (K=4)", 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.ReorderThreshold = tc.k
			a, b, _, now := lockstepPair(t, cfg, 5, []uint64{2, 3})
			if tc.tick {
				b.c.Tick(now + b.c.reorderTime() - 10*ms - 1) // gap opened 10 ms before now
				if b.c.Stats().Abandoned != 0 {
					t.Fatal("abandoned before the reorder time")
				}
				now += b.c.reorderTime()
				b.c.Tick(now)
			}
			if got := b.c.Stats().Abandoned; got != 2 {
				t.Fatalf("B abandoned %d, want 2", got)
			}
			_, p := b.send(t, now, TypeAck)
			if _, err := a.recv(t, now+ms, p); err != nil {
				t.Fatal(err)
			}
			fates := a.pop(t)
			want := []bool{false, false, true, true}
			if len(fates) != len(want) {
				t.Fatalf("fates %+v, want 4", fates)
			}
			for i, f := range fates {
				if f.Delivered != want[i] {
					t.Fatalf("fate %+v, want delivered=%v", f, want[i])
				}
			}
			if a.c.InFlight() != 1 {
				t.Fatalf("in flight %d, want 1 (seq 4)", a.c.InFlight())
			}
			checkAgreement(t, a, b)
			mustInvariants(t, a, b)
		})
	}
}

// TestPN8 silences the return path: fates wait (no sender timeout, so no false
// drop), then one ack resolves them all exactly once, and late acks add nothing.
func TestPN8(t *testing.T) {
	cfg := DefaultConfig()
	a := newEndpoint(t, "A", cfg, 0, 0)
	b := newEndpoint(t, "B", cfg, 0, 0)
	var back [][]byte
	now := time.Duration(0)
	for i := 0; i < 10; i++ {
		now += 50 * ms
		_, p := a.send(t, now, TypeData)
		if _, err := b.recv(t, now+50*ms, p); err != nil {
			t.Fatal(err)
		}
		_, bp := b.send(t, now+50*ms, TypeData) // lost for now
		back = append(back, bp)
	}
	if n := len(a.pop(t)); n != 0 || a.c.InFlight() != 10 {
		t.Fatalf("silent return path: %d fates, %d in flight; want 0, 10", n, a.c.InFlight())
	}
	now += time.Second
	if _, err := a.recv(t, now, back[9]); err != nil {
		t.Fatal(err)
	}
	fates := a.pop(t)
	if len(fates) != 10 {
		t.Fatalf("%d fates after one ack, want 10", len(fates))
	}
	for _, f := range fates {
		if !f.Delivered {
			t.Fatalf("fate %+v: all were received", f)
		}
	}
	// Late copies of older acks: one is stale, one is accepted (inside the window)
	// but, not being the newest, its ack section is ignored. No second fate.
	for _, tc := range []struct {
		p    []byte
		want error
	}{{back[3], ErrStale}, {back[7], nil}, {back[9], ErrDuplicate}} {
		if _, err := a.recv(t, now, tc.p); !errors.Is(err, tc.want) && err != tc.want {
			t.Fatalf("late ack: %v, want %v", err, tc.want)
		}
	}
	if n := len(a.pop(t)); n != 0 {
		t.Fatalf("late acks produced %d more fates", n)
	}
	checkAgreement(t, a, b)
	mustInvariants(t, a, b)
}

// TestAckOnlyConsumesSequence: keepalives and disconnects are numbered like data.
func TestAckOnlyConsumesSequence(t *testing.T) {
	a := newEndpoint(t, "A", DefaultConfig(), 0, 0)
	b := newEndpoint(t, "B", DefaultConfig(), 0, 0)
	for i, typ := range []PacketType{TypeData, TypeAck, TypeAck, TypeDisconnect, TypeData} {
		seq, p := a.send(t, 0, typ)
		if seq != uint64(i) || a.c.NextSeq() != uint64(i+1) {
			t.Fatalf("%v packet got seq %d (next %d), want %d", typ, seq, a.c.NextSeq(), i)
		}
		b.r.Reset(p)
		h, err := b.c.ReadHeader(&b.r)
		if err != nil || h.Type != typ || h.Seq != seq {
			t.Fatalf("decoded %+v, %v; want type %v seq %d", h, err, typ, seq)
		}
		if err := b.c.Accept(h, 0); err != nil {
			t.Fatal(err)
		}
	}
	if a.c.InFlight() != 5 {
		t.Fatalf("ack-only packets not in flight: %d", a.c.InFlight())
	}
	w := bitstream.NewWriter(make([]byte, 16))
	if _, err := a.c.WriteHeader(w, typeReserved, 0); !errors.Is(err, ErrBadType) || w.BitLen() != 0 {
		t.Fatalf("WriteHeader(reserved) = %v, %d bits", err, w.BitLen())
	}
}

// TestWriteHeaderOverflow: a header that does not fit writes nothing and
// consumes no sequence number.
func TestWriteHeaderOverflow(t *testing.T) {
	c := mustConn(t, DefaultConfig(), 0, 0)
	w := bitstream.NewWriter(make([]byte, 1))
	if _, err := c.WriteHeader(w, TypeData, 0); !errors.Is(err, bitstream.ErrOverflow) {
		t.Fatalf("err %v, want ErrOverflow", err)
	}
	if w.BitLen() != 0 || c.NextSeq() != 0 || c.Stats().Sent != 0 {
		t.Fatalf("failed write left %d bits, next seq %d", w.BitLen(), c.NextSeq())
	}
	if err := checkInvariants(c); err != nil {
		t.Fatal(err)
	}
}

// TestMaxInFlight: a peer that never answers costs at most MaxInFlight records;
// the oldest are force-dropped in order, and unpopped fates block sending.
func TestMaxInFlight(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxInFlight = 16
	a := newEndpoint(t, "A", cfg, 0, 0)
	for i := 0; i < 15; i++ {
		a.send(t, 0, TypeData)
	}
	if a.c.Stats().ForcedDrops != 0 {
		t.Fatal("forced drop below the limit")
	}
	a.send(t, 0, TypeData) // 16th record: the oldest is force-dropped
	if st := a.c.Stats(); st.ForcedDrops != 1 || a.c.InFlight() != 15 {
		t.Fatalf("forced drops %d, in flight %d; want 1, 15", st.ForcedDrops, a.c.InFlight())
	}
	w := bitstream.NewWriter(make([]byte, 16))
	if _, err := a.c.WriteHeader(w, TypeData, 0); !errors.Is(err, ErrFatesPending) {
		t.Fatalf("WriteHeader with unpopped fates = %v, want ErrFatesPending", err)
	}
	for i := 0; i < 100; i++ {
		fates := a.pop(t)
		for _, f := range fates {
			if f.Delivered {
				t.Fatalf("fate %+v: nothing was acked", f)
			}
		}
		a.send(t, 0, TypeData)
		mustInvariants(t, a)
	}
	if st := a.c.Stats(); st.ForcedDrops != 101 || st.Dropped != 101 {
		t.Fatalf("stats %+v, want 101 forced drops", st)
	}
}

// TestWindowEvicted is the documented corner: the peer accepted packets but
// every header telling us so was lost until they left its window. The sender
// reports them dropped (false drops) and the receiver counts exactly those.
func TestWindowEvicted(t *testing.T) {
	a := newEndpoint(t, "A", DefaultConfig(), 0, 0)
	b := newEndpoint(t, "B", DefaultConfig(), 0, 0)
	const n = 300
	now := time.Duration(0)
	for i := 0; i < n; i++ {
		now += 10 * ms
		_, p := a.send(t, now, TypeData)
		if _, err := b.recv(t, now, p); err != nil {
			t.Fatal(err)
		}
		// B stays silent (its headers would be lost; a run of AckWindow losses
		// would also make its next packet ErrTooFar at A).
	}
	_, p := b.send(t, now, TypeData)
	if _, err := a.recv(t, now, p); err != nil {
		t.Fatal(err)
	}
	a.pop(t)
	var falseDrops uint64
	for _, f := range a.fates {
		if !f.Delivered && b.accepted[f.Seq] {
			falseDrops++
		}
	}
	if want := uint64(n - DefaultAckWindow); falseDrops != want || b.c.Stats().WindowEvicted != want {
		t.Fatalf("false drops %d, WindowEvicted %d; want both %d", falseDrops, b.c.Stats().WindowEvicted, want)
	}
	if len(a.fates) != n {
		t.Fatalf("%d fates, want %d", len(a.fates), n)
	}
}

// TestTimeThreshold: in sparse traffic a gap closes after the reorder time,
// never before; a packet arriving after that is stale.
func TestTimeThreshold(t *testing.T) {
	a := newEndpoint(t, "A", DefaultConfig(), 0, 0)
	b := newEndpoint(t, "B", DefaultConfig(), 0, 0)
	now := time.Duration(0)
	var pkts [][]byte
	for i := 0; i < 6; i++ {
		_, p := a.send(t, now, TypeData)
		pkts = append(pkts, p)
	}
	// Steady 50 ms arrivals establish the inter-arrival estimate; 4 is late.
	for _, s := range []uint64{0, 1, 2, 3, 5} {
		now += 50 * ms
		if _, err := b.recv(t, now, pkts[s]); err != nil {
			t.Fatal(err)
		}
	}
	gapOpened := now
	tau := b.c.reorderTime()
	if tau < 3*50*ms+25*ms {
		t.Fatalf("reorder time %v does not cover a 3-slot displacement at 50 ms", tau)
	}
	b.c.Tick(gapOpened + tau - 1)
	if b.c.Stats().Abandoned != 0 {
		t.Fatal("gap closed before the reorder time")
	}
	b.c.Tick(gapOpened + tau)
	if b.c.Stats().Abandoned != 1 {
		t.Fatal("gap not closed at the reorder time")
	}
	if _, err := b.recv(t, gapOpened+tau, pkts[4]); !errors.Is(err, ErrStale) {
		t.Fatalf("packet after its gap closed: %v, want ErrStale", err)
	}
}

// periodic drives a lossless exchange: A and B each send every interval (B
// offset by half an interval), one-way delay oneWay, Tick and PopFates every
// 5 ms. run may be called repeatedly to continue.
type periodic struct {
	a, b         *endpoint
	interval     time.Duration
	oneWay       time.Duration
	net          wire
	now          time.Duration
	nextA, nextB time.Duration
	sentA, sentB int
}

func newPeriodic(a, b *endpoint, interval, oneWay time.Duration) *periodic {
	return &periodic{a: a, b: b, interval: interval, oneWay: oneWay, nextB: interval / 2}
}

func (pd *periodic) run(t *testing.T, until time.Duration) {
	t.Helper()
	for ; pd.now < until; pd.now += ms {
		now := pd.now
		pd.net.deliverAll(t, now)
		if now >= pd.nextA {
			seq, p := pd.a.send(t, now, TypeData)
			pd.net.put(now+pd.oneWay, pd.b, seq, p)
			pd.nextA += pd.interval
			pd.sentA++
		}
		if now >= pd.nextB {
			seq, p := pd.b.send(t, now, TypeData)
			pd.net.put(now+pd.oneWay, pd.a, seq, p)
			pd.nextB += pd.interval
			pd.sentB++
		}
		if now%(5*ms) == 0 {
			pd.a.c.Tick(now)
			pd.b.c.Tick(now)
			pd.a.pop(t)
			pd.b.pop(t)
			mustInvariants(t, pd.a, pd.b)
		}
	}
	checkAgreement(t, pd.a, pd.b)
	checkAgreement(t, pd.b, pd.a)
}

// TestSteadyStateHeaderBits pins the headline number: at 20 pkt/s each way and
// 100 ms RTT without loss every header is 21 bits (type included).
func TestSteadyStateHeaderBits(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		oneWay   time.Duration
	}{
		{"20 pkt/s, 100 ms RTT", 50 * ms, 50 * ms},
		{"60 pkt/s, 200 ms RTT", 16 * ms, 100 * ms},
		{"10 pkt/s, 40 ms RTT", 100 * ms, 20 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newEndpoint(t, "A", DefaultConfig(), 0, 0)
			b := newEndpoint(t, "B", DefaultConfig(), 0, 0)
			pd := newPeriodic(a, b, tc.interval, tc.oneWay)
			pd.run(t, 2*time.Second)
			bits0, sent0 := a.c.Stats().HeaderBits+b.c.Stats().HeaderBits, pd.sentA+pd.sentB
			pd.run(t, 12*time.Second)
			bits := a.c.Stats().HeaderBits + b.c.Stats().HeaderBits - bits0
			n := uint64(pd.sentA + pd.sentB - sent0)
			if bits != 21*n {
				t.Fatalf("%d header bits over %d packets = %.2f bits/packet, want exactly 21", bits, n, float64(bits)/float64(n))
			}
			for _, e := range []*endpoint{a, b} {
				if st := e.c.Stats(); st.Dropped != 0 || st.Abandoned != 0 {
					t.Fatalf("%s: lossless run dropped %d, abandoned %d", e.name, st.Dropped, st.Abandoned)
				}
			}
		})
	}
}

// TestRTTConvergence: 50 ms each way, B answers each A packet after holding it
// 0–50 ms (uniform). With the hold subtracted srtt converges to 100 ms.
func TestRTTConvergence(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxHold time.Duration
		jitter  time.Duration // ± on each one-way delay
	}{
		{"no hold", 0, 0},
		{"hold 0-50 ms", 50 * ms, 0},
		{"hold 0-50 ms, jitter ±10 ms", 50 * ms, 10 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 11))
			a := newEndpoint(t, "A", DefaultConfig(), 0, 0)
			b := newEndpoint(t, "B", DefaultConfig(), 0, 0)
			oneWay := func() time.Duration {
				if tc.jitter == 0 {
					return 50 * ms
				}
				return 50*ms + time.Duration(rng.Int64N(int64(2*tc.jitter+1))) - tc.jitter
			}
			var net wire
			var replies []time.Duration // times at which B sends
			for now := time.Duration(0); now < 30*time.Second; now += 500 * time.Microsecond {
				for {
					p, ok := net.next(now)
					if !ok {
						break
					}
					if _, err := p.to.recv(t, now, p.p); err != nil && !expectedRejection(err) {
						t.Fatal(err)
					}
					if p.to == b {
						hold := time.Duration(0)
						if tc.maxHold > 0 {
							hold = time.Duration(rng.Int64N(int64(tc.maxHold)))
						}
						replies = append(replies, now+hold)
					}
				}
				for i := 0; i < len(replies); i++ {
					if replies[i] <= now {
						seq, p := b.send(t, now, TypeData)
						net.put(now+oneWay(), a, seq, p)
						replies = append(replies[:i], replies[i+1:]...)
						i--
					}
				}
				if now%(50*ms) == 0 {
					seq, p := a.send(t, now, TypeData)
					net.put(now+oneWay(), b, seq, p)
					a.pop(t)
					b.pop(t)
				}
			}
			rtt := a.c.RTT()
			t.Logf("srtt %v rttvar %v jitter %v samples %d", rtt, a.c.RTTVar(), a.c.Jitter(), a.c.Stats().RTTSamples)
			if absDur(rtt-100*ms) > 3*ms {
				t.Fatalf("srtt %v, want 100ms ± 3ms (rttvar %v)", rtt, a.c.RTTVar())
			}
			if a.c.Stats().RTTSamples < 500 {
				t.Fatalf("only %d RTT samples", a.c.Stats().RTTSamples)
			}
			if tc.jitter == 0 && tc.maxHold == 0 && a.c.Jitter() > ms {
				t.Fatalf("jitter %v on a constant path", a.c.Jitter())
			}
			if tc.jitter > 0 && a.c.Jitter() < 2*ms {
				t.Fatalf("jitter %v with ±%v per direction", a.c.Jitter(), tc.jitter)
			}
		})
	}
}

// TestBadAckSection: malformed or impossible ack sections are refused with
// ErrBadAck before anything changes.
func TestBadAckSection(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    craft
		want error
	}{
		{"valid control", craft{ackW: 5, ackL: 9, m: 3, gaps: []uint64{1}, hz: 1}, nil},
		{"valid, all ok", craft{ackW: 5, ackL: 9, allOK: true}, nil},
		{"ack of a packet never sent", craft{ackW: 5, ackL: 12, allOK: true}, ErrBadAck},
		{"hole beyond the range", craft{ackW: 5, ackL: 9, m: 3, gaps: []uint64{4}}, ErrBadAck},
		{"holes run past the range", craft{ackW: 5, ackL: 9, m: 2, gaps: []uint64{1, 1, 1}}, ErrBadAck},
		{"hole count above the range", craft{ackW: 5, ackL: 9, m: 2, nholes: 5, gaps: []uint64{1}}, ErrBadAck},
		{"range longer than the window", craft{ackW: 10, ackL: 9, m: 300, gaps: []uint64{1}}, ErrBadAck},
		{"range below the first sequence", craft{ackW: 5, ackL: 5, m: 7, gaps: []uint64{1}}, ErrBadAck},
		{"horizon code beyond K", craft{ackW: 5, ackL: 9, m: 3, gaps: []uint64{1}, rawHz: 5}, ErrBadAck},
		{"horizon above L", craft{ackW: 5, ackL: 9, m: 1, gaps: []uint64{1}, hz: 3}, ErrBadAck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newEndpoint(t, "B", DefaultConfig(), 0, 0)
			for i := 0; i < 10; i++ {
				b.send(t, 0, TypeData)
			}
			before := takeSnapshot(b.c)
			tc.c.seqW = 7
			b.r.Reset(tc.c.bytes(t))
			h, err := b.c.ReadHeader(&b.r)
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("ReadHeader = %v, want %v", err, tc.want)
			}
			if !takeSnapshot(b.c).equal(before) {
				t.Fatal("ReadHeader changed state")
			}
			if err != nil {
				return
			}
			if err := b.c.Accept(h, ms); err != nil {
				t.Fatal(err)
			}
			// All ok: 0..9 delivered. Control: range [6, 8] with 6 missing and
			// H = max(R, L+1-K) + 1 = 7, so 6 was abandoned; 0..5 lie below R
			// although B never learned their fate (the peer contradicts itself:
			// never infer delivered without a bit), so they are dropped too.
			fates := b.pop(t)
			if len(fates) != 10 {
				t.Fatalf("%d fates: %+v", len(fates), fates)
			}
			for _, f := range fates {
				if want := f.Seq >= 7 || tc.c.allOK; f.Delivered != want {
					t.Fatalf("fate %+v, want delivered=%v", f, want)
				}
			}
		})
	}
}

// TestTwoPhaseInterleaved: two headers decoded before either is committed, then
// committed in either order, give the same fates as one-at-a-time processing.
func TestTwoPhaseInterleaved(t *testing.T) {
	for _, order := range []string{"older first", "newer first"} {
		t.Run(order, func(t *testing.T) {
			a := newEndpoint(t, "A", DefaultConfig(), 0, 0)
			b := newEndpoint(t, "B", DefaultConfig(), 0, 0)
			link(a, b)
			now := time.Duration(0)
			// Warm up so that B's headers carry acks with a moving L.
			for i := 0; i < 20; i++ {
				now += 10 * ms
				_, p := a.send(t, now, TypeData)
				if _, err := b.recv(t, now, p); err != nil {
					t.Fatal(err)
				}
				_, q := b.send(t, now, TypeData)
				if _, err := a.recv(t, now, q); err != nil {
					t.Fatal(err)
				}
			}
			_, p1 := a.send(t, now, TypeData)
			_, p2 := a.send(t, now, TypeData)
			if _, err := b.recv(t, now, p1); err != nil {
				t.Fatal(err)
			}
			_, q1 := b.send(t, now, TypeData) // acks p1
			if _, err := b.recv(t, now, p2); err != nil {
				t.Fatal(err)
			}
			_, q2 := b.send(t, now, TypeData) // acks p2
			var r1, r2 bitstream.Reader
			r1.Reset(q1)
			r2.Reset(q2)
			h1, err1 := a.c.ReadHeader(&r1)
			h2, err2 := a.c.ReadHeader(&r2)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			hs := []Header{h1, h2}
			if order == "newer first" {
				hs[0], hs[1] = h2, h1
			}
			for _, h := range hs {
				if err := a.c.Accept(h, now+ms); err != nil {
					t.Fatal(err)
				}
				a.accepted[h.Seq] = true
			}
			fates := a.pop(t)
			if len(fates) == 0 || fates[len(fates)-1].Seq != a.c.NextSeq()-1 {
				t.Fatalf("fates %+v: p2 (seq %d) not resolved", fates, a.c.NextSeq()-1)
			}
			checkAgreement(t, a, b)
			mustInvariants(t, a, b)
		})
	}
}

// TestDeliveredBehindAPendingFate: B accepted 1 and 2 but not 0, which is
// still within its reorder window, so A's fates of 1 and 2 wait behind 0's in
// PopFates; Delivered already tells, with the send times, and stops telling
// once the fates were popped.
func TestDeliveredBehindAPendingFate(t *testing.T) {
	cfg := DefaultConfig()
	a, b, _, now := lockstepPair(t, cfg, 4, []uint64{1, 2})
	_, p := b.send(t, now, TypeAck)
	if _, err := a.recv(t, now+ms, p); err != nil {
		t.Fatal(err)
	}
	if f := a.pop(t); len(f) != 0 {
		t.Fatalf("fates %+v popped past the unresolved packet 0", f)
	}
	for seq, want := range []bool{false, true, true, false} {
		if at, ok := a.c.Delivered(uint64(seq)); ok != want || (ok && at != 0) {
			t.Fatalf("Delivered(%d) = %v, %v; want %v", seq, at, ok, want)
		}
	}
	if _, ok := a.c.Delivered(99); ok {
		t.Fatal("Delivered of a packet never sent")
	}
	// B gives 0 up by time; its next ack resolves 0 dropped and releases all.
	now += b.c.reorderTime() + 20*ms
	b.c.Tick(now)
	_, p = b.send(t, now, TypeAck)
	if _, err := a.recv(t, now+ms, p); err != nil {
		t.Fatal(err)
	}
	if f := a.pop(t); len(f) != 3 || f[0].Delivered || !f[1].Delivered || !f[2].Delivered {
		t.Fatalf("fates %+v, want 0 dropped, 1 and 2 delivered", f)
	}
	if _, ok := a.c.Delivered(1); ok {
		t.Fatal("Delivered still reports a popped fate")
	}
}
