package event

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// fuzzConfig is DefaultConfig, or with small=true a Config whose bounds a
// short input can reach (4 KiB of buffers, 2 partial events, 16 keys).
func fuzzConfig(small bool) Config {
	c := DefaultConfig()
	if small {
		c.MaxFragment = 64
		c.MinFragment = 8
		c.MaxEventSize = 4096
		c.MaxQueuedBytes = 4096
		c.MaxPartial = 2
		c.StaggerKeys = 16
		c.MaxUnguaranteed = 8
	}
	return c
}

// FuzzEventSection feeds garbage to Receiver.Read: several sections cut from
// the input (a length byte, then that many bytes). Every call returns an error
// or events, never panics, and the receiver's memory stays within its bounds.
func FuzzEventSection(f *testing.F) {
	cfg := DefaultConfig()
	valid := func(build func(s *sec)) []byte {
		s := newSec(f, cfg)
		build(s)
		b := s.end()
		return append([]byte{byte(len(b))}, b...)
	}
	f.Add(valid(func(s *sec) { s.ordered(0, 0, []byte("hi")).unordered(3, []byte("u")) }), false)
	f.Add(valid(func(s *sec) { s.ordered(0, 5, []byte("ahead")).orderedFrag(1, 0, 0, 9, []byte("abc")) }), false)
	f.Add(valid(func(s *sec) { s.unorderedFrag(1, 1, 6, 3, []byte("def")).staggered(9, 4, []byte("st")) }), false)
	f.Add(valid(func(s *sec) { s.unguaranteed(nil).staggered(255, 65535, nil) }), true)
	f.Add(bytes.Repeat([]byte{0xff}, 64), false)
	f.Add(bytes.Repeat([]byte{0x55}, 300), true)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, data []byte, small bool) {
		c := fuzzConfig(small)
		r, err := NewReceiver(c)
		if err != nil {
			t.Fatal(err)
		}
		deliver := func(e Event) {
			if e.Class > Staggered || len(e.Payload) > c.MaxEventSize || e.Lane < 0 || e.Lane >= c.Lanes || int(e.Key) >= c.StaggerKeys {
				t.Fatalf("impossible event %v lane %d key %d, %d bytes", e.Class, e.Lane, e.Key, len(e.Payload))
			}
		}
		var rd bitstream.Reader
		for len(data) > 0 {
			n := min(int(data[0]), len(data)-1)
			section := data[1 : 1+n]
			data = data[1+n:]
			rd.Reset(section)
			before := rd.Pos()
			err := r.Read(&rd, deliver)
			var re *bitstream.ReadError
			switch {
			case err == nil:
			case errors.As(err, &re), errors.Is(err, ErrMalformed), errors.Is(err, ErrReceiverFull):
				if errors.As(err, &re) && rd.Pos() != before {
					t.Fatalf("rejected section moved the reader from %d to %d", before, rd.Pos())
				}
			default:
				t.Fatalf("unexpected error type: %v", err)
			}
			if r.BufferedBytes() < 0 || r.BufferedBytes() > c.MaxQueuedBytes {
				t.Fatalf("buffered %d bytes, bound %d", r.BufferedBytes(), c.MaxQueuedBytes)
			}
			for i, ref := range r.lanes {
				if ln := ref.ln; ln != nil && len(ln.slots) > c.MaxInFlightPerLane {
					t.Fatalf("lane %d holds %d slots", i, len(ln.slots))
				}
			}
		}
	})
}

