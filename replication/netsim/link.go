package netsim

import (
	"math/bits"
	"math/rand/v2"
	"time"
)

// Link is one direction of a simulated network path. Packets go in with Send and come out,
// impaired, with Deliver once the virtual clock reaches their delivery time.
//
// Pending packets sit in a min-heap ordered by (delivery time, insertion order) over a slice;
// payloads are copied into pooled buffers that Deliver recycles, so a Link in steady state does
// not allocate. The seed keeps a sorted list instead (Listing 7.14), which costs O(n) per insert.
//
// Use NewLink; the zero Link is not usable. Not safe for concurrent use: one goroutine (the test,
// or the socket wrapper's owner) drives it.
type Link struct {
	cfg Config // validated, defaults applied
	rng *rand.Rand

	bad       bool          // Gilbert–Elliott state
	busyUntil time.Duration // bottleneck: when the last accepted packet finishes serializing
	txCarry   uint64        // bottleneck: sub-nanosecond remainder (bit·ns) so the rate is exact
	lastFIFO  time.Duration // latest delivery time of a packet that was not held back

	order        uint64 // insertion counter: tie-break for equal delivery times
	seq          uint64 // send counter, 1-based
	maxDelivered uint64 // highest send counter delivered so far (for Stats.Reordered)

	heap []item
	slab [][]byte // payload buffers, indexed by item.buf
	free []int32  // indices into slab that hold no pending packet (LIFO: reuse the warm one)

	stats Stats
}

type item struct {
	at    time.Duration
	order uint64
	seq   uint64
	buf   int32
	n     int32
}

// Stream tags keep the two directions of a Pipe on independent random streams even when both
// configs carry the same Seed.
const (
	streamAtoB uint64 = 0x6e65_7473_696d_4142 // "netsimAB"
	streamBtoA uint64 = 0x6e65_7473_696d_4241 // "netsimBA"
)

// NewLink returns a link with the given impairment, seeded from cfg.Seed. A Link made by NewLink
// behaves exactly like the AtoB direction of NewPipe(cfg, …).
func NewLink(cfg Config) (*Link, error) {
	return newLink(cfg, streamAtoB)
}

func newLink(cfg Config, stream uint64) (*Link, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Hash seed and stream into both PCG words: nearby seeds and the two pipe directions must
	// not start on correlated states.
	s1 := splitmix64(cfg.Seed ^ stream)
	s2 := splitmix64(s1 ^ stream)
	return &Link{
		cfg: cfg.withDefaults(),
		rng: rand.New(rand.NewPCG(s1, s2)),
	}, nil
}

// SetConfig changes the impairment from the next Send on, e.g. to take loss from 95% to 0%
// mid-test. The random stream, Gilbert–Elliott state, bottleneck backlog and pending packets
// are kept (pending packets keep their delivery times); cfg.Seed is ignored. Lowering
// MaxInFlight below Pending drops new packets until the link drains.
func (l *Link) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	d := cfg.withDefaults()
	if d.Burst == nil {
		l.bad = false
	}
	if d.BandwidthBps != l.cfg.BandwidthBps {
		l.txCarry = 0
	}
	d.Seed = l.cfg.Seed
	l.cfg = d
	return nil
}

// Config returns the link's configuration with defaults applied.
func (l *Link) Config() Config {
	return l.cfg.withDefaults() // copies Burst so the caller cannot mutate the running link
}

// Send offers packet p to the link at virtual time now. p is copied; the caller may reuse it at
// once. The packet is dropped (and counted) or scheduled for delivery, possibly twice.
// now should not decrease between calls; if it does, nothing breaks, the packet is simply
// scheduled relative to the time given.
func (l *Link) Send(now time.Duration, p []byte) {
	c := &l.cfg
	l.seq++
	l.stats.Sent++
	l.stats.SentBytes += uint64(len(p))
	if len(p) > c.MaxPacket {
		l.stats.Dropped.TooBig++
		return
	}
	// Bound memory before anything else: a sender that outruns Deliver must not grow the heap.
	if len(l.heap) >= c.MaxInFlight {
		l.stats.Dropped.InFlight++
		return
	}
	depart := now
	if c.BandwidthBps > 0 {
		var ok bool
		if depart, ok = l.enqueue(now, len(p)); !ok {
			l.stats.Dropped.Queue++
			return
		}
	}
	if l.lost() {
		l.stats.Dropped.Loss++
		return
	}
	l.push(l.schedule(depart), p)
	if c.Duplicate > 0 && l.rng.Float64() < c.Duplicate && len(l.heap) < c.MaxInFlight {
		l.stats.Duplicated++
		l.push(l.schedule(depart), p)
	}
}

// Deliver calls fn, in delivery order (ties in send order), for every packet due at or before
// now and returns how many it delivered. p is valid only during fn: its buffer is reused
// afterwards. fn may call Send, on this link or another; a packet it sends that is due at or
// before now is delivered in the same call (so an fn that echoes every packet back into this
// same zero-delay link never returns). A nil fn discards the packets.
func (l *Link) Deliver(now time.Duration, fn func(p []byte)) int {
	n := 0
	for len(l.heap) > 0 && l.heap[0].at <= now {
		it := l.pop()
		l.stats.Delivered++
		l.stats.DeliveredBytes += uint64(it.n)
		if it.seq < l.maxDelivered {
			l.stats.Reordered++
		} else {
			l.maxDelivered = it.seq
		}
		if fn != nil {
			fn(l.slab[it.buf][:it.n:it.n])
		}
		l.free = append(l.free, it.buf)
		n++
	}
	return n
}

