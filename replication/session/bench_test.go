package session_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/session"
)

// pair is a client and a server connected directly (a perfect link, no
// simulator), for benchmarks and allocation tests: each round the client
// samples a move and sends, the server takes it, updates the control object
// like a zone, and answers.
type pair struct {
	cli        *session.Client
	srv        *session.Server
	h          sink
	now        time.Duration
	dt         time.Duration
	cbuf, sbuf []byte
	state      move.ControlState
	srvTime    time.Duration // time spent in the server's Receive and Poll
	event      []byte
	round      int
	// ghosts, when set, writes every server packet's ghost section (the
	// client skips it: newPairSkipGhosts); fates takes their fates.
	ghosts session.GhostWriter
	fates  []notify.Fate
	// lag, when set, makes the zone report its state that many rounds
	// late (SetControl with the move applied lag rounds before), so the
	// client's packets repeat its unacknowledged moves; acked holds the
	// applied moves and their states until then.
	lag   int
	acked []ackedState
	// quiet: the client sends no events (the server still sends its).
	quiet bool
	// silent counts the rounds in a row the server sent nothing (its ack
	// held for the next tick, at most 1.5 slots: two rounds here);
	// serverSent fails the test past that.
	silent int
}

// ackedState is a move the zone applied and its state after it.
type ackedState struct {
	seq   uint64
	state move.ControlState
}

func newPair(tb testing.TB) *pair { return newPairN(tb, 200) }

// newPairN connects a pair and runs warm round trips.
func newPairN(tb testing.TB, warm int) *pair {
	tb.Helper()
	return newPairClient(tb, warm, session.DefaultClientConfig())
}

// newPairSkipGhosts is newPairN with a client that leaves the ghost
// section undecoded (ClientConfig.SkipGhosts), so any bits will do there.
func newPairSkipGhosts(tb testing.TB, warm int) *pair {
	tb.Helper()
	ccfg := session.DefaultClientConfig()
	ccfg.SkipGhosts = true
	return newPairClient(tb, warm, ccfg)
}

func newPairClient(tb testing.TB, warm int, ccfg session.ClientConfig) *pair {
	tb.Helper()
	var key [handshake.KeySize]byte
	seeded(3).Read(key[:])
	hcfg := handshake.DefaultServerConfig()
	hcfg.ProtocolID, hcfg.Addr = protoID, serverAddr
	hs, err := handshake.NewServer(hcfg, key, t0, seeded(4))
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := handshake.IssueToken(key, handshake.TokenParams{
		PlayerID: 1, ProtocolID: protoID, Expiry: time.Hour, Timeout: 10 * time.Second,
		ServerAddrs: []serverAddrT{serverAddr},
	}, t0, seeded(5))
	if err != nil {
		tb.Fatal(err)
	}
	p := &pair{dt: time.Second / 30, cbuf: make([]byte, 0, session.MaxPacketSize), sbuf: make([]byte, 0, session.MaxPacketSize),
		event: []byte("chat: hello there")}
	p.cli, err = session.NewClient(tok, serverAddr, ccfg, nil, t0, 0)
	if err != nil {
		tb.Fatal(err)
	}
	req, _ := p.cli.Poll(0, nil)
	acc, grant, err := hs.Handle(nil, req, clientAddr, t0, handshake.LoadNormal)
	if err != nil || grant == nil {
		tb.Fatalf("handshake: %v", err)
	}
	if err := p.cli.Receive(0, acc); err != nil {
		tb.Fatal(err)
	}
	sess, _ := grant.Session()
	scfg := session.DefaultServerConfig()
	scfg.SendRate = 30 // answer every client packet
	p.h.moves = make([]move.Move, 0, 1<<16)
	p.srv, err = session.NewServer(sess, scfg, &p.h, 0)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i < warm; i++ { // warm up: rings and slabs reach their size
		p.step(tb)
	}
	return p
}

type serverAddrT = netip.AddrPort

// sink keeps moves in a preallocated slice and counts events (the recorder
// copies payloads, which would show up as allocations here).
type sink struct {
	moves  []move.Move
	events int
}