// FuzzEventRoundTrip drives a Sender and a Receiver through a lossy,
// reordering link decided by the input: a sequence of operations (send on any
// class and size, write a packet of any size, lose or delay it, deliver its
// fate). Then the link turns clean and drains. Every section reads back to
// exactly the bits that were written, ordered lanes arrive exactly once and
// in order, unordered events exactly once, unguaranteed at most once,
// staggered versions only move forward, and every guaranteed event arrives.
func FuzzEventRoundTrip(f *testing.F) {
	f.Add([]byte{0, 1, 20, 4, 200, 0, 5, 1, 2, 30, 4, 50, 1, 4, 255, 0, 3, 2, 9, 4, 10, 0}, false)
	f.Add([]byte{0, 0, 255, 0, 0, 255, 1, 255, 4, 100, 2, 4, 100, 3, 4, 20, 1, 4, 20, 0, 4, 200, 0}, true)
	f.Add(bytes.Repeat([]byte{0, 3, 40, 4, 60, 1}, 20), true)
	f.Add(bytes.Repeat([]byte{3, 1, 9, 4, 30, 2, 2, 5, 4, 90, 0}, 12), false)
	f.Fuzz(func(t *testing.T, ops []byte, small bool) {
		c := fuzzConfig(small)
		m := newRoundTrip(t, c)
		for len(ops) > 0 {
			op := ops[0]
			arg := func(i int) int {
				if i < len(ops) {
					return int(ops[i])
				}
				return 0
			}
			switch op % 5 {
			case 0: // ordered: lane, size
				m.sendOrdered(arg(1)%c.Lanes, arg(2)*arg(2)/4)
				ops = ops[min(3, len(ops)):]
			case 1: // unordered: size
				m.sendUnordered(arg(1) * arg(1) / 4)
				ops = ops[min(2, len(ops)):]
			case 2: // unguaranteed: size
				m.sendUnguaranteed(arg(1) % (c.MaxFragment + 1))
				ops = ops[min(2, len(ops)):]
			case 3: // staggered: key
				m.sendStaggered(uint16(arg(1) % c.StaggerKeys))
				ops = ops[min(2, len(ops)):]
			case 4: // packet: size, fate pattern
				m.packet(16+arg(1)*5, arg(2))
				ops = ops[min(3, len(ops)):]
			}
		}
		m.drain()
	})
}

// roundTrip is FuzzEventRoundTrip's model.
type roundTrip struct {
	t        *testing.T
	c        Config
	s        *Sender
	r        *Receiver
	now      time.Duration
	seq      uint64
	flight   []rtPacket // send order
	ordSent  [][]string
	ordGot   [][]string
	unSent   map[string]int
	unGot    map[string]int
	ugGot    map[string]bool
	stagN    []int
	stagLast []int
	n        int
}

type rtPacket struct {
	seq     uint64
	data    []byte
	bits    int
	lost    bool
	delay   int // packets later it arrives
	arrived bool
}

func newRoundTrip(t *testing.T, c Config) *roundTrip {
	s, err := NewSender(c)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReceiver(c)
	if err != nil {
		t.Fatal(err)
	}
	m := &roundTrip{t: t, c: c, s: s, r: r, ordSent: make([][]string, c.Lanes), ordGot: make([][]string, c.Lanes),
		unSent: map[string]int{}, unGot: map[string]int{}, ugGot: map[string]bool{},
		stagN: make([]int, c.StaggerKeys), stagLast: make([]int, c.StaggerKeys)}
	for k := range m.stagLast {
		m.stagLast[k] = -1
	}
	return m
}

// body makes a unique payload of size bytes (at least 4).
func (m *roundTrip) body(size int) []byte {
	m.n++
	b := payload(m.n, m.n, max(size, 8))
	return b
}

func (m *roundTrip) sendOrdered(lane, size int) {
	b := m.body(min(size, m.c.MaxEventSize))
	if err := m.s.SendOrdered(lane, b); err == nil {
		m.ordSent[lane] = append(m.ordSent[lane], string(b))
	} else if !errors.Is(err, ErrQueueFull) && !errors.Is(err, ErrLaneFull) {
		m.t.Fatal(err)
	}
}

func (m *roundTrip) sendUnordered(size int) {
	b := m.body(min(size, m.c.MaxEventSize))
	if err := m.s.SendUnordered(b); err == nil {
		m.unSent[string(b)]++
	} else if !errors.Is(err, ErrQueueFull) && !errors.Is(err, ErrLaneFull) {
		m.t.Fatal(err)
	}
}

func (m *roundTrip) sendUnguaranteed(size int) {
	b := m.body(min(size, m.c.MaxFragment))
	if err := m.s.SendUnguaranteed(b); err != nil && !errors.Is(err, ErrQueueFull) {
		m.t.Fatal(err)
	}
}

func (m *roundTrip) sendStaggered(key uint16) {
	b := payload(int(key), m.stagN[key]+1, 8)
	if err := m.s.SendStaggered(key, b, m.now); err == nil {
		m.stagN[key]++
	} else if !errors.Is(err, ErrQueueFull) {
		m.t.Fatal(err)
	}
}

