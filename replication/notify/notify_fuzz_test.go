package notify

import (
	"errors"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// fuzzConn builds a receiver in a state chosen by one byte: bits 0-1 pick the
// start sequence (0, or 3 below the 2^7, 2^16 or 2^32 wrap), bits 2-7 the
// number of packets exchanged first, every third A→B packet lost, so the state
// has holes, abandoned sequences, acks and confirmations.
func fuzzConn(t *testing.T, state uint8, cfg Config) (a, b *endpoint, now time.Duration) {
	start := []uint64{0, 1<<7 - 3, 1<<16 - 3, 1<<32 - 3}[state&3]
	a = newEndpoint(t, "A", cfg, start, start)
	b = newEndpoint(t, "B", cfg, start, start)
	for i := 0; i < int(state>>2); i++ {
		now += 20 * ms
		_, p := a.send(t, now, TypeData)
		if i%3 != 2 {
			if _, err := b.recv(t, now, p); err != nil {
				t.Fatal(err)
			}
		}
		_, p = b.send(t, now, TypeData)
		if _, err := a.recv(t, now, p); err != nil {
			t.Fatal(err)
		}
		b.c.Tick(now)
		a.pop(t)
		b.pop(t)
	}
	return a, b, now
}

// FuzzHeaderDecode feeds arbitrary bytes to ReadHeader (and Accept when it
// succeeds) of a Conn in some state: never a panic, a rejection leaves the
// protocol state untouched, and the invariants hold either way.
func FuzzHeaderDecode(f *testing.F) {
	f.Add([]byte{}, uint8(0))
	f.Add([]byte{0x60, 0x41, 0x0b}, uint8(0x40))
	f.Add([]byte{0x68, 0x69, 0xe8, 0x01}, uint8(0x41))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint8(0x22))
	f.Add([]byte{0x0c, 0x00, 0x00, 0x00, 0x00, 0x80, 0x00}, uint8(0x7f))
	f.Add([]byte{0x00, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x00}, uint8(0x83))
	f.Fuzz(func(t *testing.T, data []byte, state uint8) {
		for _, far := range []bool{false, true} {
			cfg := DefaultConfig()
			cfg.AcceptFar = far
			headerDecode(t, data, state, cfg)
		}
	})
}

// headerDecode is FuzzHeaderDecode's body for one Config (AcceptFar off,
// then on: a far sequence is then accepted, and the invariants still hold).
func headerDecode(t *testing.T, data []byte, state uint8, cfg Config) {
	a, b, now := fuzzConn(t, state, cfg)
	before := takeSnapshot(b.c)
	var r bitstream.Reader
	r.Reset(data)
	h, err := b.c.ReadHeader(&r)
	if !takeSnapshot(b.c).equal(before) {
		t.Fatal("ReadHeader changed protocol state")
	}
	if err == nil {
		if h.Type >= typeReserved {
			t.Fatalf("decoded reserved type %d", h.Type)
		}
		if err := b.c.Accept(h, now+ms); err != nil {
			t.Fatalf("Accept after a successful ReadHeader: %v", err)
		}
		if err := b.c.Accept(h, now+ms); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("second Accept: %v, want ErrDuplicate", err)
		}
	}
	b.c.Tick(now + time.Second)
	b.c.PopFates(nil)
	for _, c := range []*Conn{a.c, b.c} {
		if err := checkInvariants(c); err != nil {
			t.Fatal(err)
		}
	}
	// B can still talk: its next header decodes at A (forged acks may have
	// resolved B's packets arbitrarily, but never broken the encoding).
	w := bitstream.NewWriter(make([]byte, 512))
	if _, err := b.c.WriteHeader(w, TypeAck, now+2*ms); err != nil && !errors.Is(err, ErrFatesPending) {
		t.Fatalf("WriteHeader after fuzzed input: %v", err)
	}
}

