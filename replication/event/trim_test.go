package event

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// trimPairs returns two identical pairs: g trims at every Write and every
// section (its rings are dropped after idleTrims idle packets and grown
// again on the next burst), f never trims.
func trimPairs(t *testing.T, cfg Config) (g, f *pair) {
	g, f = newPair(t, cfg), newPair(t, cfg)
	g.s.cfg, g.r.cfg = withSenderTrim(g.s.cfg, time.Nanosecond), withReceiverTrim(g.r.cfg, 1)
	f.s.cfg, f.r.cfg = withSenderTrim(f.s.cfg, 1<<50), withReceiverTrim(f.r.cfg, math.MaxInt32) // ≈ 13 days: never here (MaxInt64 would overflow now+period)
	return g, f
}

// withSenderTrim is a copy of cfg (not interned) whose Senders trim every
// period.
func withSenderTrim(cfg *Config, period time.Duration) *Config {
	c := *cfg
	c.senderTrim = period
	return &c
}

// withReceiverTrim is withSenderTrim for the Receiver's period (sections).
func withReceiverTrim(cfg *Config, sections int32) *Config {
	c := *cfg
	c.receiverTrim = sections
	return &c
}

// released reports what g still holds that an idle pair should have given
// back ("" when everything was).
func released(p *pair) string {
	for i, ref := range p.s.streams {
		if st := ref.st; st != nil && (st.units != nil || st.pend != nil) {
			return fmt.Sprintf("sender stream %d keeps %d units, %d pending slots", i, len(st.units), len(st.pend))
		}
	}
	switch {
	case p.s.txState != nil:
		return fmt.Sprintf("sender keeps its transmission state: %d entries, %d packet records", len(p.s.entries), len(p.s.pkts))
	case p.r.scratch != nil:
		return fmt.Sprintf("receiver keeps a %d-byte scratch", p.r.ownLen())
	case p.r.receiverX != nil && p.r.unSeen != nil:
		return "receiver keeps its unordered bitmap"
	}
	for i, ref := range p.r.lanes {
		if ln := ref.ln; ln != nil && ln.slots != nil {
			return fmt.Sprintf("receiver lane %d keeps %d slots", i, len(ln.slots))
		}
	}
	return ""
}

// idle reports that p's sender holds nothing queued or in flight.
func idle(p *pair) bool {
	for _, ref := range p.s.streams {
		if st := ref.st; st != nil && !st.empty() {
			return false
		}
	}
	return p.s.inFlight() == 0 && (p.s.x == nil || p.s.x.ugN == 0 && len(p.s.x.active) == 0) && p.r.bytes == 0
}