// packet writes a packet of size bytes; pattern decides its fate (bit 0-1:
// lost 1 in 4) and delay (bits 2-3), and resolves the packets whose time came.
func (m *roundTrip) packet(size, pattern int) {
	m.now += 10 * time.Millisecond
	m.seq++
	buf := make([]byte, size)
	var w bitstream.Writer
	w.Reset(buf)
	if _, err := m.s.Write(&w, m.seq, m.now); err != nil {
		m.t.Fatal(err)
	}
	m.flight = append(m.flight, rtPacket{seq: m.seq, data: w.Bytes(), bits: w.BitLen(), lost: pattern&3 == 3, delay: pattern >> 2 & 3})
	m.settle()
	m.checkOutstanding()
}

// checkOutstanding: Outstanding is whether some lane holds an event
// (InFlight, lane Lanes the unordered stream).
func (m *roundTrip) checkOutstanding() {
	any := false
	for l := 0; l <= m.c.Lanes; l++ {
		any = any || m.s.InFlight(l) > 0
	}
	if got := m.s.Outstanding(); got != any {
		m.t.Fatalf("Outstanding() = %v, a lane holding events %v", got, any)
	}
}

// settle delivers packets whose delay passed (newest first within a batch, to
// reorder) and reports fates in send order for packets that arrived or are
// lost and old enough.
func (m *roundTrip) settle() {
	for i := len(m.flight) - 1; i >= 0; i-- {
		p := &m.flight[i]
		if !p.lost && !p.arrived && p.delay <= len(m.flight)-1-i {
			p.arrived = true
			m.read(p)
		}
	}
	for len(m.flight) > 0 {
		p := m.flight[0]
		if !p.arrived && !(p.lost && len(m.flight) > 4) {
			return
		}
		m.s.OnFate(fate(p.seq, p.arrived))
		m.flight = m.flight[1:]
	}
}

func (m *roundTrip) read(p *rtPacket) {
	var rd bitstream.Reader
	rd.Reset(p.data)
	if err := m.r.Read(&rd, m.deliver); err != nil {
		m.t.Fatalf("packet %d: %v", p.seq, err)
	}
	if rd.Pos() != p.bits {
		m.t.Fatalf("packet %d: read %d bits, wrote %d", p.seq, rd.Pos(), p.bits)
	}
}

func (m *roundTrip) deliver(e Event) {
	s := string(e.Payload)
	switch e.Class {
	case Ordered:
		m.ordGot[e.Lane] = append(m.ordGot[e.Lane], s)
		if k := len(m.ordGot[e.Lane]); k > len(m.ordSent[e.Lane]) || m.ordSent[e.Lane][k-1] != s {
			m.t.Fatalf("lane %d: event %d differs from what was sent", e.Lane, k-1)
		}
	case Unordered:
		m.unGot[s]++
		if m.unGot[s] > m.unSent[s] {
			m.t.Fatalf("unordered event delivered %d times, sent %d", m.unGot[s], m.unSent[s])
		}
	case Unguaranteed:
		if m.ugGot[s] {
			m.t.Fatal("unguaranteed event duplicated")
		}
		m.ugGot[s] = true
	case Staggered:
		k, v, ok := parsePayload(e.Payload)
		if !ok || k != int(e.Key) || v <= m.stagLast[k] {
			m.t.Fatalf("staggered key %d: version %d after %d", e.Key, v, m.stagLast[e.Key])
		}
		m.stagLast[k] = v
	}
}

// drain runs clean 1200-byte packets until every guaranteed event arrived.
func (m *roundTrip) drain() {
	for i := range m.flight {
		m.flight[i].lost = false // late, but not lost: a clean link from here
	}
	for i := 0; ; i++ {
		done := len(m.unGot) == len(m.unSent)
		for l := range m.ordSent {
			done = done && len(m.ordGot[l]) == len(m.ordSent[l])
		}
		if done && len(m.flight) == 0 {
			break
		}
		if i > 5000 {
			m.t.Fatalf("not drained after %d clean packets: in flight %d", i, len(m.flight))
		}
		m.packet(1200, 0)
	}
	for l := range m.ordSent {
		if !slices.Equal(m.ordGot[l], m.ordSent[l]) {
			m.t.Fatalf("lane %d differs", l)
		}
	}
	for l := 0; l <= m.c.Lanes; l++ {
		if h := m.s.InFlight(l); h != 0 {
			m.t.Fatalf("lane %d holds %d events after the drain", l, h)
		}
	}
	if m.r.BufferedBytes() != 0 {
		m.t.Fatalf("receiver buffers %d bytes after the drain", m.r.BufferedBytes())
	}
}
