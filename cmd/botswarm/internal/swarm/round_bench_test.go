package swarm

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/session"
)

// BenchmarkBotsRound is a worker's bots against in-memory servers, no
// sockets: one op is a 60th of a second of 1,000 bots that skip the
// ghost section (the --observers share that is not observing) — each
// takes its server's datagram (20 Hz, ≈ 700 bytes of ghost records as a
// real zone's packets carry) and is serviced at its own times (moves at
// 30 Hz, echoes, samples), its datagrams queued as on a shared socket.
// The servers' work is in the count too (the same in A and B); instr/op ÷
// 1,000 is a bot's 60th of a second. The bots' clocks are the round's,
// not the wall's; the tokens and handshakes are not (wall clock, random
// keys), so callgrind's and cachegrind's counts per op still vary by ≈ 1 %
// from run to run: compare several runs.
func BenchmarkBotsRound(b *testing.B) {
	r := newBotRig(b, 1000, 0)
	b.ReportAllocs()
	for b.Loop() {
		r.round(b)
	}
	b.ReportMetric(float64(r.in)/float64(r.rounds), "dgm-in/op")
	b.ReportMetric(float64(r.out)/float64(r.rounds), "dgm-out/op")
}

// memTransport is a shared-socket stand-in: sends land in a queue the
// rig's servers read.
type memTransport struct {
	q    []int32 // tags, in send order
	bufs [][]byte
}

func (t *memTransport) open(_ netip.AddrPort, tag int32) (sock, error) { return int(tag), nil }
func (t *memTransport) bind(sock, *handshake.Token)                    {}
func (t *memTransport) close(sock)                                     {}
func (t *memTransport) wait(time.Duration, func(int32, []byte, error)) int {
	return 0
}
func (t *memTransport) shutdown()    {}
func (t *memTransport) name() string { return "mem" }
func (t *memTransport) shared() bool { return true }

func (t *memTransport) send(s sock, p []byte) error {
	i := len(t.q)
	if i == len(t.bufs) {
		t.bufs = append(t.bufs, make([]byte, 0, maxDatagram))
	}
	t.bufs[i] = append(t.bufs[i][:0], p...)
	t.q = append(t.q, int32(s))
	return nil
}

// rigConn is one bot's server end, with a zone's part: moves applied with
// move.Walk, lane-0 events echoed.
type rigConn struct {
	srv   *session.Server
	addr  netip.AddrPort
	state move.ControlState
	last  uint64
	echo  [echoLen]byte
	echoN int
	g     *ghostRig // observers: a real ghost table (nil: filler records)
}

func (c *rigConn) Move(m move.Move) {
	c.state = move.Walk(c.state, m, m.Seconds())
	c.last = m.Seq
}

func (c *rigConn) Event(e event.Event) {
	if e.Class == event.Ordered && e.Lane == echoLane && len(e.Payload) <= len(c.echo) {
		c.echoN = copy(c.echo[:], e.Payload)
	}
}

// fillerGhosts writes ≈ 700 bytes of ghost records into every packet
// (a bot that skips the section never looks at them).
type fillerGhosts struct{}

func (fillerGhosts) Pending() bool { return true }

func (fillerGhosts) Write(w *bitstream.Writer, seq uint64, now time.Duration) (int, error) {
	n := min(700*8, w.Remaining()) / 64
	for i := range n {
		if err := w.WriteBits(0x9e3779b97f4a7c15^uint64(i)*seq, 64); err != nil {
			return 0, err
		}
	}
	return max(n/8, 1), nil
}

type botRig struct {
	sw     *Swarm
	w      *worker
	tr     *memTransport
	hs     *handshake.Server
	reg    *ghost.Registry // observers: the ghost classes (nil: filler)
	conns  []*rigConn
	now    time.Duration
	sbuf   []byte
	fates  []notify.Fate
	rounds int
	in     int
	out    int
}

