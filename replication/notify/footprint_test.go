package notify

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// maxConnBytes bounds what one fresh Conn keeps with DefaultConfig: the Conn
// (192 B, Config and starts shared, rare counters and the ring's sizing
// on use), a sender ring of 4 records and the ack bits (the gap times
// join them at the first gap: TestGapRoomOnFirstGap). Measured 288 B over
// 2,000 Conns alone and after the package's other tests (336 B with the
// 240-byte Conn; 368 B with the gap times made up front. Then
// 368 B over
// 2,000 Conns, alone and after the package's other tests (-race and
// -shuffle alike), with 16-byte records (TestRecordLayout). Over 200
// Conns the reading moved with what ran before (183 B alone, 357–397
// after other tests: 397 failed a shuffled CI run). Earlier: 214–230 and
// 409 B with 24-byte records (261 and
// 442 B with the 288-byte Conn; 320 and 474–475 B
// with the 320-byte Conn; 389 and 564–573 B with a ring of
// 8 records, 421 and 598–601 B with a 352-byte Conn; was ~34 KB with the
// ring preallocated at MaxInFlight, then ~1.2 KB). The reading moves with
// what ran before, so the struct is bounded exactly by TestConnLayout. A
// size check, not a timing one.
const maxConnBytes = 304

// TestConnLayout: a Conn stays in the 192-byte size class, which starts
// every object on a cache line, so a Conn spans three lines (the datagram
// path reads all of them) where one of 240 bytes spanned 4.75 on average
// (its partial lines cold when a round visits connections in random
// order: actors/conn's BenchmarkShardDatagramInShuffled). The Conn has no
// padding left: any field added back fails this. 240 with headSeq and
// firstPending as 64-bit values, pending and Received counted, the
// horizon and confirmed F as 64-bit values, the hasRx and hasIv flags and
// the ring's sizing period in every Conn; 256 with
// Dropped counted instead of derived and Received and RTTSamples 64-bit;
// 288 with both
// sequence starts and the ring's trim period in every Conn and 32-bit ring
// peaks; 320 with the gap times in a slice of their own and the RTT
// estimator's flag; 344 bytes, the 352 class, with ReorderThreshold,
// AckWindow and Sent copied in.
func TestConnLayout(t *testing.T) {
	n := unsafe.Sizeof(Conn{})
	if n > 192 {
		t.Errorf("Conn is %d bytes, over the 192-byte size class", n)
	}
	var fields uintptr
	ty := reflect.TypeFor[Conn]()
	for i := range ty.NumField() {
		fields += ty.Field(i).Type.Size()
	}
	if fields != n {
		t.Errorf("Conn has %d bytes of padding: a field of that size would fit unnoticed", n-fields)
	}
}

// TestRecordLayout: a sender record stays 16 bytes, a ring of minRecs 64
// (24 and 96 while L took 64 bits and F 32: carried rebuilds L).
func TestRecordLayout(t *testing.T) {
	if n := unsafe.Sizeof(record{}); n > 16 {
		t.Errorf("record is %d bytes, over 16", n)
	}
}

