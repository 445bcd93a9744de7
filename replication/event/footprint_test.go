package event

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/internal/freelist"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// Bounds on what a fresh Sender and Receiver keep with DefaultConfig.
// Measured ~160 B and ~144 B: the structs alone, their per-stream and
// per-lane lists, transmission, unguaranteed, unordered and staggered state
// and rare counters made on use (were ~22 KB and ~6.5 KB, then ~2.3 KB and
// ~1.5 KB, ~600 B and ~510 B, ~170 B and ~225 B). The heap reading moves
// by ±60 B run to run, so the struct sizes are bounded exactly by
// TestSenderLayout as well.
const (
	maxSenderBytes   = 256
	maxReceiverBytes = 256
)

// TestSenderLayout: a Sender stays in the 128-byte size class and a
// Receiver in the 80-byte one (144 and 96 with one section's budgets and
// stream marks in each: now on the stack of the call that writes or reads
// it; 112 with 64-bit counters and its own trim period; 128 with its own
// payload buffer's slice header in it, not behind a pointer; 152 and 136
// bytes, the 160 and 144 classes, with the Sender's trim period in each
// Sender and the Receiver's buffered bytes an int; 320 and 224 while they
// held the transmission records and the unordered and staggered state; a
// Sender was 336 bytes, the 352 class, with queuedBytes, work, avail and
// redundBits as ints).
func TestSenderLayout(t *testing.T) {
	if n := unsafe.Sizeof(Sender{}); n > 128 {
		t.Errorf("Sender is %d bytes, over the 128-byte size class", n)
	}
	if n := unsafe.Sizeof(Receiver{}); n > 80 {
		t.Errorf("Receiver is %d bytes, over the 80-byte size class", n)
	}
	// A packet of a Sender with nothing queued or in flight reads its
	// first line alone, received (OnFate on a clean link, AckDelivered,
	// HasPending, HasRedundant, Outstanding) or sent (Write of the empty
	// section: wrote, rr, lastSeq, trimAt, sections): a 128-byte object
	// starts on a line.
	var s Sender
	for _, f := range []struct {
		name     string
		off, len uintptr
	}{
		{"lossN", unsafe.Offsetof(s.lossN), unsafe.Sizeof(s.lossN)},
		{"redund", unsafe.Offsetof(s.redund), unsafe.Sizeof(s.redund)},
		{"work", unsafe.Offsetof(s.work), unsafe.Sizeof(s.work)},
		{"lastSeq", unsafe.Offsetof(s.lastSeq), unsafe.Sizeof(s.lastSeq)},
		{"trimAt", unsafe.Offsetof(s.trimAt), unsafe.Sizeof(s.trimAt)},
		{"sections", unsafe.Offsetof(s.sections), unsafe.Sizeof(s.sections)},
		{"x", unsafe.Offsetof(s.x), unsafe.Sizeof(s.x)},
		{"txState", unsafe.Offsetof(s.txState), unsafe.Sizeof(s.txState)},
	} {
		if f.off+f.len > 64 {
			t.Errorf("Sender.%s ends at byte %d, past the first line: an idle Sender's packet reads two", f.name, f.off+f.len)
		}
	}
	// An empty event section reads cfg, sinceTrim and stats.Sections alone
	// (sectionDone): within 16 bytes they share a line wherever an 80-byte
	// object starts (16-byte aligned).
	var r Receiver
	for _, f := range []struct {
		name     string
		off, len uintptr
	}{
		{"cfg", unsafe.Offsetof(r.cfg), unsafe.Sizeof(r.cfg)},
		{"sinceTrim", unsafe.Offsetof(r.sinceTrim), unsafe.Sizeof(r.sinceTrim)},
		{"stats.Sections", unsafe.Offsetof(r.stats) + unsafe.Offsetof(r.stats.Sections), unsafe.Sizeof(r.stats.Sections)},
	} {
		if f.off+f.len > 16 {
			t.Errorf("%s ends at byte %d, past the first 16: an empty section may read two lines", f.name, f.off+f.len)
		}
	}
}