// TestTrimIsInvisible drives a pair that drops its rings whenever it is idle
// and one that never does through bursts that fill lanes (ordered, unordered,
// fragmented, unguaranteed, staggered) under loss and reordering, separated
// by idle stretches, so rings are released and grown again many times: same
// packets, same deliveries, same counters. And after each idle stretch the
// trimming pair holds none of its rings.
func TestTrimIsInvisible(t *testing.T) {
	cfg := DefaultConfig()
	g, f := trimPairs(t, cfg)
	rng := rand.New(rand.NewPCG(13, 14))
	now := time.Duration(0)
	type flight struct {
		seq       uint64
		delivered bool
		arriveAt  int // packet count at which it arrives (reordering)
	}
	var inflight []flight
	var arriving []flight
	pkt := 0
	send := func(both func(p *pair) error) {
		t.Helper()
		eg, ef := both(g), both(f)
		if fmt.Sprint(eg) != fmt.Sprint(ef) {
			t.Fatalf("packet %d: %v with trimming, %v without", pkt, eg, ef)
		}
	}
	step := func() {
		t.Helper()
		now += 50 * ms
		pkt++
		sg, sf := g.write(now, 1200), f.write(now, 1200)
		if !bytes.Equal(g.pkts[sg], f.pkts[sf]) {
			t.Fatalf("packet %d differs with trimming", pkt)
		}
		fl := flight{seq: sg, delivered: rng.Float64() < 0.85, arriveAt: pkt + rng.IntN(4)}
		inflight = append(inflight, fl)
		if fl.delivered {
			arriving = append(arriving, fl)
		}
		for i := 0; i < len(arriving); {
			if a := arriving[i]; a.arriveAt <= pkt {
				g.deliver(a.seq)
				f.deliver(a.seq)
				arriving = append(arriving[:i], arriving[i+1:]...)
				continue
			}
			i++
		}
		for len(inflight) > 0 && inflight[0].arriveAt+1 <= pkt-4 {
			fl := inflight[0]
			inflight = inflight[1:]
			g.fate(fl.seq, fl.delivered)
			f.fate(fl.seq, fl.delivered)
		}
		if rng.IntN(3) == 0 {
			arrived := func(seq uint64) bool {
				for _, a := range arriving {
					if a.seq == seq {
						return false
					}
				}
				for _, fl := range inflight {
					if fl.seq == seq {
						return fl.delivered
					}
				}
				return false
			}
			g.s.AckDelivered(arrived)
			f.s.AckDelivered(arrived)
		}
	}
	burst := func(round int) {
		t.Helper()
		for i, n := 0, 1+rng.IntN(40); i < n; i++ {
			size := 1 + rng.IntN(60)
			if rng.IntN(8) == 0 {
				size = 1 + rng.IntN(3000) // fragments
			}
			pl := payload(round, i, size)
			switch c := rng.IntN(10); {
			case c < 6:
				lane := rng.IntN(3)
				send(func(p *pair) error { return p.s.SendOrdered(lane, pl) })
			case c < 8:
				send(func(p *pair) error { return p.s.SendUnordered(pl) })
			case c < 9:
				send(func(p *pair) error { return p.s.SendUnguaranteed(pl[:min(len(pl), cfg.MaxFragment)]) })
			default:
				key := uint16(rng.IntN(4))
				send(func(p *pair) error { return p.s.SendStaggered(key, pl[:min(len(pl), cfg.MaxFragment)], now) })
			}
		}
	}
	for cycle := range 6 {
		for round := range 15 {
			if rng.IntN(3) != 0 {
				burst(100*cycle + round)
			}
			step()
		}
		// Idle: the backlog drains, every fate resolves, then the trims
		// release.
		for i := 0; i < 12 || !idle(f); i++ {
			step()
			if i > 2000 {
				t.Fatalf("cycle %d: the backlog never drained", cycle)
			}
		}
		for range idleTrims + 2 {
			step()
		}
		if msg := released(g); msg != "" {
			t.Fatalf("cycle %d, after an idle stretch: %s", cycle, msg)
		}
		if msg := released(f); msg == "" {
			t.Fatalf("cycle %d: the pair that never trims holds nothing: the bursts did not exercise the rings", cycle)
		}
	}
	gg, ff := g.take(), f.take()
	if len(gg) < 500 {
		t.Fatalf("only %d events delivered: the load is too light to mean anything", len(gg))
	}
	if fmt.Sprint(gg) != fmt.Sprint(ff) {
		t.Fatalf("deliveries differ:\n%v\n%v", gg, ff)
	}
	if g.s.Stats() != f.s.Stats() || g.r.Stats() != f.r.Stats() {
		t.Fatalf("stats differ:\n%+v %+v\n%+v %+v", g.s.Stats(), g.r.Stats(), f.s.Stats(), f.r.Stats())
	}
}

// TestIdleLaneGivesItsRingsBack fills one lane with a burst (its rings grow
// to hold it), lets it go idle with the default trim period, and checks the
// rings are released after idleTrims trims and not before; then uses the
// lane again: ids continue and delivery stays in order.
func TestIdleLaneGivesItsRingsBack(t *testing.T) {
	p := newPair(t, DefaultConfig())
	now := time.Duration(0)
	for i := range 200 {
		must(t, p.s.SendOrdered(2, payload(2, i, 20)))
	}
	for p.s.InFlight(2) > 0 {
		now += 50 * ms
		p.through(now, 1200)
	}
	st := p.s.streams[2].st
	if len(st.units) < 64 {
		t.Fatalf("a 200-event burst grew the ring to %d units only", len(st.units))
	}
	nextID := st.next
	// Trims run once a second; the stream was busy at the last one. It is
	// released at the (idleTrims+1)th idle trim, within idleTrims+2 s.
	for now0 := now; now < now0+time.Duration(idleTrims)*trimEvery-trimEvery/2; {
		now += 50 * ms
		p.through(now, 1200)
		if st := p.s.streams[2].st; st == nil || st.units == nil {
			t.Fatalf("released %v after the burst, before %d idle trims", now-now0, idleTrims)
		}
	}
	for now0 := now; p.s.streams[2].st != nil; {
		now += 50 * ms
		p.through(now, 1200)
		if now-now0 > 3*trimEvery {
			t.Fatal("an idle lane kept its rings")
		}
	}
	if ref := p.r.lanes[2]; ref.ln != nil || ref.next != nextID {
		t.Fatalf("receiver lane 2: %+v, want no state, next id %d", ref, nextID)
	}
	p.take()
	for i := range 5 {
		must(t, p.s.SendOrdered(2, payload(2, 1000+i, 20)))
	}
	now += 50 * ms
	p.through(now, 1200)
	if st := p.s.streams[2].st; st.base != nextID+5 || len(st.units) != 8 {
		t.Fatalf("after reuse: base %d (want %d), ring %d (want 8: grown from %d for 5 units)", st.base, nextID+5, len(st.units), minUnits)
	}
	g := p.take()
	if len(g) != 5 {
		t.Fatalf("delivered %d of 5 after reuse: %v", len(g), g)
	}
	for i, e := range g {
		if s, ix, ok := parsePayload([]byte(e.Payload)); !ok || s != 2 || ix != 1000+i {
			t.Fatalf("event %d after reuse: %v", i, e)
		}
	}
}