func TestConnFootprint(t *testing.T) {
	// 2,000 Conns: what the package's other tests leave to be freed or
	// made around the two readings (tens of KB, varying with their order
	// under -shuffle) comes to a few bytes a Conn, not the 200 B it was
	// over 200.
	const n = 2000
	keep := make([]*Conn, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep {
		c, err := New(DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		keep[i] = c
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	per := int64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("notify.New: %d B per connection", per)
	if per > maxConnBytes {
		t.Fatalf("notify.New keeps %d B per connection, want ≤ %d", per, maxConnBytes)
	}
}

// preGrow gives c the sender ring at its maximum size up front: the layout
// before the ring became growable, the reference the growing one must match.
func preGrow(c *Conn) {
	for len(c.recs) < c.maxRecs() {
		c.growRecs(0)
	}
}

// setTrimEvery gives c a sender ring sizing period of its own (the shared
// one is recTrimEvery).
func setTrimEvery(c *Conn, d time.Duration) {
	sh := *c.cfg
	sh.trimEvery = d
	c.cfg = &sh
}

// TestSenderRingGrowthIsInvisible drives two identical pairs through bursts
// that keep up to MaxInFlight packets unresolved (so the ring must grow all
// the way, wrapping on the way) under loss, one pair with growable rings that
// are also sized down at every packet (trimRecs), and one with rings
// preallocated at their maximum that never change. Every packet's bytes and
// every fate must be the same; after the bursts, steady traffic leaves the
// growable ring small again.
func TestSenderRingGrowthIsInvisible(t *testing.T) {
	cfg := DefaultConfig()
	mk := func(full bool) (a, b *endpoint) {
		a = newEndpoint(t, "a", cfg, 1<<40-300, 77) // start near a ring wrap
		b = newEndpoint(t, "b", cfg, 77, 1<<40-300)
		if full {
			preGrow(a.c)
			preGrow(b.c)
			setTrimEvery(a.c, 1<<50) // ≈ 13 days: never here (MaxInt64 would overflow now+period)
			setTrimEvery(b.c, 1<<50)
		} else {
			setTrimEvery(a.c, time.Nanosecond)
			setTrimEvery(b.c, time.Nanosecond)
		}
		return a, b
	}
	ga, gb := mk(false)
	fa, fb := mk(true)
	if len(ga.c.recs) >= len(fa.c.recs) {
		t.Fatalf("fresh ring has %d slots, want fewer than the maximum %d", len(ga.c.recs), len(fa.c.recs))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Duration(0)
	var fates [2][]Fate
	most := 0 // the growable ring's largest size
	for round := 0; round < 12; round++ {
		burst := 1 + rng.IntN(cfg.MaxInFlight+200) // beyond the bound: forced drops too
		for i := 0; i < burst; i++ {
			now += time.Millisecond
			if ga.c.inRing() >= uint64(ga.c.cfg.MaxInFlight) {
				// Full: the forced drop resolved the oldest; pop to make room.
				fates[0] = append(fates[0], ga.pop(t)...)
				fates[1] = append(fates[1], fa.pop(t)...)
			}
			_, pg := ga.send(t, now, TypeData)
			_, pf := fa.send(t, now, TypeData)
			most = max(most, len(ga.c.recs))
			if !bytes.Equal(pg, pf) {
				t.Fatalf("round %d packet %d: growable ring wrote %x, full ring %x", round, i, pg, pf)
			}
			if rng.IntN(10) == 0 { // 10 % loss
				continue
			}
			_, eg := gb.recv(t, now, pg)
			_, ef := fb.recv(t, now, pf)
			if (eg == nil) != (ef == nil) {
				t.Fatalf("receivers disagree: %v vs %v", eg, ef)
			}
		}
		// b answers a few times; a learns the fates.
		for i := 0; i < 3; i++ {
			now += 5 * time.Millisecond
			_, pg := gb.send(t, now, TypeData)
			_, pf := fb.send(t, now, TypeData)
			if !bytes.Equal(pg, pf) {
				t.Fatalf("round %d answer %d: %x vs %x", round, i, pg, pf)
			}
			ga.recv(t, now, pg)
			fa.recv(t, now, pf)
			gb.pop(t)
			fb.pop(t)
		}
		fates[0] = append(fates[0], ga.pop(t)...)
		fates[1] = append(fates[1], fa.pop(t)...)
	}
	if most != ga.c.maxRecs() {
		t.Fatalf("ring grew to %d slots, want %d: the bursts did not exercise growth", most, ga.c.maxRecs())
	}
	// Steady traffic: each packet answered at once. The sized ring goes
	// back to its first size (two periods of hysteresis); bytes still agree.
	for i := 0; i < 20; i++ {
		now += 50 * time.Millisecond
		for _, p := range [][2]*endpoint{{ga, gb}, {gb, ga}} {
			_, pg := p[0].send(t, now, TypeData)
			p[1].recv(t, now, pg)
		}
		for _, p := range [][2]*endpoint{{fa, fb}, {fb, fa}} {
			_, pf := p[0].send(t, now, TypeData)
			p[1].recv(t, now, pf)
		}
		fates[0] = append(fates[0], ga.pop(t)...)
		fates[1] = append(fates[1], fa.pop(t)...)
		gb.pop(t)
		fb.pop(t)
	}
	if len(ga.c.recs) != minRecs || len(fa.c.recs) != fa.c.maxRecs() {
		t.Fatalf("after steady traffic: sized ring %d slots (want %d), full ring %d (want %d)",
			len(ga.c.recs), minRecs, len(fa.c.recs), fa.c.maxRecs())
	}
	if len(fates[0]) != len(fates[1]) || len(fates[0]) < cfg.MaxInFlight {
		t.Fatalf("popped %d fates with growth, %d without (want equal, ≥ %d)", len(fates[0]), len(fates[1]), cfg.MaxInFlight)
	}
	for i := range fates[0] {
		if fates[0][i] != fates[1][i] {
			t.Fatalf("fate %d: %+v with growth, %+v without", i, fates[0][i], fates[1][i])
		}
	}
	if ga.c.Stats() != fa.c.Stats() || gb.c.Stats() != fb.c.Stats() {
		t.Fatalf("stats differ:\n%+v\n%+v", ga.c.Stats(), fa.c.Stats())
	}
}

// TestFullRingTrimKept: a peak of MaxMaxInFlight records in flight keeps
// the full ring through a trim (a 16-bit peak, as the peaks were when
// every Conn held them, would wrap and shrink it).
func TestFullRingTrimKept(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxInFlight = MaxMaxInFlight
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	preGrow(c)
	c.rare.recPeak = MaxMaxInFlight
	c.trimRecs(c.rare, 0)
	if len(c.recs) != MaxMaxInFlight {
		t.Fatalf("a trim after %d in flight left %d slots, want %d", MaxMaxInFlight, len(c.recs), MaxMaxInFlight)
	}
}