func (s *sink) Move(m move.Move)    { s.moves = append(s.moves, m) }
func (s *sink) Event(e event.Event) { s.events++ }

// step runs one round trip.
func (p *pair) step(tb testing.TB) {
	p.now += p.dt
	p.round++
	for p.cli.InputDue(p.now) {
		if _, err := p.cli.Input(move.Move{Forward: 100, Yaw: uint16(p.round * 7)}); err != nil {
			tb.Fatal(err)
		}
	}
	if p.round%10 == 0 && !p.quiet {
		p.cli.SendEvent(0, p.event)
	}
	out, err := p.cli.Poll(p.now, p.cbuf[:0])
	if err != nil || len(out) == 0 {
		tb.Fatalf("client sent nothing in round %d: %v", p.round, err)
	}
	start := time.Now()
	if _, err := p.srv.Receive(p.now, out, clientAddr); err != nil {
		tb.Fatal(err)
	}
	p.srvTime += time.Since(start)
	for _, m := range p.h.moves { // the zone's part, not timed
		p.state = move.Walk(p.state, m, m.Seconds())
	}
	start = time.Now()
	if n := len(p.h.moves); n > 0 {
		p.setControl(p.h.moves[n-1].Seq)
		p.h.moves = p.h.moves[:0]
	}
	if p.round%10 == 5 {
		p.srv.SendEvent(1, p.event)
	}
	if p.ghosts != nil {
		p.fates = p.srv.PopGhostFates(p.fates[:0])
	}
	sout, err := p.srv.Poll(p.now, p.sbuf[:0], p.ghosts)
	p.srvTime += time.Since(start)
	if !p.serverSent(tb, sout, err) {
		// No new state this round (the client's packet brought no move,
		// or the lagged zone reported the same one): the server holds its
		// ack for the next tick's packet (the pair's first rounds).
		return
	}
	if err := p.cli.Receive(p.now, sout); err != nil {
		tb.Fatal(err)
	}
}

// setControl reports the zone's state after move seq, or with lag the
// state after the move applied lag rounds before.
func (p *pair) setControl(seq uint64) {
	if p.lag == 0 {
		p.srv.SetControl(seq, p.state)
		return
	}
	// A tick every round, as from a zone: the oldest held until lag
	// newer ones wait behind it.
	p.acked = append(p.acked, ackedState{seq, p.state})
	a := p.acked[0]
	if len(p.acked) > p.lag {
		p.acked = append(p.acked[:0], p.acked[1:]...)
	}
	p.srv.SetControl(a.seq, a.state)
}

// BenchmarkAuthenticatedHeader reports the authenticated header overhead per
// packet — cleartext notify header plus the 16-byte tag, both directions —
// in the loss-free steady state (issue 4 target: ≤ 19).
func BenchmarkAuthenticatedHeader(b *testing.B) {
	p := newPair(b)
	c0, s0 := p.cli.Stats().Counters, p.srv.Stats().Counters
	b.ReportAllocs()
	for b.Loop() {
		p.step(b)
	}
	c1, s1 := p.cli.Stats().Counters, p.srv.Stats().Counters
	hdr := (c1.HeaderBytesOut - c0.HeaderBytesOut) + (s1.HeaderBytesOut - s0.HeaderBytesOut)
	pkts := (c1.PacketsOut - c0.PacketsOut) + (s1.PacketsOut - s0.PacketsOut)
	b.ReportMetric(float64(hdr)/float64(pkts), "hdr-B/pkt")
}

// BenchmarkServerPacket is one client packet in and one server packet out
// at the server: classify, notify header, replay window, AEAD open, notify
// accept, move and event sections, fates, then header, control, events,
// empty ghost section and AEAD seal. ns/op covers the whole round trip
// (client included); server-ns/pkt only the server's part.
func BenchmarkServerPacket(b *testing.B) {
	runServerPackets(b, newPair(b))
}