func perInstance(t *testing.T, mk func() any) int64 {
	t.Helper()
	const n = 200
	keep := make([]any, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep {
		keep[i] = mk()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return int64(after.HeapAlloc-before.HeapAlloc) / n
}

func TestFootprint(t *testing.T) {
	cfg := DefaultConfig()
	s := perInstance(t, func() any {
		x, err := NewSender(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return x
	})
	r := perInstance(t, func() any {
		x, err := NewReceiver(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return x
	})
	t.Logf("event.NewSender: %d B, event.NewReceiver: %d B per connection", s, r)
	if s > maxSenderBytes {
		t.Fatalf("NewSender keeps %d B, want ≤ %d", s, maxSenderBytes)
	}
	if r > maxReceiverBytes {
		t.Fatalf("NewReceiver keeps %d B, want ≤ %d", r, maxReceiverBytes)
	}
}

// preGrow sizes p's stagger keys and unguaranteed ring at their maximum up
// front: the layout before they became growable, the reference to match.
func preGrow(p *pair) {
	p.s.ext()
	p.s.growKeys(p.s.cfg.StaggerKeys - 1)
	for len(p.s.x.ug) < p.s.cfg.MaxUnguaranteed {
		p.s.growUG()
	}
	p.r.growKeys(p.r.cfg.StaggerKeys - 1)
}

// TestGrowthIsInvisible drives two identical pairs — growable, and pre-grown
// to the old fixed sizes — through load that fills the unguaranteed queue to
// its bound (wrapping the ring) and touches every stagger key in random order:
// same errors, same packet bytes, same deliveries.
func TestGrowthIsInvisible(t *testing.T) {
	cfg := DefaultConfig()
	g, f := newPair(t, cfg), newPair(t, cfg)
	preGrow(f)
	if g.s.x != nil || g.r.receiverX != nil || g.r.scratch != nil {
		t.Fatal("fresh Sender/Receiver preallocated what should grow on demand")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	now := time.Duration(0)
	for round := 0; round < 30; round++ {
		now += 20 * ms
		// Bursts grow round by round, so each doubling happens with the
		// ring's head mid-buffer (the previous write drained part of it).
		for i, n := 0, 5+11*round; i < n; i++ {
			pl := []byte(fmt.Sprintf("ug %d/%d", round, i))
			eg, ef := g.s.SendUnguaranteed(pl), f.s.SendUnguaranteed(pl)
			if eg != ef {
				t.Fatalf("SendUnguaranteed: %v with growth, %v without", eg, ef)
			}
		}
		for i := 0; i < 20; i++ {
			// Key range widens round by round (and reaches a few bad keys):
			// the keys grow in steps, with live state to carry over.
			key := uint16(rng.IntN(min(cfg.StaggerKeys+2, 3+10*round)))
			pl := []byte(fmt.Sprintf("key %d r%d", key, round))
			eg, ef := g.s.SendStaggered(key, pl, now), f.s.SendStaggered(key, pl, now)
			if fmt.Sprint(eg) != fmt.Sprint(ef) {
				t.Fatalf("SendStaggered(%d): %v with growth, %v without", key, eg, ef)
			}
		}
		for i := 0; i < 3; i++ {
			now += 33 * ms
			sg, sf := g.write(now, 1200), f.write(now, 1200)
			if !bytes.Equal(g.pkts[sg], f.pkts[sf]) {
				t.Fatalf("round %d: packets differ with growth", round)
			}
			if rng.IntN(5) != 0 {
				g.deliver(sg)
				f.deliver(sf)
			}
			g.fate(sg, true)
			f.fate(sf, true)
		}
	}
	gg, ff := g.take(), f.take()
	if fmt.Sprint(gg) != fmt.Sprint(ff) {
		t.Fatalf("deliveries differ:\n%v\n%v", gg, ff)
	}
	if len(g.s.x.ug) != cfg.MaxUnguaranteed || len(g.s.x.keys) != cfg.StaggerKeys || len(g.r.keys) != cfg.StaggerKeys {
		t.Fatalf("grew to ug %d, keys %d/%d; want %d, %d: the load did not exercise growth",
			len(g.s.x.ug), len(g.s.x.keys), len(g.r.keys), cfg.MaxUnguaranteed, cfg.StaggerKeys)
	}
	if g.s.Stats() != f.s.Stats() || g.r.Stats() != f.r.Stats() {
		t.Fatalf("stats differ:\n%+v\n%+v", g.s.Stats(), f.s.Stats())
	}
}

// maxInFlightBytes bounds what a Sender holds while one small guaranteed
// event is in flight, its fates late (an echo's, on a node that has
// fallen behind: every connection holds this): the Sender, its
// transmission state and rings, the stream and its rings, the payload's
// slab, for three packets written. Measured 656 B with units of 48 bytes
// and pending events of 24 (a payload's pointer and length, not a slice
// header), 16-byte packet records and the 160-byte transmission state;
// 752 B with units of 56, pending events of 40, 24-byte records and the
// 176-byte state (thirty-sixth pass; each with the pools emptied and two
// collections each side, as the test now counts). A size check, not a
// timing one.
const maxInFlightBytes = 672

// maxInFlightBytesRace is maxInFlightBytes under the race detector, whose
// runtime keeps ≈ 24 B more of a Sender's first write live (680 B
// measured with -race, 656 without; 776 and 752 before the pass).
const maxInFlightBytesRace = 704

func TestSenderInFlightFootprint(t *testing.T) {
	if n := unsafe.Sizeof(txPacket{}); n > 16 {
		t.Errorf("txPacket is %d bytes, want ≤ 16: a ring of four past the 64-byte size class", n)
	}
	if n := unsafe.Sizeof(txState{}); n > 160 {
		t.Errorf("txState is %d bytes, want ≤ 160: past the 160-byte size class", n)
	}
	if n := unsafe.Sizeof(unit{}); n > 48 {
		t.Errorf("unit is %d bytes, want ≤ 48: a ring of two past the 96-byte size class", n)
	}
	if n := unsafe.Sizeof(pendEvent{}); n > 24 {
		t.Errorf("pendEvent is %d bytes, want ≤ 24: a ring of two past the 48-byte size class", n)
	}
	cfg := DefaultConfig()
	const n = 1000
	ss := make([]*Sender, n)
	for i := range ss {
		s, err := NewSender(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ss[i] = s
	}
	var before, after runtime.MemStats
	// Two collections each side: the first leaves sync.Pools' contents
	// (other packages', other tests') in their victim caches, still live.
	emptyPools()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	buf := make([]byte, 256)
	for _, s := range ss {
		if err := s.SendOrdered(0, []byte("an echo's payload, 32 bytes long")); err != nil {
			t.Fatal(err)
		}
		for k := range 3 { // the unit and its copies, no fate yet
			w := bitstream.NewWriter(buf)
			if _, err := s.Write(w, uint64(10+k), time.Duration(k)*50*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		if s.inFlight() == 0 {
			t.Fatal("no packet in flight")
		}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ss)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("a Sender with an event in flight: %d B more than an idle one", per)
	bound := int64(maxInFlightBytes)
	if raceEnabled {
		bound = maxInFlightBytesRace
	}
	if per > bound {
		t.Fatalf("a Sender with an event in flight holds %d B more, want ≤ %d (race detector %v)", per, bound, raceEnabled)
	}
}

// emptyPools drops what the process-wide pools hold (the rings, the idle
// streams' and transmission states, the payload slabs), so a footprint
// counts every allocation its Senders make, not only those the tests
// before it (in -shuffle's order) left nothing pooled for: with 1,000
// Senders TestSenderInFlightFootprint read 618–680 B by test order.
func emptyPools() {
	for _, p := range []interface{ reset() }{&pendRings, &unitRings, &pktRings, &entryRings} {
		p.reset()
	}
	streamStructs.Reset()
	laneStructs.Reset()
	txStates.Reset()
	slabs.mu.Lock()
	slabs.free = [numSlabClass][][]byte{}
	slabs.use = [numSlabClass]freelist.Use{}
	slabs.size = 0
	slabs.mu.Unlock()
}

func (p *ringPool[T]) reset() {
	p.mu.Lock()
	p.free = nil
	p.use = freelist.Use{}
	p.mu.Unlock()
}

// maxCaughtUpBytes bounds TestCaughtUpFootprint's bytes a connection.
// Measured 946–949 B while the pools kept every ring, state and slab a
// node's lag had put in them; 268 B with the pools trimmed by use
// (freelist.Use).
const maxCaughtUpBytes = 320

// TestCaughtUpFootprint measures what the event Senders of a node's
// 2,000 connections and the shared pools hold ten seconds after the node
// caught up: while behind, every connection held an echo in flight (its
// fates late); since, each sends an echo a second in 21 packets a second,
// every packet's fate two packets later (≈ 100 ms). The pools keep what
// the traffic takes, not what the lag took.
func TestCaughtUpFootprint(t *testing.T) {
	const n, rate = 2000, 21
	cfg := DefaultConfig()
	var before, after runtime.MemStats
	emptyPools()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	ss := make([]*Sender, n)
	seqs := make([]uint64, n)
	buf := make([]byte, 256)
	echo := []byte("an echo's payload, 32 bytes long")
	write := func(i int, now time.Duration) {
		w := bitstream.NewWriter(buf)
		if _, err := ss[i].Write(w, seqs[i], now); err != nil {
			t.Fatal(err)
		}
		seqs[i]++
	}
	for i := range ss { // behind: an echo in flight on every connection
		s, err := NewSender(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ss[i], seqs[i] = s, 1
		if err := s.SendOrdered(0, echo); err != nil {
			t.Fatal(err)
		}
		for k := range 3 {
			write(i, time.Duration(k)*50*time.Millisecond)
		}
	}
	for i, s := range ss { // caught up: the late fates
		for seq := uint64(1); seq < seqs[i]; seq++ {
			s.OnFate(notify.Fate{Seq: seq, Delivered: true, SentAt: 0})
		}
	}
	for p := range 10 * rate {
		now := time.Second + time.Duration(p)*time.Second/rate
		for i, s := range ss {
			if (p+i)%rate == 0 {
				if err := s.SendOrdered(0, echo); err != nil {
					t.Fatal(err)
				}
			}
			write(i, now)
			if seq := seqs[i] - 3; seq >= 4 { // the fate of the packet two before
				s.OnFate(notify.Fate{Seq: seq, Delivered: true, SentAt: now - 2*time.Second/rate})
			}
		}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ss)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("a caught-up node's event Senders and pools: %d B a connection", per)
	if per > maxCaughtUpBytes {
		t.Fatalf("a caught-up node's event Senders and pools hold %d B a connection, want ≤ %d", per, maxCaughtUpBytes)
	}
}