// newBotRig connects n bots (observers: the share that decodes ghosts; with
// any, the servers send real ghost sections, else filler records) and runs
// them for 1 s.
func newBotRig(tb testing.TB, n int, observers float64) *botRig {
	tb.Helper()
	server := netip.MustParseAddrPort("127.0.0.1:7777")
	cfg := DefaultConfig()
	cfg.Servers = []netip.AddrPort{server}
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range cfg.Key {
		cfg.Key[i] = byte(rng.Uint32())
	}
	cfg.ProtocolID = 0x6777
	cfg.Bots, cfg.Duration, cfg.Ramp, cfg.Workers = n, time.Hour, 0, 1
	cfg.Transport = "goroutines" // replaced below: no socket is opened
	cfg.Observers = observers
	sw, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	sw.epoch = time.Now()
	tr := &memTransport{}
	w := sw.workers[0]
	w.tr = tr
	sw.clientCfg.AlwaysLongForm, sw.blindCfg.AlwaysLongForm = true, true
	hcfg := handshake.DefaultServerConfig()
	hcfg.ProtocolID, hcfg.Addr = cfg.ProtocolID, server
	hs, err := handshake.NewServer(hcfg, cfg.Key, time.Now(), rand.NewChaCha8([32]byte{8}))
	if err != nil {
		tb.Fatal(err)
	}
	r := &botRig{sw: sw, w: w, tr: tr, hs: hs, conns: make([]*rigConn, n), sbuf: make([]byte, 0, session.MaxPacketSize)}
	if observers > 0 {
		r.reg = session.DefaultRegistry()
	}
	for _, b := range w.bots {
		w.push(b, 0)
	}
	for range 60 { // connect, then warm the rings up (1 s)
		r.round(tb)
	}
	if c := w.shard.C; c.Connected != int64(n) || c.ControlUpdates == 0 || c.EventsEchoed == 0 {
		tb.Fatalf("%d of %d bots connected, %d acknowledgements, %d echoes", c.Connected, n, c.ControlUpdates, c.EventsEchoed)
	}
	r.rounds, r.in, r.out = 0, 0, 0
	return r
}

// round is a 60th of a second: the servers send what is due, the worker
// takes it and services its due bots, the servers read what they sent.
func (r *botRig) round(tb testing.TB) {
	r.now += time.Second / 60
	r.rounds++
	w := r.w
	for i, c := range r.conns {
		// A zone ticks at 20 Hz and its connections send then; the
		// bots' ticks are spread over the three rounds of a tick.
		if c == nil || (r.rounds+i)%3 != 0 {
			continue
		}
		if c.last > 0 {
			c.srv.SetControl(c.last, c.state)
		}
		r.fates = c.srv.PopGhostFates(r.fates[:0])
		var gw session.GhostWriter = fillerGhosts{}
		if r.reg != nil {
			if c.g != nil {
				for _, f := range r.fates {
					c.g.tab.OnFate(f)
				}
			}
			r.setView(tb, i, c)
			gw = c.g.tab
		}
		out, err := c.srv.Poll(r.now, r.sbuf[:0], gw)
		if err != nil {
			tb.Fatal(err)
		}
		if len(out) > 0 {
			w.onDatagramAt(r.now, int32(i), out, nil)
			r.in++
		}
	}
	if w.held {
		w.held = false
		w.shard.Mu.Unlock()
	}
	w.shard.Mu.Lock()
	w.runDue(r.now)
	w.shard.Mu.Unlock()
	for k, tag := range r.tr.q {
		p := r.tr.bufs[k]
		r.out++
		c := r.conns[tag]
		if c == nil {
			r.accept(tb, tag, p)
			continue
		}
		if _, err := c.srv.Receive(r.now, p, c.addr); err != nil {
			tb.Fatal(err)
		}
		if c.echoN > 0 {
			_ = c.srv.SendEvent(echoLane, c.echo[:c.echoN])
			c.echoN = 0
		}
	}
	r.tr.q = r.tr.q[:0]
}

// accept answers a bot's connection request and gives it its server end.
func (r *botRig) accept(tb testing.TB, tag int32, req []byte) {
	addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(tag >> 16), byte(tag >> 8), byte(tag)}), 40000)
	acc, grant, err := r.hs.Handle(nil, req, addr, time.Now(), handshake.LoadNormal)
	if err != nil || grant == nil {
		tb.Fatalf("bot %d: handshake: %v", tag, err)
	}
	sess, err := grant.Session()
	if err != nil {
		tb.Fatal(err)
	}
	c := &rigConn{addr: addr}
	scfg := session.DefaultServerConfig()
	scfg.SendRate = 20 // zoned's: a datagram a tick
	if c.srv, err = session.NewServer(sess, scfg, c, r.now); err != nil {
		tb.Fatal(err)
	}
	r.conns[tag] = c
	r.w.onDatagramAt(r.now, tag, acc, nil)
	if r.w.held {
		r.w.held = false
		r.w.shard.Mu.Unlock()
	}
}