// TestHostileAheadReleasedAfterGapFills: a peer that sends units far ahead
// of a lane's next id grows that lane's slots (bounded by
// MaxInFlightPerLane and MaxQueuedBytes, as before); once the gap is filled
// and the lane goes quiet, the slots are given back.
func TestHostileAheadReleasedAfterGapFills(t *testing.T) {
	cfg := DefaultConfig()
	p := newPair(t, cfg)
	p.r.cfg = withReceiverTrim(p.r.cfg, 1)
	for i := range 3000 {
		must(t, p.s.SendOrdered(0, payload(0, i, 8)))
	}
	// The first packet is lost; the rest arrive, far ahead of next.
	now := 50 * ms
	lost := p.write(now, 1200)
	var later []uint64
	for p.s.streams[0].st.pendN > 0 {
		now += 50 * ms
		later = append(later, p.write(now, 1200))
	}
	for _, seq := range later {
		p.deliver(seq)
	}
	ln := p.r.lanes[0].ln
	if ln.ahead == 0 || len(ln.slots) < int(ln.ahead) || len(ln.slots) > cfg.MaxInFlightPerLane {
		t.Fatalf("lane 0: %d units ahead in %d slots", ln.ahead, len(ln.slots))
	}
	if p.r.BufferedBytes() > cfg.MaxQueuedBytes {
		t.Fatalf("buffered %d B > MaxQueuedBytes", p.r.BufferedBytes())
	}
	// Held while the gap is open, however long the lane is quiet.
	for range 10 * idleTrims {
		p.r.trim()
	}
	if ln.slots == nil {
		t.Fatal("slots released with units still buffered")
	}
	p.deliver(lost)
	if got := len(p.take()); got != 3000 {
		t.Fatalf("delivered %d of 3000 once the gap filled", got)
	}
	for range idleTrims + 2 {
		p.r.trim()
	}
	if ln.slots != nil || ln.ahead != 0 || p.r.BufferedBytes() != 0 {
		t.Fatalf("after the gap filled and the lane idled: %d slots, %d ahead, %d B", len(ln.slots), ln.ahead, p.r.BufferedBytes())
	}
}

// TestRareEventRingsPooled: a lane that carries an event now and then (one
// in flight at a time) gives its rings, its state and the Sender's
// transmission rings back as soon as the event's last packet is resolved —
// not seconds later at a trim —, the receiving lane its state after each
// section, and the next event takes them from the pools without allocating.
func TestRareEventRingsPooled(t *testing.T) {
	cfg := DefaultConfig()
	s, err := NewSender(cfg)
	must(t, err)
	r, err := NewReceiver(cfg)
	must(t, err)
	buf := make([]byte, 1200)
	ev := payload(0, 0, 20)
	var w bitstream.Writer
	var rd bitstream.Reader
	seq, now, delivered := uint64(0), time.Duration(0), 0
	deliver := func(Event) { delivered++ }
	cycle := func() {
		if err := s.SendOrdered(0, ev); err != nil {
			t.Fatal(err)
		}
		for range 4 { // the unit and its redundant copies, each packet's fate at once
			seq++
			now += 50 * ms
			w.Reset(buf)
			if _, err := s.Write(&w, seq, now); err != nil {
				t.Fatal(err)
			}
			rd.Reset(buf)
			if err := r.Read(&rd, deliver); err != nil {
				t.Fatal(err)
			}
			s.OnFate(notify.Fate{Seq: seq, Delivered: true})
		}
	}
	for range 3 {
		cycle()
	}
	if st := s.streams[0]; st.st != nil || st.next != 3 || s.txState != nil {
		t.Fatalf("after the event was acknowledged: stream %+v, transmission state %v; want the stream and its rings and the transmission state given back, next id 3",
			st, s.txState != nil)
	}
	if r.receiverX != nil {
		t.Fatal("ordered events alone made the receiver's unordered and staggered state")
	}
	if ref := r.lanes[0]; ref.ln != nil || ref.next != 3 {
		t.Fatalf("receiver lane 0: %+v; want no state between events, next id 3", ref)
	}
	if now >= trimEvery {
		t.Fatalf("%v passed: a trim could have released them", now)
	}
	if a := testing.AllocsPerRun(20, cycle); a != 0 {
		t.Fatalf("%.1f allocations per event, want 0: the rings come from the pools", a)
	}
	if delivered != 3+21 {
		t.Fatalf("delivered %d of %d events", delivered, 3+21)
	}
}