// fuzzModel is the tiny reference model of FuzzNotifyOps: two endpoints, the
// packets in the network per direction, and a clock.
type fuzzModel struct {
	t      *testing.T
	e      [2]*endpoint
	net    [2][]fuzzPkt // net[d]: packets from e[d] to e[1-d]
	now    time.Duration
	tooFar bool // a legitimately too-far packet was seen: the direction is dead
}

type fuzzPkt struct {
	seq uint64
	p   []byte
}

// deliver hands packet i of direction d to the receiver and checks the
// outcome against the model's expectation.
func (m *fuzzModel) deliver(d, i int) {
	t := m.t
	pk := m.net[d][i]
	m.net[d] = append(m.net[d][:i], m.net[d][i+1:]...)
	rx := m.e[1-d]
	c := rx.c
	// Precondition of truncated sequence numbers (like TCP's maximum segment
	// lifetime): a packet written with width w must arrive before the receiver's
	// expected sequence passes it by 2^(w-1), or it reconstructs to the wrong
	// number. The AEAD layer (nonce = sequence) will reject such a packet; until
	// then the network model retires it instead of delivering it.
	if w := wireSeqWidth(t, pk.p); pk.seq+1<<(w-1) <= c.expected() {
		return
	}
	hadRx, oldL := c.hasRx(), c.rxL
	got, err := rx.recv(t, m.now, pk.p)
	if got != pk.seq && (err == nil || expectedRejection(err)) {
		t.Fatalf("seq %d decoded as %d (%v)", pk.seq, got, err)
	}
	k := uint64(c.cfg.ReorderThreshold)
	w := uint64(c.cfg.AckWindow)
	switch {
	case rx.accepted[pk.seq] && err != nil:
		// Past the window the receiver no longer remembers it: stale
		// (a copy delayed across a jump of AcceptFar).
		if !errors.Is(err, ErrDuplicate) && !(hadRx && pk.seq+w <= oldL && errors.Is(err, ErrStale)) {
			t.Fatalf("re-delivery of accepted %d: %v, want ErrDuplicate", pk.seq, err)
		}
	case !hadRx || pk.seq > oldL:
		if far := hadRx && pk.seq-oldL > w || !hadRx && pk.seq-c.cfg.peerStart >= w; far && c.cfg.AcceptFar {
			if err != nil {
				t.Fatalf("packet %d beyond the window of %d with AcceptFar: %v, want accepted", pk.seq, oldL, err)
			}
		} else if far {
			if !errors.Is(err, ErrTooFar) {
				t.Fatalf("packet %d beyond the window of %d: %v, want ErrTooFar", pk.seq, oldL, err)
			}
			m.tooFar = true
		} else if err != nil {
			t.Fatalf("new packet %d (newest %d): %v, want accepted", pk.seq, oldL, err)
		}
	case pk.seq+k <= oldL:
		if !errors.Is(err, ErrStale) {
			t.Fatalf("packet %d at least K below newest %d: %v, want ErrStale", pk.seq, oldL, err)
		}
	default: // within K-1 below the newest: accepted unless abandoned by time
		if err != nil && !errors.Is(err, ErrStale) {
			t.Fatalf("packet %d near newest %d: %v", pk.seq, oldL, err)
		}
	}
}

func (m *fuzzModel) step() {
	for _, e := range m.e {
		e.pop(m.t)
		if err := checkInvariants(e.c); err != nil {
			m.t.Fatalf("%s: %v", e.name, err)
		}
	}
}