// NextDelivery returns the earliest pending delivery time; false when nothing is pending.
// A driver can jump its virtual clock straight there.
func (l *Link) NextDelivery() (time.Duration, bool) {
	if len(l.heap) == 0 {
		return 0, false
	}
	return l.heap[0].at, true
}

// Pending returns how many packets (copies) the link holds.
func (l *Link) Pending() int { return len(l.heap) }

// Stats returns the counters so far.
func (l *Link) Stats() Stats { return l.stats }

// lost draws the loss decision for one packet.
func (l *Link) lost() bool {
	c := &l.cfg
	if g := c.Burst; g != nil {
		p := g.LossGood
		if l.bad {
			p = g.LossBad
		}
		drop := p > 0 && l.rng.Float64() < p
		// Move the chain after the decision: the state a packet sees lasts a geometric number
		// of packets with mean 1/PBadToGood (bad) or 1/PGoodToBad (good).
		if l.bad {
			l.bad = !(g.PBadToGood > 0 && l.rng.Float64() < g.PBadToGood)
		} else {
			l.bad = g.PGoodToBad > 0 && l.rng.Float64() < g.PGoodToBad
		}
		return drop
	}
	return c.Loss > 0 && l.rng.Float64() < c.Loss
}

// enqueue puts a packet of n bytes into the bottleneck queue at time now and returns when its
// last bit leaves the bottleneck; false if the queue has no room (tail drop).
func (l *Link) enqueue(now time.Duration, n int) (time.Duration, bool) {
	c := &l.cfg
	bps := uint64(c.BandwidthBps)
	start := now
	if l.busyUntil > now {
		// Bits still waiting (or being serialized) = remaining busy time × rate, rounded up.
		wait := uint64(l.busyUntil) - uint64(now) // exact even if the int64 difference overflows
		hi, lo := bits.Mul64(wait, bps)
		if hi >= 1e9 {
			return 0, false // backlog beyond 2^64 bits: certainly full
		}
		q, r := bits.Div64(hi, lo, 1e9)
		if r != 0 {
			q++
		}
		if q+uint64(n)*8 > uint64(c.QueueBytes)*8 {
			return 0, false
		}
		start = l.busyUntil
	} else {
		l.txCarry = 0 // the link went idle: the fractional nanosecond is gone with it
	}
	// Serialization time = n×8/rate seconds. Carry the remainder so that a stream of packets
	// runs at exactly BandwidthBps however the division rounds. n×8e9 < 2^50, carry < 2^40.
	num := uint64(n)*8*uint64(time.Second) + l.txCarry
	tx := num / bps
	l.txCarry = num % bps
	l.busyUntil = start + time.Duration(tx)
	return l.busyUntil, true
}

// schedule draws the delivery time of one copy that leaves the bottleneck at depart.
func (l *Link) schedule(depart time.Duration) time.Duration {
	c := &l.cfg
	d := c.Latency
	if c.Jitter > 0 {
		// Uniform over [Latency−Jitter, Latency+Jitter] in whole nanoseconds, so the mean is
		// exactly Latency before clamping.
		d += time.Duration(l.rng.Int64N(2*int64(c.Jitter)+1)) - c.Jitter
		d = max(d, 0)
	}
	at := depart + d
	if !c.AllowJitterReorder {
		// Keep FIFO: never before a packet handed in earlier.
		at = max(at, l.lastFIFO)
	}
	if c.Reorder > 0 && l.rng.Float64() < c.Reorder {
		// Held back: later packets overtake it. It does not push lastFIFO, or every packet
		// behind it would be held back too and nothing would be reordered.
		return at + c.ReorderDelay
	}
	l.lastFIFO = max(l.lastFIFO, at)
	return at
}

// push copies p into a pooled buffer and inserts it into the heap.
func (l *Link) push(at time.Duration, p []byte) {
	var b int32
	if k := len(l.free); k > 0 {
		b = l.free[k-1]
		l.free = l.free[:k-1]
		if cap(l.slab[b]) < len(p) {
			l.slab[b] = make([]byte, len(p))
		}
	} else {
		b = int32(len(l.slab))
		l.slab = append(l.slab, make([]byte, max(len(p), DefaultMaxPacket)))
	}
	copy(l.slab[b][:len(p)], p)
	l.order++
	l.heap = append(l.heap, item{at: at, order: l.order, seq: l.seq, buf: b, n: int32(len(p))})
	l.up(len(l.heap) - 1)
}

func (l *Link) pop() item {
	h := l.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	l.heap = h[:last]
	if last > 0 {
		l.down(0)
	}
	return top
}

func (l *Link) less(i, j int) bool {
	a, b := &l.heap[i], &l.heap[j]
	return a.at < b.at || (a.at == b.at && a.order < b.order)
}

func (l *Link) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !l.less(i, p) {
			return
		}
		l.heap[i], l.heap[p] = l.heap[p], l.heap[i]
		i = p
	}
}

func (l *Link) down(i int) {
	n := len(l.heap)
	for {
		m := i
		if c := 2*i + 1; c < n && l.less(c, m) {
			m = c
		}
		if c := 2*i + 2; c < n && l.less(c, m) {
			m = c
		}
		if m == i {
			return
		}
		l.heap[i], l.heap[m] = l.heap[m], l.heap[i]
		i = m
	}
}

// splitmix64 is the SplitMix64 finalizer: a cheap bijective hash that spreads a small seed over
// all 64 bits.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