// BenchmarkServerPacketLagged is BenchmarkServerPacket with the zone's
// state three rounds behind the moves (a zone tick and a round trip at 30
// moves a second): each client packet repeats its three unacknowledged
// moves before the new one, as a loaded server's do, so the section's
// redundant copies are decoded and skipped in every packet.
func BenchmarkServerPacketLagged(b *testing.B) {
	p := newPairN(b, 0)
	p.lag = 3
	// A nanosecond past the input period (1/30 s is 33,333,333.3 ns), so
	// every round samples a move: a round without one, that the ack-only
	// packet of an unlagged pair covers, would hold the client's slot for
	// the next sample (waitForSample) and send nothing.
	p.dt++
	p.acked = make([]ackedState, 0, p.lag+1)
	for range 200 {
		p.step(b)
	}
	m0 := p.srv.Stats().Moves
	runServerPackets(b, p)
	m1 := p.srv.Stats().Moves
	if m1.Duplicates-m0.Duplicates < 3*(m1.Sections-m0.Sections) {
		b.Fatalf("%d redundant copies in %d sections, want 3 a section", m1.Duplicates-m0.Duplicates, m1.Sections-m0.Sections)
	}
}

// BenchmarkServerPacketGhosts is BenchmarkServerPacket with a ghost record
// in every server packet (a server whose players have ghosts in view): the
// ghost packets' ring and fate queue in every round trip.
func BenchmarkServerPacketGhosts(b *testing.B) {
	p := newPairSkipGhosts(b, 200)
	p.ghosts = oneGhostRecord{}
	runServerPackets(b, p)
}

// BenchmarkServerPacketCold is BenchmarkServerPacket over 512 connections
// sharing one Scratch, as a connection shard's do, each op the next
// connection's round trip: by its next turn a connection's state has left
// the caches, as on a loaded server, so its misses (cachegrind's, a round
// trip, clients included) are the measure; its instructions are the warm
// benchmark's.
func BenchmarkServerPacketCold(b *testing.B) {
	const n = 512
	ps := make([]*pair, n)
	sc := session.NewScratch()
	for i := range ps {
		p := newPairN(b, 0)
		p.srv.ShareScratch(sc)
		p.h.moves = make([]move.Move, 0, 64)
		for range 20 {
			p.step(b)
		}
		ps[i] = p
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		ps[i].step(b)
		if i++; i == n {
			i = 0
		}
	}
}

// BenchmarkServerTicksCold is BenchmarkServerPacketCold in a shard's and a
// zone's order: the 512 connections' datagrams are received in one pass,
// and the zone's tick reaches them in another (SetControl, then the
// packet it opens); an op is one connection's half of a round, so two ops
// are a round trip. A connection's state is cold in each pass: its misses
// in SetControl, as on a server whose zone ticks between the datagrams,
// are what BenchmarkServerPacketCold, which runs both halves back to
// back, does not see. Each connection is 100 rounds old first, as a
// node's players are: past the event Sender's 64-fate loss window, whose
// filling keeps delivered fates going through the Sender (FatesIdle;
// 20 rounds until the thirty-fifth pass).
func BenchmarkServerTicksCold(b *testing.B) {
	const n = 512
	ps := make([]*pair, n)
	sc := session.NewScratch()
	for i := range ps {
		p := newPairN(b, 0)
		p.srv.ShareScratch(sc)
		p.h.moves = make([]move.Move, 0, 64)
		for range 100 {
			p.step(b)
		}
		ps[i] = p
	}
	i, tick := 0, false
	b.ReportAllocs()
	for b.Loop() {
		if p := ps[i]; tick {
			p.tickHalf(b)
		} else {
			p.receiveHalf(b)
		}
		if i++; i == n {
			i, tick = 0, !tick
		}
	}
}

// receiveHalf is the first half of step: the client's packet, received.
func (p *pair) receiveHalf(tb testing.TB) {
	p.now += p.dt
	p.round++
	for p.cli.InputDue(p.now) {
		if _, err := p.cli.Input(move.Move{Forward: 100, Yaw: uint16(p.round * 7)}); err != nil {
			tb.Fatal(err)
		}
	}
	if p.round%10 == 0 {
		p.cli.SendEvent(0, p.event)
	}
	out, err := p.cli.Poll(p.now, p.cbuf[:0])
	if err != nil || len(out) == 0 {
		tb.Fatalf("client sent nothing in round %d: %v", p.round, err)
	}
	if _, err := p.srv.Receive(p.now, out, clientAddr); err != nil {
		tb.Fatal(err)
	}
}