// FuzzNotifyOps runs a random operation sequence — send, deliver, drop,
// reorder, duplicate, tick, blackout — between two Conns against the reference model:
// acceptance decisions match it, fates come in order exactly once and agree
// with what the peer accepted (no false delivered, no false dropped), the
// invariants hold after every operation, and after a clean drain every packet
// has its fate.
func FuzzNotifyOps(f *testing.F) {
	f.Add([]byte{0, 2, 0, 1, 3, 0, 7, 10})
	f.Add([]byte{0, 0, 0, 0, 2, 3, 2, 1, 2, 0, 7, 200, 1, 3, 0, 2, 0})
	f.Add([]byte{0, 0, 0, 4, 0, 5, 0, 2, 0, 2, 0, 2, 1, 1, 3, 1, 6, 0, 1, 7, 30})
	f.Add([]byte{8, 8, 8, 8, 8, 8, 10, 1, 10, 0, 14, 2, 15, 255, 9, 11, 0})
	// A blackout longer than the window, with and without AcceptFar: a
	// packet each way, then A sends 300 packets B never gets (0xc6), then
	// one B does, and B answers.
	f.Add([]byte{0, 2, 0, 1, 10, 0, 0xc6, 149, 0, 2, 0, 1, 10, 0, 6, 50})
	f.Add([]byte{0x80, 2, 0, 1, 10, 0, 0xc6, 149, 0, 2, 0, 1, 10, 0, 6, 50})
	f.Fuzz(notifyOps)
}

// notifyOps is FuzzNotifyOps's body.
func notifyOps(t *testing.T, ops []byte) {
	if len(ops) > 4096 {
		ops = ops[:4096]
	}
	m := &fuzzModel{t: t}
	// Bit 7 of the first byte (no operation reads it) turns AcceptFar
	// on at both ends: then no run of losses kills a direction.
	cfg := DefaultConfig()
	cfg.AcceptFar = len(ops) > 0 && ops[0]&0x80 != 0
	m.e[0] = newEndpoint(t, "A", cfg, 0, 0)
	m.e[1] = newEndpoint(t, "B", cfg, 0, 0)
	link(m.e[0], m.e[1])
	arg := func(i *int) int {
		if *i+1 < len(ops) {
			*i++
			return int(ops[*i])
		}
		return 0
	}
	for i := 0; i < len(ops); i++ {
		op := ops[i]
		d := int(op>>3) & 1
		switch op & 7 {
		case 0, 1: // send (type from bit 0 of the argument)
			d = int(op & 1)
			typ := TypeData
			if op>>4&1 == 1 {
				typ = TypeAck
			}
			seq, p := m.e[d].send(t, m.now, typ)
			m.net[d] = append(m.net[d], fuzzPkt{seq, p})
		case 2: // deliver
			if n := len(m.net[d]); n > 0 {
				m.deliver(d, arg(&i)%n)
			}
		case 3: // drop
			if n := len(m.net[d]); n > 0 {
				j := arg(&i) % n
				m.net[d] = append(m.net[d][:j], m.net[d][j+1:]...)
			}
		case 4: // duplicate
			if n := len(m.net[d]); n > 0 && n < 512 {
				m.net[d] = append(m.net[d], m.net[d][arg(&i)%n])
			}
		case 5: // reorder: move one packet to the front
			if n := len(m.net[d]); n > 1 {
				j := arg(&i) % n
				pk := m.net[d][j]
				copy(m.net[d][1:j+1], m.net[d][:j])
				m.net[d][0] = pk
			}
		case 6, 7:
			if op&0xc0 == 0xc0 { // blackout: d sends 2(arg+1) packets, all lost
				for n := 2 * (arg(&i) + 1); n > 0; n-- {
					m.e[d].send(t, m.now, TypeData)
					m.e[d].pop(t)
				}
				break
			}
			// tick
			m.now += time.Duration(arg(&i)) * ms
			m.e[0].c.Tick(m.now)
			m.e[1].c.Tick(m.now)
		}
		m.step()
	}
	// Drain: deliver what is left in order, then clean rounds until every
	// packet sent so far has its fate (unless a direction died, as
	// documented, from a run of AckWindow losses).
	for d := range m.net {
		for len(m.net[d]) > 0 {
			m.deliver(d, 0)
			m.step()
		}
	}
	sent := [2]uint64{m.e[0].c.NextSeq(), m.e[1].c.NextSeq()}
	for round := 0; round < 8 && !m.tooFar; round++ {
		m.now += 100 * ms
		for d := 0; d < 2; d++ {
			seq, p := m.e[d].send(t, m.now, TypeAck)
			m.net[d] = append(m.net[d], fuzzPkt{seq, p})
			m.deliver(d, 0)
			m.e[1-d].c.Tick(m.now)
			m.step()
		}
	}
	checkAgreement(t, m.e[0], m.e[1])
	checkAgreement(t, m.e[1], m.e[0])
	if m.tooFar {
		return
	}
	for d, e := range m.e {
		if e.nextFate < sent[d] {
			t.Fatalf("%s: after the drain fates reach %d of %d", e.name, e.nextFate, sent[d])
		}
	}
}

