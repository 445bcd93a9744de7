package event

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// traffic generates A's events and checks what B delivers against them.
type traffic struct {
	t        testing.TB
	rng      *rand.Rand
	lanes    int
	perLane  int
	nextOrd  []int // next index to send per lane
	wantOrd  []int // next index expected per lane
	nextUn   int
	unSeen   []bool
	unN      int
	perUn    int
	nextUg   int
	ugSeen   []bool
	ugN      int
	ugSent   int
	keys     int
	stagSent []int // action counter per key
	stagLast []int // last delivered counter per key (-1 none)
	stagGot  int
	bigEvery int // one event in bigEvery is large (fragmented)
	err      error
}

func newTraffic(t testing.TB, rng *rand.Rand, lanes, perLane, perUn, keys int) *traffic {
	tr := &traffic{
		t: t, rng: rng, lanes: lanes, perLane: perLane, perUn: perUn, keys: keys,
		nextOrd: make([]int, lanes), wantOrd: make([]int, lanes),
		unSeen: make([]bool, min(perUn, 1<<20)), ugSeen: make([]bool, 1<<20),
		stagSent: make([]int, keys), stagLast: make([]int, keys), bigEvery: 500,
	}
	for k := range tr.stagLast {
		tr.stagLast[k] = -1
	}
	return tr
}

func (tr *traffic) size() int {
	if tr.rng.IntN(tr.bigEvery) == 0 {
		return 1500 + tr.rng.IntN(6000) // fragmented
	}
	return 8 + tr.rng.IntN(32)
}

// offer queues up to budget new events on s at now, stopping at backpressure.
func (tr *traffic) offer(s *Sender, now time.Duration, budget int) {
	for ; budget > 0; budget-- {
		lane := tr.rng.IntN(tr.lanes + 3)
		switch {
		case lane < tr.lanes:
			if tr.nextOrd[lane] >= tr.perLane {
				continue
			}
			err := s.SendOrdered(lane, payload(lane, tr.nextOrd[lane], tr.size()))
			if errors.Is(err, ErrLaneFull) || errors.Is(err, ErrQueueFull) {
				return
			}
			if err != nil {
				tr.fail(fmt.Errorf("SendOrdered: %w", err))
				return
			}
			tr.nextOrd[lane]++
		case lane == tr.lanes:
			if tr.nextUn >= tr.perUn {
				continue
			}
			err := s.SendUnordered(payload(1000, tr.nextUn, tr.size()))
			if errors.Is(err, ErrLaneFull) || errors.Is(err, ErrQueueFull) {
				return
			}
			if err != nil {
				tr.fail(fmt.Errorf("SendUnordered: %w", err))
				return
			}
			tr.nextUn++
		case lane == tr.lanes+1:
			if tr.rng.IntN(4) != 0 {
				continue
			}
			if err := s.SendUnguaranteed(payload(2000, tr.nextUg, 8+tr.rng.IntN(16))); err == nil {
				tr.nextUg++
				tr.ugSent++
			} else if !errors.Is(err, ErrQueueFull) {
				tr.fail(fmt.Errorf("SendUnguaranteed: %w", err))
				return
			}
		default:
			if tr.rng.IntN(8) != 0 {
				continue
			}
			k := tr.rng.IntN(tr.keys)
			err := s.SendStaggered(uint16(k), payload(3000+k, tr.stagSent[k]+1, 12), now)
			if errors.Is(err, ErrQueueFull) {
				return
			}
			if err != nil {
				tr.fail(fmt.Errorf("SendStaggered: %w", err))
				return
			}
			tr.stagSent[k]++
		}
	}
}

func (tr *traffic) fail(err error) {
	if tr.err == nil {
		tr.err = err
	}
}

