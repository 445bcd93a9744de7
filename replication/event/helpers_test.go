package event

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/notify"
)

const ms = time.Millisecond

// got is a delivered event with its payload copied.
type got struct {
	Class   Class
	Lane    int
	Key     uint16
	Payload string
}

func (g got) String() string {
	return fmt.Sprintf("%v/%d/%d:%q", g.Class, g.Lane, g.Key, g.Payload)
}

// pair is a Sender and a Receiver joined by a hand-driven link: tests write
// packets, decide which arrive (in any order, any number of times), and feed
// fates themselves. It stands in for notify where a test needs exact control.
type pair struct {
	t    *testing.T
	s    *Sender
	r    *Receiver
	seq  uint64
	got  []got
	pkts map[uint64][]byte
}

func newPair(t *testing.T, cfg Config) *pair {
	t.Helper()
	s, err := NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReceiver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &pair{t: t, s: s, r: r, seq: 100, pkts: map[uint64][]byte{}}
}

// write builds the next packet of size bytes at now and returns its seq.
func (p *pair) write(now time.Duration, size int) uint64 {
	p.t.Helper()
	p.seq++
	buf := make([]byte, size)
	var w bitstream.Writer
	w.Reset(buf)
	if _, err := p.s.Write(&w, p.seq, now); err != nil {
		p.t.Fatalf("Write seq %d: %v", p.seq, err)
	}
	if err := checkWork(p.s); err != nil {
		p.t.Fatalf("after Write seq %d: %v", p.seq, err)
	}
	p.pkts[p.seq] = append([]byte(nil), w.Bytes()...)
	return p.seq
}

// deliver hands packet seq to the receiver.
func (p *pair) deliver(seq uint64) {
	p.t.Helper()
	var rd bitstream.Reader
	rd.Reset(p.pkts[seq])
	if err := p.r.Read(&rd, p.collect); err != nil {
		p.t.Fatalf("Read seq %d: %v", seq, err)
	}
}

func (p *pair) collect(e Event) {
	p.got = append(p.got, got{e.Class, e.Lane, e.Key, string(e.Payload)})
}

func (p *pair) fate(seq uint64, delivered bool) {
	p.s.OnFate(notify.Fate{Seq: seq, Delivered: delivered})
	if err := checkWork(p.s); err != nil {
		p.t.Fatalf("after the fate of seq %d: %v", seq, err)
	}
}

// through writes a packet, delivers it and reports it delivered.
func (p *pair) through(now time.Duration, size int) uint64 {
	seq := p.write(now, size)
	p.deliver(seq)
	p.fate(seq, true)
	return seq
}

// take returns and clears what was delivered.
func (p *pair) take() []got {
	g := p.got
	p.got = nil
	return g
}

// payload makes a recognisable payload: stream, index, then filler to size.
func payload(stream, index, size int) []byte {
	b := make([]byte, max(size, 8))
	binary.LittleEndian.PutUint32(b, uint32(stream))
	binary.LittleEndian.PutUint32(b[4:], uint32(index))
	for i := 8; i < len(b); i++ {
		b[i] = byte(index*31 + i)
	}
	return b
}

func parsePayload(b []byte) (stream, index int, ok bool) {
	if len(b) < 8 {
		return 0, 0, false
	}
	s, i := int(binary.LittleEndian.Uint32(b)), int(binary.LittleEndian.Uint32(b[4:]))
	want := payload(s, i, len(b))
	return s, i, string(want) == string(b)
}

// endpoint is one side of a real connection: notify + event sender/receiver.
type endpoint struct {
	name    string
	conn    *notify.Conn
	s       *Sender
	r       *Receiver
	w       bitstream.Writer
	rd      bitstream.Reader
	buf     []byte
	fates   []notify.Fate
	deliver func(Event)
	readErr error
	// delivered is notify's early delivery report (Sender.AckDelivered).
	delivered func(seq uint64) bool
	// onSend and onRecv, when set, see every data packet's seq as it is
	// sent and as it is read (the oracle of orderedFloor).
	onSend, onRecv func(seq uint64, now time.Duration)
}

