package ghost

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// newTestRegistry returns a registry with the shipped Player and NPC classes
// and a small name table.
func newTestRegistry(t testing.TB) (*Registry, *Class, *Class) {
	t.Helper()
	names := bitstream.NewStringTable(16)
	for i, s := range []string{"wolf", "goblin", "merchant", "guard"} {
		if err := names.Set(i, s); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	pc, nc := PlayerClass(names), NPCClass(names)
	if err := reg.Register(pc, nc); err != nil {
		t.Fatal(err)
	}
	return reg, pc, nc
}

// transport moves packets from the table to the mirror and fates back.
type transport interface {
	// begin starts a packet: writes any header, returns its sequence number.
	begin(w *bitstream.Writer, now time.Duration) uint64
	// send hands the finished packet to the network.
	send(now time.Duration, pkt []byte)
	// deliver calls fn for every packet reaching the client by now, with r
	// positioned at the ghost section.
	deliver(now time.Duration, fn func(r *bitstream.Reader) error) error
	// fates appends the fates known to the server by now, in send order.
	fates(now time.Duration, dst []notify.Fate) []notify.Fate
}

// fakeNet is the tiny in-test link: seeded loss, per-packet random latency
// (so packets reorder), and fates reported in send order once the server
// could know them. A packet is reported delivered only after the client
// processed it, dropped only if the client never will.
type fakeNet struct {
	rng        *rand.Rand
	loss       float64
	latency    time.Duration // one way, base
	jitter     time.Duration // uniform extra [0, jitter)
	seq        uint64
	pkts       []fakePkt // in send order; delivered ones keep their fate slot
	nextFate   int
	sent, lost int
}

type fakePkt struct {
	seq       uint64
	sentAt    time.Duration
	arriveAt  time.Duration
	fateAt    time.Duration
	dropped   bool
	delivered bool // processed by the client
	data      []byte
}

func newFakeNet(seed uint64, loss float64, latency, jitter time.Duration) *fakeNet {
	return &fakeNet{rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), loss: loss, latency: latency, jitter: jitter, seq: 100}
}

func (n *fakeNet) begin(w *bitstream.Writer, now time.Duration) uint64 {
	n.seq++
	return n.seq
}

func (n *fakeNet) draw() time.Duration {
	d := n.latency
	if n.jitter > 0 {
		d += time.Duration(n.rng.Int64N(int64(n.jitter)))
	}
	return d
}

func (n *fakeNet) send(now time.Duration, pkt []byte) {
	p := fakePkt{seq: n.seq, sentAt: now, data: slices.Clone(pkt)}
	n.sent++
	if n.rng.Float64() < n.loss {
		p.dropped = true
		n.lost++
		p.fateAt = now + 2*n.latency + n.jitter + 20*time.Millisecond
	} else {
		p.arriveAt = now + n.draw()
		p.fateAt = p.arriveAt + n.draw()
	}
	n.pkts = append(n.pkts, p)
}

func (n *fakeNet) deliver(now time.Duration, fn func(r *bitstream.Reader) error) error {
	// In arrival order (which is not send order).
	var due []int
	for i := n.nextFate; i < len(n.pkts); i++ {
		p := &n.pkts[i]
		if !p.dropped && !p.delivered && p.arriveAt <= now {
			due = append(due, i)
		}
	}
	slices.SortStableFunc(due, func(a, b int) int { return int(n.pkts[a].arriveAt - n.pkts[b].arriveAt) })
	var r bitstream.Reader
	for _, i := range due {
		p := &n.pkts[i]
		p.delivered = true
		r.Reset(p.data)
		if err := fn(&r); err != nil {
			return fmt.Errorf("packet %d: %w", p.seq, err)
		}
	}
	return nil
}

func (n *fakeNet) fates(now time.Duration, dst []notify.Fate) []notify.Fate {
	for n.nextFate < len(n.pkts) {
		p := &n.pkts[n.nextFate]
		if p.fateAt > now || (!p.dropped && !p.delivered) {
			break
		}
		dst = append(dst, notify.Fate{Seq: p.seq, Delivered: !p.dropped, SentAt: p.sentAt})
		n.nextFate++
	}
	// Keep the slice from growing without bound in long tests.
	if n.nextFate > 4096 {
		n.pkts = append(n.pkts[:0], n.pkts[n.nextFate:]...)
		n.nextFate = 0
	}
	return dst
}