// FuzzShortHeader: ReadHeaderInto's one-window path (parseShort) decodes
// exactly what the field-by-field path (readHeaderFields) decodes — the
// same header, error and counters, the reader at the same bit — for
// arbitrary bytes at any start bit, against a Conn in some state, and takes
// it for every header WriteHeader makes with acks all accepted.
func FuzzShortHeader(f *testing.F) {
	f.Add([]byte{}, uint8(0), uint8(0))
	f.Add([]byte{0x60, 0x41, 0x0b, 0, 0, 0, 0, 0, 0, 0}, uint8(0x40), uint8(0))
	f.Add([]byte{0x68, 0x69, 0xe8, 0x01, 0, 0, 0, 0, 0, 0}, uint8(0x41), uint8(3))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint8(0x22), uint8(1))
	f.Add([]byte{0x0c, 0x00, 0x00, 0x00, 0x00, 0x80, 0x00, 0, 0, 0}, uint8(0x7f), uint8(0))
	f.Add([]byte{0x00, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x00, 0, 0, 0}, uint8(0x83), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, state, skip uint8) {
		_, a, _ := fuzzConn(t, state, DefaultConfig())
		_, b, _ := fuzzConn(t, state, DefaultConfig())
		at := min(int(skip&15), 8*len(data))
		var ra, rb bitstream.Reader
		ra.Reset(data)
		rb.Reset(data)
		if at > 0 {
			ra.ReadBits(uint(at), "skip")
			rb.ReadBits(uint(at), "skip")
		}
		var ha, hb Header
		ea := a.c.ReadHeaderInto(&ra, &ha)
		eb := b.c.readHeaderFields(&rb, &hb)
		if (ea == nil) != (eb == nil) || ea != nil && ea.Error() != eb.Error() {
			t.Fatalf("ReadHeaderInto: %v; field by field: %v", ea, eb)
		}
		if ea == nil && (ha != hb || ra.Pos() != rb.Pos()) {
			t.Fatalf("ReadHeaderInto read %+v to bit %d; field by field %+v to bit %d", ha, ra.Pos(), hb, rb.Pos())
		}
		if sa, sb := a.c.Stats(), b.c.Stats(); sa != sb {
			t.Fatalf("counters differ: %+v; field by field %+v", sa, sb)
		}
	})
}

// TestShortHeaderTakesWrittenHeaders: every header a loss-free exchange
// writes (ack-only and data, every sequence width the wrap points give) is
// read by parseShort, and the same as field by field.
func TestShortHeaderTakesWrittenHeaders(t *testing.T) {
	for st := uint8(0); st < 4; st++ {
		start := []uint64{0, 1<<7 - 3, 1<<16 - 3, 1<<32 - 3}[st]
		a := newEndpoint(t, "A", DefaultConfig(), start, start)
		b := newEndpoint(t, "B", DefaultConfig(), start, start)
		now := time.Duration(0)
		for i := 0; i < 300; i++ {
			now += 20 * ms
			_, p := a.send(t, now, TypeData) // the header, then 64 bits of payload
			v, k, ok := bitstream.NewReader(p).PeekWindow()
			if !ok {
				t.Fatal("no window")
			}
			if !parseShort(v, uint(k), new(shortHeader)) {
				t.Fatalf("start %d, packet %d: header %x not read in one window", start, i, p)
			}
			if _, err := b.recv(t, now, p); err != nil {
				t.Fatal(err)
			}
			_, q := b.send(t, now, TypeAck)
			if _, err := a.recv(t, now, q); err != nil {
				t.Fatal(err)
			}
			a.pop(t)
			b.pop(t)
		}
	}
}