func newEndpoint(t testing.TB, name string, ncfg notify.Config, cfg Config, mtu int) *endpoint {
	t.Helper()
	c, err := notify.New(ncfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReceiver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &endpoint{name: name, conn: c, s: s, r: r, buf: make([]byte, mtu), fates: make([]notify.Fate, 0, 64)}
	e.delivered = func(seq uint64) bool {
		_, ok := c.Delivered(seq)
		return ok
	}
	return e
}

// send builds one data packet and offers it to l.
func (e *endpoint) send(now time.Duration, l *netsim.Link) error {
	e.w.Reset(e.buf)
	seq, err := e.conn.WriteHeader(&e.w, notify.TypeData, now)
	if err != nil {
		return fmt.Errorf("%s WriteHeader: %w", e.name, err)
	}
	if _, err := e.s.Write(&e.w, seq, now); err != nil {
		return fmt.Errorf("%s Write: %w", e.name, err)
	}
	if err := checkWork(e.s); err != nil {
		return fmt.Errorf("%s after Write seq %d: %w", e.name, seq, err)
	}
	if e.onSend != nil {
		e.onSend(seq, now)
	}
	l.Send(now, e.w.Bytes())
	return nil
}

// recv processes one datagram: notify first, then the event section.
func (e *endpoint) recv(now time.Duration, p []byte) {
	e.rd.Reset(p)
	h, err := e.conn.ReadHeader(&e.rd)
	if err != nil {
		if !errors.Is(err, notify.ErrDuplicate) && !errors.Is(err, notify.ErrStale) && e.readErr == nil {
			e.readErr = fmt.Errorf("%s ReadHeader: %w", e.name, err)
		}
		return
	}
	if err := e.conn.Accept(h, now); err != nil {
		if e.readErr == nil {
			e.readErr = fmt.Errorf("%s Accept: %w", e.name, err)
		}
		return
	}
	if h.Type != notify.TypeData {
		return
	}
	if e.onRecv != nil {
		e.onRecv(h.Seq, now)
	}
	if err := e.r.Read(&e.rd, e.deliver); err != nil && e.readErr == nil {
		e.readErr = fmt.Errorf("%s Read seq %d: %w", e.name, h.Seq, err)
	}
}

func (e *endpoint) tick(now time.Duration) {
	e.conn.Tick(now)
	e.fates = e.conn.PopFates(e.fates[:0])
	for _, f := range e.fates {
		e.s.OnFate(f)
	}
	e.s.AckDelivered(e.delivered) // as session's endpoints do
}

// sim drives two endpoints over a netsim.Pipe in virtual time. Each side sends
// one packet every interval (B offset by a third of it). step jumps to the
// next interesting instant (a send, a delivery, or the caller's wake time),
// but never more than maxStep, so notify's time threshold runs often enough.
type sim struct {
	a, b         *endpoint
	pipe         *netsim.Pipe
	now          time.Duration
	interval     time.Duration
	nextA, nextB time.Duration
	maxStep      time.Duration
	sentA        int
}

func newSim(t testing.TB, ncfg notify.Config, cfg Config, ab, ba netsim.Config, interval time.Duration, mtu int) *sim {
	t.Helper()
	pipe, err := netsim.NewPipe(ab, ba)
	if err != nil {
		t.Fatal(err)
	}
	return &sim{
		a:        newEndpoint(t, "A", ncfg, cfg, mtu),
		b:        newEndpoint(t, "B", ncfg, cfg, mtu),
		pipe:     pipe,
		interval: interval,
		nextB:    interval / 3,
		maxStep:  5 * ms,
	}
}

// step advances to min(wake, next send, next delivery, now+maxStep) and runs
// everything due then; a wake time not after now is ignored.
func (n *sim) step(wake time.Duration) error {
	next := min(n.nextA, n.nextB, n.now+n.maxStep)
	if wake > n.now {
		next = min(next, wake)
	}
	if t, ok := n.pipe.AtoB.NextDelivery(); ok {
		next = min(next, t)
	}
	if t, ok := n.pipe.BtoA.NextDelivery(); ok {
		next = min(next, t)
	}
	n.now = max(n.now, next)
	now := n.now
	n.pipe.AtoB.Deliver(now, func(p []byte) { n.b.recv(now, p) })
	n.pipe.BtoA.Deliver(now, func(p []byte) { n.a.recv(now, p) })
	n.a.tick(now)
	n.b.tick(now)
	if now >= n.nextA {
		if err := n.a.send(now, n.pipe.AtoB); err != nil {
			return err
		}
		n.sentA++
		n.nextA += n.interval
	}
	if now >= n.nextB {
		if err := n.b.send(now, n.pipe.BtoA); err != nil {
			return err
		}
		n.nextB += n.interval
	}
	if n.a.readErr != nil {
		return n.a.readErr
	}
	return n.b.readErr
}

// calm turns every impairment off (latency and jitter stay).
func (n *sim) calm(t testing.TB) {
	t.Helper()
	for _, l := range []*netsim.Link{n.pipe.AtoB, n.pipe.BtoA} {
		c := l.Config()
		c.Loss, c.Reorder, c.Duplicate, c.Burst = 0, 0, 0, nil
		if err := l.SetConfig(c); err != nil {
			t.Fatal(err)
		}
	}
}

// lossyPair drives a pair through a model network in steps: every step writes
// one packet of mtu bytes; the packet is lost (probability loss) or arrives
// 1..1+spread steps later (so packets reorder); fates come in send order, a
// step after arrival for delivered packets and 4+spread steps after sending for
// lost ones — like notify, the sender never hears "delivered" for a packet the
// receiver did not read, nor "dropped" for one it did.
type lossyPair struct {
	*pair
	rng    *rand.Rand
	loss   float64
	spread int
	mtu    int
	step   int
	flight []flightPkt // send order
}

type flightPkt struct {
	seq      uint64
	lost     bool
	arrive   int
	resolved int
	arrived  bool
}

func newLossyPair(t *testing.T, cfg Config, seed uint64, loss float64, spread, mtu int) *lossyPair {
	return &lossyPair{pair: newPair(t, cfg), rng: rand.New(rand.NewPCG(seed, 0x1055)), loss: loss, spread: spread, mtu: mtu}
}

// tick runs one step: deliver what is due (shuffled), resolve fates in
// order, write a packet.
func (l *lossyPair) tick() {
	l.t.Helper()
	l.step++
	var due []int
	for i := range l.flight {
		f := &l.flight[i]
		if !f.lost && !f.arrived && f.arrive <= l.step {
			due = append(due, i)
		}
	}
	l.rng.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	for _, i := range due {
		l.flight[i].arrived = true
		l.deliver(l.flight[i].seq)
	}
	for len(l.flight) > 0 && l.flight[0].resolved <= l.step && (l.flight[0].lost || l.flight[0].arrived) {
		f := l.flight[0]
		l.fate(f.seq, !f.lost)
		delete(l.pkts, f.seq)
		l.flight = l.flight[1:]
	}
	seq := l.write(time.Duration(l.step)*10*ms, l.mtu)
	f := flightPkt{seq: seq, lost: l.rng.Float64() < l.loss, arrive: l.step + 1 + l.rng.IntN(l.spread+1)}
	f.resolved = f.arrive + 1
	if f.lost {
		f.resolved = l.step + 4 + l.spread
	}
	l.flight = append(l.flight, f)
}

func fate(seq uint64, delivered bool) notify.Fate { return notify.Fate{Seq: seq, Delivered: delivered} }

// checkWork: the Sender's work count, which lets Write skip the guaranteed
// streams, is exactly the events queued plus the units awaiting a resend
// (a count too low would leave events unsent).
func checkWork(s *Sender) error {
	sum := 0
	for _, ref := range s.streams {
		if st := ref.st; st != nil {
			sum += int(st.pendN + st.resendN)
		}
	}
	if int(s.work) != sum {
		return fmt.Errorf("Sender.work = %d, streams hold %d queued events and resends", s.work, sum)
	}
	return nil
}