// realNet is notify + netsim: the server writes a notify header before the
// ghost section, the client acks with TypeAck packets at ackRate.
type realNet struct {
	srv, cli  *notify.Conn
	pipe      *netsim.Pipe
	ackEvery  time.Duration
	nextAck   time.Duration
	w         bitstream.Writer
	buf       [64]byte
	r         bitstream.Reader
	headerBit int // header bits of the last packet begun
	rejected  int
	pend      []pendPkt // packets whose fate was not handed out yet
}

type pendPkt struct {
	seq   uint64
	at    time.Duration
	early bool // its delivered fate went out ahead of an older packet's
}

func newRealNet(t testing.TB, down, up netsim.Config, ackEvery time.Duration) *realNet {
	t.Helper()
	srv, err := notify.New(notify.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cli, err := notify.New(notify.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	pipe, err := netsim.NewPipe(down, up)
	if err != nil {
		t.Fatal(err)
	}
	return &realNet{srv: srv, cli: cli, pipe: pipe, ackEvery: ackEvery}
}

func (n *realNet) begin(w *bitstream.Writer, now time.Duration) uint64 {
	at := w.BitLen()
	seq, err := n.srv.WriteHeader(w, notify.TypeData, now)
	if err != nil {
		panic(fmt.Sprintf("notify WriteHeader: %v", err))
	}
	n.headerBit = w.BitLen() - at
	n.pend = append(n.pend, pendPkt{seq: seq, at: now})
	return seq
}

func (n *realNet) send(now time.Duration, pkt []byte) { n.pipe.AtoB.Send(now, pkt) }

func (n *realNet) deliver(now time.Duration, fn func(r *bitstream.Reader) error) error {
	var ferr error
	n.pipe.AtoB.Deliver(now, func(p []byte) {
		if ferr != nil {
			return
		}
		n.r.Reset(p)
		h, err := n.cli.ReadHeader(&n.r)
		if err != nil {
			n.rejected++ // duplicate, stale or too far: notify drops it
			return
		}
		if err := n.cli.Accept(h, now); err != nil {
			n.rejected++
			return
		}
		if err := fn(&n.r); err != nil {
			ferr = fmt.Errorf("packet %d: %w", h.Seq, err)
		}
	})
	n.cli.Tick(now)
	if now >= n.nextAck {
		n.nextAck = now + n.ackEvery
		n.w.Reset(n.buf[:])
		if _, err := n.cli.WriteHeader(&n.w, notify.TypeAck, now); err == nil {
			n.pipe.BtoA.Send(now, n.w.Bytes())
		}
		n.cli.PopFates(nil) // the client's own fates are of no interest here
	}
	return ferr
}

func (n *realNet) fates(now time.Duration, dst []notify.Fate) []notify.Fate {
	n.pipe.BtoA.Deliver(now, func(p []byte) {
		n.r.Reset(p)
		h, err := n.srv.ReadHeader(&n.r)
		if err != nil {
			return
		}
		n.srv.Accept(h, now)
	})
	n.srv.Tick(now)
	// As session.Server does: fates in send order, but a packet known
	// delivered while an older one's fate is open is reported at once, and
	// its in-order fate is not reported again.
	start := len(dst)
	dst = n.srv.PopFates(dst)
	out := dst[:start]
	for _, f := range dst[start:] {
		for len(n.pend) > 0 && n.pend[0].seq < f.Seq {
			n.pend = n.pend[1:]
		}
		early := len(n.pend) > 0 && n.pend[0].seq == f.Seq && n.pend[0].early
		if len(n.pend) > 0 && n.pend[0].seq == f.Seq {
			n.pend = n.pend[1:]
		}
		if !early {
			out = append(out, f)
		}
	}
	for i := range n.pend {
		p := &n.pend[i]
		if _, ok := n.srv.Delivered(p.seq); ok && !p.early {
			p.early = true
			out = append(out, notify.Fate{Seq: p.seq, Delivered: true, SentAt: p.at})
		}
	}
	return out
}

// rig drives one Table and one Mirror over a transport.
type rig struct {
	tb    testing.TB
	reg   *Registry
	tab   *Table
	mir   *Mirror
	net   transport
	now   time.Duration
	buf   []byte
	w     bitstream.Writer
	fates []notify.Fate
	bytes int // total bytes sent
	pkts  int
}

func newRig(tb testing.TB, reg *Registry, cfg Config, net transport, budget int) *rig {
	tb.Helper()
	tab, err := NewTable(reg, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	mir, err := NewMirror(reg, DefaultMirrorConfig())
	if err != nil {
		tb.Fatal(err)
	}
	return &rig{tb: tb, reg: reg, tab: tab, mir: mir, net: net, buf: make([]byte, budget)}
}

// tick advances to now: fates, then the view (if non-nil), then one packet,
// then deliveries up to now.
func (g *rig) tick(now time.Duration, view []ViewEntry) {
	g.tb.Helper()
	g.now = now
	g.fates = g.net.fates(now, g.fates[:0])
	for _, f := range g.fates {
		g.tab.OnFate(f)
	}
	if view != nil {
		if err := g.tab.SetView(now, view); err != nil {
			g.tb.Fatalf("SetView at %v: %v", now, err)
		}
	}
	g.w.Reset(g.buf)
	seq := g.net.begin(&g.w, now)
	if _, err := g.tab.Write(&g.w, seq, now); err != nil {
		g.tb.Fatalf("Write at %v: %v", now, err)
	}
	if g.w.Len() > len(g.buf) || g.w.Len() > MaxPacketBytes {
		g.tb.Fatalf("packet of %d bytes exceeds budget %d", g.w.Len(), len(g.buf))
	}
	g.bytes += g.w.Len()
	g.pkts++
	g.net.send(now, g.w.Bytes())
	g.pump(now)
}

// pump delivers what is due without sending.
func (g *rig) pump(now time.Duration) {
	g.tb.Helper()
	if err := g.net.deliver(now, func(r *bitstream.Reader) error { return g.mir.Read(r, now) }); err != nil {
		g.tb.Fatalf("Mirror.Read at %v: %v", now, err)
	}
}

// mismatch returns a description of the first difference between the
// mirror and the view (within quantization), or "".
func mismatch(reg *Registry, m *Mirror, view []ViewEntry) string {
	if m.Len() != len(view) {
		return fmt.Sprintf("mirror has %d ghosts, view %d", m.Len(), len(view))
	}
	tol := reg.PosMaxError()
	for i := range view {
		e := &view[i]
		g, ok := m.ByEntity(e.Entity)
		if !ok {
			return fmt.Sprintf("entity %d missing", e.Entity)
		}
		if g.Class != e.Class {
			return fmt.Sprintf("entity %d class %s, want %s", e.Entity, g.Class.Name, e.Class.Name)
		}
		if d := stateDiff(g.State, e.State, e.Class, tol); d != "" {
			return fmt.Sprintf("entity %d (ghost %d): %s", e.Entity, g.ID, d)
		}
	}
	return ""
}

// stateDiff compares what class c replicates.
func stateDiff(got, want State, c *Class, tol float64) string {
	for i := range c.Groups {
		g := &c.Groups[i]
		switch {
		case g.pos:
			for a := range 3 {
				if math.Abs(got.Pos[a]-want.Pos[a]) > tol {
					return fmt.Sprintf("pos %v want %v", got.Pos, want.Pos)
				}
			}
		default:
			if g.Changed(&got, &want) {
				return fmt.Sprintf("group %s: got %+v want %+v", g.Name, got, want)
			}
		}
	}
	return ""
}

// world is a scripted population for property tests.
type world struct {
	rng    *rand.Rand
	reg    *Registry
	pc, nc *Class
	ents   []ViewEntry
	next   uint64
}

func newWorld(seed uint64, reg *Registry, pc, nc *Class) *world {
	return &world{rng: rand.New(rand.NewPCG(seed, 7)), reg: reg, pc: pc, nc: nc, next: 1000}
}

func (w *world) randPos() [3]float64 {
	return [3]float64{w.rng.Float64()*400 - 200, w.rng.Float64()*400 - 200, w.rng.Float64()*20 - 10}
}

func (w *world) spawn() ViewEntry {
	w.next++
	c := w.nc
	if w.rng.IntN(4) == 0 {
		c = w.pc
	}
	e := ViewEntry{Entity: w.next, Class: c, Priority: float32(w.rng.Float64() + 0.01)}
	e.State.Pos = w.randPos()
	e.State.Yaw = w.rng.Float64()*7 - 3.5
	e.State.Health = int32(w.rng.IntN(1000))
	e.State.Name = MustName([]string{"wolf", "goblin", "Zed", "a rather long name"}[w.rng.IntN(4)])
	return e
}

// mutate changes a random subset of fields of entity i.
func (w *world) mutate(i int) {
	s := &w.ents[i].State
	switch w.rng.IntN(6) {
	case 0, 1, 2:
		for a := range 3 {
			s.Pos[a] = math.Max(-1000, math.Min(1000, s.Pos[a]+w.rng.NormFloat64()))
		}
	case 3:
		s.Yaw += w.rng.NormFloat64()
	case 4:
		s.Health = int32(w.rng.IntN(1000))
	case 5:
		s.Flags = uint32(w.rng.IntN(256))
		if w.ents[i].Class == w.pc {
			s.Extra[w.rng.IntN(4)] = uint32(w.rng.IntN(1 << 20))
			s.Vel[w.rng.IntN(3)] = w.rng.NormFloat64() * 5
		}
	}
}

func (w *world) view() []ViewEntry { return slices.Clone(w.ents) }

// checkRecords verifies the records and idm: the records [0, live) are
// the ghosts in use, each of its own id, marked used in the bitmap, and
// no other id is; top and hint are what allocID and IDWidth take them
// for; and the per-record arrays are of one length.
func checkRecords(t *Table) error {
	n := len(t.slots)
	if len(t.pos) != n || len(t.lastField) != n*int(t.stride) || int(t.live) > n || len(t.idm) < n {
		return fmt.Errorf("records: %d slots, %d tracks, %d sequences of %d, %d live, idm %d", n, len(t.pos), len(t.lastField), t.stride, t.live, len(t.idm))
	}
	used := t.usedIDs()
	ids := map[uint32]uint32{}
	top := 0
	for rc := range uint32(t.live) {
		id := t.idOf(rc)
		if o, dup := ids[id]; dup {
			return fmt.Errorf("id %d is records %d and %d", id, o, rc)
		}
		ids[id] = rc
		if int(id/16) >= len(used) || used[id/16]&(1<<(id%16)) == 0 {
			return fmt.Errorf("id %d (record %d) not marked used", id, rc)
		}
		top = max(top, int(id)+1)
	}
	marked := 0
	for w, b := range used {
		marked += bits.OnesCount16(b)
		if w < int(t.hint) && b != 1<<16-1 {
			return fmt.Errorf("bitmap word %d has a free id, below hint %d", w, t.hint)
		}
	}
	if marked != int(t.live) || top != int(t.top) {
		return fmt.Errorf("%d ids marked, top %d; table says %d live, top %d", marked, top, t.live, t.top)
	}
	return nil
}

// checkInvariants verifies the table's internal consistency: id allocation,
// the records and idm, the entity map, and the per-ghost in-flight
// bookkeeping against the transmission records. It is the oracle of the
// property and fuzz tests.
func checkInvariants(t *Table) error {
	if err := checkRecords(t); err != nil {
		return err
	}
	pend := 0
	for rc := range uint32(t.live) {
		s := &t.slots[rc]
		i := t.idOf(rc)
		if s.wants() {
			pend++
		}
		if s.phase == phaseFree {
			return fmt.Errorf("id %d (record %d): free, below live %d", i, rc, t.live)
		}
		if s.phase == phaseLive && !s.has(flCreated) {
			return fmt.Errorf("id %d live but not created", i)
		}
		if s.phase == phaseCreating && s.has(flCreated) {
			return fmt.Errorf("id %d creating but created", i)
		}
		if s.phase == phaseKilling && !s.has(flCreated) && s.inflight == 0 {
			return fmt.Errorf("id %d: killing, never held by the client, nothing in flight: should be free", i)
		}
		got, ok := t.idxGet(t.entityOf(rc))
		switch {
		case s.phase != phaseKilling && (!ok || got != rc):
			return fmt.Errorf("id %d (entity %d, phase %d) not in the entity map", i, t.entityOf(rc), s.phase)
		case s.has(flKillInFlight) && ok && got == rc:
			return fmt.Errorf("id %d: kill in flight but still mapped", i)
		}
	}
	if pend != int(t.npend) {
		// Pending answers from npend: a count below the truth stalls a
		// connection's replication, one above sends empty packets.
		return fmt.Errorf("%d ghosts want to send, npend says %d", pend, t.npend)
	}
	mapped := 0
	for i := range t.idx.buckets() {
		v := t.idx.at(i)
		if v == 0 {
			continue
		}
		id := v - 1
		mapped++
		if int32(id) >= t.live {
			return fmt.Errorf("entity index holds record %d, free (%d live)", id, t.live)
		}
		if got, ok := t.idxGet(t.entityOf(id)); !ok || got != id {
			return fmt.Errorf("entity index holds record %d (entity %d) but finds %d, %v", id, t.entityOf(id), got, ok)
		}
	}
	if mapped != int(t.idx.n) {
		return fmt.Errorf("entity index counts %d, holds %d", t.idx.n, mapped)
	}
	// In-flight bookkeeping against the transmission records.
	// Records carry no incarnation: every record in flight must be of a
	// ghost that is not free (ids are freed only with nothing in flight).
	type key struct{ id uint32 }
	inflight := map[key]uint8{}
	creates, kills, poss, recent := map[key]int{}, map[key]int{}, map[key]int{}, map[key]int{}
	ents := 0
	for k := 0; k < int(t.pktLen); k++ {
		p := &t.pkts[(int(t.pktHead)+k)&(len(t.pkts)-1)]
		if k > 0 && !seqAfter(p.seq, t.pkts[(int(t.pktHead)+k-1)&(len(t.pkts)-1)].seq) {
			return fmt.Errorf("transmission records out of order")
		}
		// The store never wraps (entRoom): each packet's records start
		// where the older packets' end, within the store.
		if want := int(t.entHead) + ents; int(p.start) != want || want+int(p.n) > len(t.ents) {
			return fmt.Errorf("packet %d holds records %d+%d of a store of %d, want from %d", p.seq, p.start, p.n, len(t.ents), want)
		}
		ents += int(p.n)
		if p.resolved {
			continue
		}
		for j := 0; j < int(p.n); j++ {
			ei := int(p.start) + j
			e := t.ents[ei]
			if int32(e.rec()) >= t.live {
				return fmt.Errorf("packet %d carries a record of record %d, which is free (%d live)", p.seq, e.rec(), t.live)
			}
			kk := key{t.idOf(e.rec())}
			inflight[kk]++
			switch e.kind() {
			case recCreate:
				creates[kk]++
			case recKill:
				kills[kk]++
			}
			if s := &t.slots[e.rec()]; t.entMask(ei, e)&t.classOf(s).posBit != 0 {
				poss[kk]++
				if stamp(t.viewMS).sub(p.t) <= posFlightAge {
					recent[kk]++ // not forgotten by a rebase (rebasePositions)
				}
			}
		}
	}
	if ents != int(t.entLen) {
		return fmt.Errorf("records hold %d entries, table says %d", ents, t.entLen)
	}
	for rc := range uint32(t.live) {
		s := &t.slots[rc]
		i := t.idOf(rc)
		kk := key{i}
		if inflight[kk] != s.inflight {
			return fmt.Errorf("id %d: inflight %d, records say %d", i, s.inflight, inflight[kk])
		}
		if (creates[kk] > 0) != s.has(flCreateInFlight) || creates[kk] > 1 {
			return fmt.Errorf("id %d: createInFlight %v, records hold %d creates", i, s.has(flCreateInFlight), creates[kk])
		}
		if (kills[kk] > 0) != s.has(flKillInFlight) || kills[kk] > 1 {
			return fmt.Errorf("id %d: killInFlight %v, records hold %d kills", i, s.has(flKillInFlight), kills[kk])
		}
		if n := int(t.pos[rc].n()); n > poss[kk] || n < recent[kk] {
			return fmt.Errorf("id %d: %d positions tracked in flight, records say %d (%d of them recent)", i, n, poss[kk], recent[kk])
		}
		// The slot's position flags answer what the track would (collect
		// and posForm read only the flags).
		if s.posBlocked() == t.posWritable(rc) {
			return fmt.Errorf("id %d: position blocked %v (flags %b), the track says writable %v", i, s.posBlocked(), s.fl, t.posWritable(rc))
		}
		if s.has(flKillInFlight) && s.inflight != 1 {
			return fmt.Errorf("id %d: kill in flight alongside %d other records", i, s.inflight-1)
		}
	}
	// Pooled positions: each in-flight position one node of its ghost's
	// list, every other node free.
	seen := map[int32]int{}
	for i := range t.pos {
		tr := &t.pos[i]
		n := int(tr.n())
		if i >= int(t.live) && n != 0 {
			return fmt.Errorf("free record %d tracks %d positions in flight", i, n)
		}
		if n > posRingLen || tr.dn() > 2 || tr.dn() < 2 && tr.gap() != 0 || tr.dn() == 2 && (tr.gap() < 1 || tr.gap() > gapFar) {
			return fmt.Errorf("id %d: %d in flight, %d delivered %d ms apart", i, n, tr.dn(), tr.gap())
		}
		if n > 1 && tr.second(&t.pp).sub(tr.ft[0]) <= 0 {
			return fmt.Errorf("id %d: in-flight positions not oldest first", i)
		}
		if n <= ownFlight {
			continue // the track holds them itself
		}
		// A circular list of the newer ones: from the head (the tail's
		// next) back to the tail's next.
		last := int32(-1)
		for j, k := tr.head(&t.pp), ownFlight; k < n; j, k = t.pp.nodes[j].next, k+1 {
			if o, dup := seen[j]; dup {
				return fmt.Errorf("pool node %d in the lists of ids %d and %d", j, o, i)
			}
			seen[j] = i
			last = j
		}
		if last != tr.tail() {
			return fmt.Errorf("id %d: list of %d does not end at its tail", i, n)
		}
		// Oldest first: stamps increase from the track's own along the
		// list.
		if t.pp.nodes[tr.head(&t.pp)].t.sub(tr.second(&t.pp)) <= 0 {
			return fmt.Errorf("id %d: in-flight positions not oldest first", i)
		}
		for j, k := tr.head(&t.pp), ownFlight+1; k < n; j, k = t.pp.nodes[j].next, k+1 {
			if nx := t.pp.nodes[j].next; t.pp.nodes[nx].t.sub(t.pp.nodes[j].t) <= 0 {
				return fmt.Errorf("id %d: in-flight positions not oldest first", i)
			}
		}
	}
	if err := checkFq1(t); err != nil {
		return err
	}
	if x := &t.pp; x.wide && len(x.wx.hi) != len(x.nodes) || !x.wide && x.wx != nil {
		return fmt.Errorf("pool: wide %v, %d nodes, high words %v", x.wide, len(x.nodes), x.wx)
	}
	if x := &t.pp; len(x.nodes) > maxPoolNodes || int32(x.used) > t.entLen {
		return fmt.Errorf("pool: %d nodes, %d used, %d records in flight (16-bit indices: at most %d)", len(x.nodes), x.used, t.entLen, maxPoolNodes)
	}
	if x := &t.pp; len(x.free)*64 < cap(x.nodes) {
		return fmt.Errorf("pool: room %d, %d free words", cap(x.nodes), len(x.free))
	}
	for w, b := range t.pp.free {
		if b != 0 && int32(w) < int32(t.pp.scan) {
			return fmt.Errorf("pool: free nodes in word %d below the scan start %d", w, t.pp.scan)
		}
		for ; b != 0; b &= b - 1 {
			j := int32(w*64 + bits.TrailingZeros64(b))
			if int(j) >= len(t.pp.nodes) {
				return fmt.Errorf("pool node %d free past the %d in use", j, len(t.pp.nodes))
			}
			if o, dup := seen[j]; dup {
				return fmt.Errorf("pool node %d free and held by id %d", j, o)
			}
			seen[j] = -1
		}
	}
	held := 0
	for _, o := range seen {
		if o >= 0 {
			held++
		}
	}
	if held != int(t.pp.used) {
		return fmt.Errorf("pool: %d used, %d held", t.pp.used, held)
	}
	if len(seen) != len(t.pp.nodes) {
		return fmt.Errorf("pool: %d nodes, %d held or free", len(t.pp.nodes), len(seen))
	}
	return checkViewRefs(t)
}

// checkViewRefs verifies where each ghost's state is: for snapshot views,
// a ghost in scope names an entry of the latest snapshot (in the latest
// view) or a carried state, and one that left names its goneRec, which
// names it back; every goneRec is a leaving ghost's.
func checkViewRefs(t *Table) error {
	if !t.snapMode {
		if len(t.gone) != 0 || t.snap != nil {
			return fmt.Errorf("entry views with %d gone records, snapshot %v", len(t.gone), t.snap != nil)
		}
		return nil
	}
	if t.prevSnap != nil {
		return fmt.Errorf("prevSnap held between views")
	}
	gone := 0
	for rc := range uint32(t.live) {
		s := &t.slots[rc]
		i := t.idOf(rc)
		switch {
		case s.phase == phaseKilling:
			if s.si&siGone == 0 || int(s.si&siIndex) >= len(t.gone) || t.gone[s.si&siIndex].rc != rc {
				return fmt.Errorf("id %d left scope, si %#x does not name its gone record", i, s.si)
			}
			gone++
		case s.si&siCarry != 0:
			if int(s.si&siIndex) >= len(t.carried()) {
				return fmt.Errorf("id %d: carried state %d of %d", i, s.si&siIndex, len(t.carried()))
			}
		case s.si&siGone != 0:
			return fmt.Errorf("id %d in scope (phase %d) names a gone record", i, s.phase)
		default:
			if s.viewGen != t.viewGen || t.snap == nil || int(s.si) >= len(t.snap.ents) {
				return fmt.Errorf("id %d: entry %d is not an entry of the latest view", i, s.si)
			}
		}
	}
	if gone != len(t.gone) {
		return fmt.Errorf("%d gone records, %d ghosts leaving", len(t.gone), gone)
	}
	return nil
}

// tableFor returns a fresh table of reg with the default config.
func tableFor(tb testing.TB, reg *Registry) *Table {
	tb.Helper()
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	return tab
}

// writerFor returns a fresh snapshot writer of reg.
func writerFor(tb testing.TB, reg *Registry) *SnapshotWriter {
	tb.Helper()
	sw, err := NewSnapshotWriter(reg)
	if err != nil {
		tb.Fatal(err)
	}
	return sw
}

// dirtyAt is ghost id's dirty groups (dirtyOf: the slot's word and, past
// 32 groups, the rest).
func (t *Table) dirtyAt(id uint32) uint64 { return t.dirtyOf(t.recOf(id), t.slotOf(id)) }

// inUse reports whether ghost id is in use (creating, live or killing).
func (t *Table) inUse(id uint32) bool {
	return int32(id) < t.top && t.usedIDs()[id/16]&(1<<(id%16)) != 0
}

// recOf is the record of ghost id (in use): tests name ghosts by their
// wire ids, the table by their records.
func (t *Table) recOf(id uint32) uint32 {
	for rc := range uint32(t.live) {
		if t.idOf(rc) == id {
			return rc
		}
	}
	panic(fmt.Sprintf("ghost %d not in use", id))
}

// slotOf is the slot of ghost id (in use).
func (t *Table) slotOf(id uint32) *slot { return &t.slots[t.recOf(id)] }