// serverSent reports whether the server's Poll gave a packet, failing the
// test on an error or when the server stayed silent longer than its ack
// may wait for a tick (1.5 slots: two rounds at the pair's rate).
func (p *pair) serverSent(tb testing.TB, sout []byte, err error) bool {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
	if len(sout) > 0 {
		p.silent = 0
		return true
	}
	if p.silent++; p.silent > 2 {
		tb.Fatalf("round %d: the server sent nothing for %d rounds in a row", p.round, p.silent)
	}
	return false
}

// tickHalf is the second half of step: the zone's tick, the server's
// packet, received.
func (p *pair) tickHalf(tb testing.TB) { p.tick(tb, true) }

// tick is tickHalf with the server's packet lost unless deliver is set.
func (p *pair) tick(tb testing.TB, deliver bool) {
	for _, m := range p.h.moves {
		p.state = move.Walk(p.state, m, m.Seconds())
	}
	if n := len(p.h.moves); n > 0 {
		p.srv.SetControl(p.h.moves[n-1].Seq, p.state)
		p.h.moves = p.h.moves[:0]
	}
	if p.round%10 == 5 {
		p.srv.SendEvent(1, p.event)
	}
	sout, err := p.srv.Poll(p.now, p.sbuf[:0], nil)
	if !p.serverSent(tb, sout, err) { // no new state: the ack waits for the next tick (step)
		return
	}
	if !deliver {
		return
	}
	if err := p.cli.Receive(p.now, sout); err != nil {
		tb.Fatal(err)
	}
}

// runServerPackets steps p once an op and reports the server's part of
// each round trip (server-ns/pkt).
func runServerPackets(b *testing.B, p *pair) {
	p.srvTime = 0
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		p.step(b)
		n++
	}
	b.ReportMetric(float64(p.srvTime.Nanoseconds())/float64(n), "server-ns/pkt")
}

func TestSteadyStateAllocatesNothing(t *testing.T) {
	p := newPair(t)
	if a := testing.AllocsPerRun(500, func() { p.step(t) }); a != 0 {
		t.Fatalf("%v allocations per round trip, want 0", a)
	}
	// And it is the steady state the header benchmark measures: 3-byte
	// headers, short form.
	c0 := p.cli.Stats().Counters
	for i := 0; i < 100; i++ {
		p.step(t)
	}
	c1 := p.cli.Stats().Counters
	if per := (c1.HeaderBytesOut - c0.HeaderBytesOut) / (c1.PacketsOut - c0.PacketsOut); per != 19 {
		t.Fatalf("client header overhead %d B/pkt, want 19", per)
	}
}

// BenchmarkGhostRelay is the connection actor's share of a ghost section
// packed by a ghost manager: Offer (a copy) and the splice into the packet
// at an unaligned offset, for a 900-byte section.
func BenchmarkGhostRelay(b *testing.B) {
	relay, err := session.NewGhostRelay(session.MaxPacketSize, 0)
	if err != nil {
		b.Fatal(err)
	}
	sec := make([]byte, 900)
	for i := range sec {
		sec[i] = byte(i * 13)
	}
	pkt := make([]byte, 1180)
	var w bitstream.Writer
	var fates []notify.Fate
	var seq uint64
	b.ReportAllocs()
	b.SetBytes(int64(len(sec)))
	for b.Loop() {
		seq++
		if err := relay.Offer(seq, 40, sec, 900*8-5, 0); err != nil {
			b.Fatal(err)
		}
		w.Reset(pkt)
		w.WriteBits(5, 19) // control and event sections before it
		if n, _ := relay.Write(&w, seq, 0); n != 1 {
			b.Fatal("section not written")
		}
		relay.OnFate(notify.Fate{Seq: seq, Delivered: true})
		fates = relay.PopFates(fates[:0])
	}
}