// deliver is B's callback: every class's contract is checked at once.
func (tr *traffic) deliver(e Event) {
	stream, index, ok := parsePayload(e.Payload)
	if !ok {
		tr.fail(fmt.Errorf("corrupt %v payload of %d bytes", e.Class, len(e.Payload)))
		return
	}
	switch e.Class {
	case Ordered:
		if stream != e.Lane || index != tr.wantOrd[e.Lane] {
			tr.fail(fmt.Errorf("lane %d delivered stream %d index %d, want index %d", e.Lane, stream, index, tr.wantOrd[e.Lane]))
			return
		}
		tr.wantOrd[e.Lane]++
	case Unordered:
		if stream != 1000 || index >= len(tr.unSeen) || tr.unSeen[index] {
			tr.fail(fmt.Errorf("unordered %d/%d delivered twice or corrupt", stream, index))
			return
		}
		tr.unSeen[index] = true
		tr.unN++
	case Unguaranteed:
		if stream != 2000 || index >= len(tr.ugSeen) || tr.ugSeen[index] {
			tr.fail(fmt.Errorf("unguaranteed %d/%d duplicated or corrupt", stream, index))
			return
		}
		tr.ugSeen[index] = true
		tr.ugN++
	case Staggered:
		k := int(e.Key)
		if stream != 3000+k || index <= tr.stagLast[k] {
			tr.fail(fmt.Errorf("staggered key %d delivered action %d after %d (stream %d)", k, index, tr.stagLast[k], stream))
			return
		}
		tr.stagLast[k] = index
		tr.stagGot++
	}
}

func (tr *traffic) done() bool {
	for l := range tr.wantOrd {
		if tr.wantOrd[l] < tr.perLane {
			return false
		}
	}
	return tr.unN == tr.perUn
}

// TestPropertyNetsim is the property test over real notify and netsim:
// loss 0–50%, 10% reordering, 5% duplication, jitter, many seeds. Per seed,
// 10,000 guaranteed-ordered events per lane (8 lanes) all arrive exactly once
// and in order; unordered events exactly once; unguaranteed never duplicated;
// staggered updates newest-wins (a key's delivered actions strictly increase).
// Events are offered as fast as backpressure allows, so lanes hold thousands
// of events in flight, fragments (1.5–7.5 KB) are mixed in, and both sides
// carry traffic.
func TestPropertyNetsim(t *testing.T) {
	losses := []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5}
	for i, loss := range losses {
		t.Run(fmt.Sprintf("seed %d loss %.0f%%", i, 100*loss), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 0xe7e27))
			link := func() netsim.Config {
				c := netsim.DefaultConfig()
				c.Seed = rng.Uint64()
				c.Loss = loss
				c.Latency = time.Duration(20+rng.IntN(60)) * ms
				c.Jitter = time.Duration(2+rng.IntN(10)) * ms
				c.AllowJitterReorder = i%2 == 0
				c.Reorder = 0.10
				c.ReorderDelay = time.Duration(5+rng.IntN(20)) * ms
				c.Duplicate = 0.05
				return c
			}
			cfg := DefaultConfig()
			n := newSim(t, notify.DefaultConfig(), cfg, link(), link(), 10*ms, 1200)
			ab := newTraffic(t, rng, cfg.Lanes, 10_000, 2_000, 16)
			ba := newTraffic(t, rng, cfg.Lanes, 200, 100, 16)
			n.b.deliver = ab.deliver
			n.a.deliver = ba.deliver
			deadline := 3000 * time.Second
			calmed := false
			for !(ab.done() && ba.done()) {
				if n.now > deadline {
					t.Fatalf("not done at %v: lanes at %v of %d, unordered %d of %d", n.now, ab.wantOrd, ab.perLane, ab.unN, ab.perUn)
				}
				ab.offer(n.a.s, n.now, 64)
				ba.offer(n.b.s, n.now, 2)
				if err := n.step(n.now + n.maxStep); err != nil {
					t.Fatal(err)
				}
				if ab.err != nil || ba.err != nil {
					t.Fatalf("A→B: %v; B→A: %v", ab.err, ba.err)
				}
				if !calmed && allSent(ab) && allSent(ba) {
					// Everything is queued: keep the impairments for a while,
					// then let the connection drain on a clean link.
					deadline = n.now + 600*time.Second
					calmed = true
				}
			}
			// Drain the acknowledgements so that the senders free everything.
			n.calm(t)
			for end := n.now + 5*time.Second; n.now < end; {
				if err := n.step(end); err != nil {
					t.Fatal(err)
				}
			}
			for _, e := range []*endpoint{n.a, n.b} {
				for l := 0; l <= cfg.Lanes; l++ {
					if h := e.s.InFlight(l); h != 0 {
						t.Errorf("%s lane %d still holds %d events after the drain", e.name, l, h)
					}
				}
				if b := e.r.BufferedBytes(); b != 0 {
					t.Errorf("%s receiver still buffers %d bytes", e.name, b)
				}
			}
			sa, rb := n.a.s.Stats(), n.b.r.Stats()
			if loss > 0 && sa.Resent == 0 {
				t.Error("lossy link but nothing was resent: loss is not exercised")
			}
			if sa.Fragments == 0 || rb.Buffered == 0 || rb.Duplicates == 0 {
				t.Errorf("fragments %d, buffered %d, duplicates %d: some path was not exercised", sa.Fragments, rb.Buffered, rb.Duplicates)
			}
			if ab.ugN == 0 || ab.stagGot == 0 {
				t.Errorf("unguaranteed %d, staggered %d delivered: not exercised", ab.ugN, ab.stagGot)
			}
			t.Logf("%v virtual, A sent %d packets; A: %+v; B: %+v; unguaranteed %d/%d",
				n.now, n.sentA, sa, rb, ab.ugN, ab.ugSent)
		})
	}
}

func allSent(tr *traffic) bool {
	for l := range tr.nextOrd {
		if tr.nextOrd[l] < tr.perLane {
			return false
		}
	}
	return tr.nextUn >= tr.perUn
}

// TestHeavyLossRecovery: 95% loss both ways for 60 s of virtual time while
// events keep coming (backpressure holds the queues at their bounds), then the
// loss stops: neither side breaks, and every guaranteed event accepted by the
// sender arrives exactly once, in order, within 30 s.
func TestHeavyLossRecovery(t *testing.T) {
	link := func(seed uint64) netsim.Config {
		c := netsim.DefaultConfig()
		c.Loss, c.Latency, c.Jitter, c.Seed = 0.95, 50*ms, 5*ms, seed
		return c
	}
	cfg := DefaultConfig()
	cfg.MaxQueuedBytes = 64 << 10 // reach the byte bound during the outage
	n := newSim(t, notify.DefaultConfig(), cfg, link(5), link(6), 50*ms, 1200)
	rng := rand.New(rand.NewPCG(9, 95))
	ab := newTraffic(t, rng, cfg.Lanes, 1<<30, 1<<30, 16)
	n.b.deliver = ab.deliver
	n.a.deliver = func(Event) {}
	full := 0
	for n.now < 60*time.Second {
		before := ab.nextOrd[0] + ab.nextUn
		ab.offer(n.a.s, n.now, 4)
		if ab.nextOrd[0]+ab.nextUn == before {
			full++
		}
		if err := n.step(n.now + n.maxStep); err != nil {
			t.Fatal(err)
		}
		if ab.err != nil {
			t.Fatal(ab.err)
		}
		if q := n.a.s.QueuedBytes(); q > cfg.MaxQueuedBytes {
			t.Fatalf("sender holds %d bytes, bound %d", q, cfg.MaxQueuedBytes)
		}
	}
	if full == 0 {
		t.Fatal("the outage never hit backpressure")
	}
	n.calm(t)
	stop := n.now
	for !caughtUp(ab) {
		if n.now > stop+30*time.Second {
			t.Fatalf("not recovered 30 s after the loss stopped: lanes %v of %v, unordered %d of %d", ab.wantOrd, ab.nextOrd, ab.unN, ab.nextUn)
		}
		if err := n.step(n.now + n.maxStep); err != nil {
			t.Fatal(err)
		}
		if ab.err != nil {
			t.Fatal(ab.err)
		}
	}
	t.Logf("recovered %v after the loss stopped; A: %+v", n.now-stop, n.a.s.Stats())
}

// caughtUp reports whether everything sent so far was delivered.
func caughtUp(tr *traffic) bool {
	for l := range tr.wantOrd {
		if tr.wantOrd[l] < tr.nextOrd[l] {
			return false
		}
	}
	return tr.unN == tr.nextUn
}
