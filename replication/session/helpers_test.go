package session_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/session"
)

const protoID = 0x6777_0001

var (
	t0         = time.Unix(1_700_000_000, 0)
	serverAddr = netip.MustParseAddrPort("10.0.0.1:7777")
	clientAddr = netip.MustParseAddrPort("192.0.2.10:50000")
)

// seeded returns a deterministic randomness source.
func seeded(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return rand.NewChaCha8(s)
}

// recorder is a ServerHandler and ClientHandler that keeps what arrived.
type recorder struct {
	moves  []move.Move
	events []event.Event // payloads copied
	zone   *zone         // when set, moves drive a walker like a zone would
}

func (r *recorder) Move(m move.Move) {
	r.moves = append(r.moves, m)
	if r.zone != nil {
		r.zone.apply(m)
	}
}

func (r *recorder) Event(e event.Event) {
	e.Payload = bytes.Clone(e.Payload)
	r.events = append(r.events, e)
}

// zone applies moves with move.Walk, as the zone actor would, and reports
// the state after the newest one to the server once per step.
type zone struct {
	state   move.ControlState
	applied uint64
}

func (z *zone) apply(m move.Move) {
	z.state = move.Walk(z.state, m, m.Seconds())
	z.applied = m.Seq
}

// world is one client and the server side of one connection — a handshake
// server standing in for the gateway, and the session.Server once granted —
// joined by a netsim pipe and driven in virtual time. A→B is client→server.
type world struct {
	t    *testing.T
	now  time.Duration
	pipe *netsim.Pipe

	hs    *handshake.Server
	load  handshake.Load
	grant *handshake.Grant
	token []byte

	cli  *session.Client
	srv  *session.Server
	cliH recorder
	srvH recorder
	scfg session.ServerConfig
	z    *zone

	ghosts      session.GhostWriter
	gfates      []notify.Fate
	onGhostFate func(notify.Fate)

	from      netip.AddrPort // the client's source address as the server sees it
	consumed  bool
	buf       []byte
	noConnOut int // NoConnection replies the "gateway" sent
	capture   func(dir string, p []byte)
	// ignoreS2C, when set, makes the client ignore a server datagram as a
	// client of an older version would (it is dropped unseen).
	ignoreS2C func(p []byte) bool
}

type worldOpt func(*worldCfg)

type worldCfg struct {
	ab, ba netsim.Config
	load   handshake.Load
	scfg   session.ServerConfig
	ccfg   session.ClientConfig
	params handshake.TokenParams
	seed   uint64
	zone   bool
}

func withLink(ab, ba netsim.Config) worldOpt { return func(c *worldCfg) { c.ab, c.ba = ab, ba } }
func withLoad(l handshake.Load) worldOpt     { return func(c *worldCfg) { c.load = l } }
func withZone() worldOpt                     { return func(c *worldCfg) { c.zone = true } }
func withSeed(s uint64) worldOpt             { return func(c *worldCfg) { c.seed = s } }
func withClientConfig(f func(*session.ClientConfig)) worldOpt {
	return func(c *worldCfg) { f(&c.ccfg) }
}
func withToken(f func(*handshake.TokenParams)) worldOpt { return func(c *worldCfg) { f(&c.params) } }
func withServerConfig(f func(*session.ServerConfig)) worldOpt {
	return func(c *worldCfg) { f(&c.scfg) }
}

func newWorld(t *testing.T, opts ...worldOpt) *world {
	t.Helper()
	cfg := worldCfg{
		scfg: session.DefaultServerConfig(),
		ccfg: session.DefaultClientConfig(),
		params: handshake.TokenParams{
			PlayerID: 42, ProtocolID: protoID, Expiry: time.Hour, Timeout: 10 * time.Second,
			ServerAddrs: []netip.AddrPort{serverAddr},
		},
		seed: 1,
	}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.ab.Seed, cfg.ba.Seed = cfg.seed, cfg.seed+1000
	pipe, err := netsim.NewPipe(cfg.ab, cfg.ba)
	if err != nil {
		t.Fatal(err)
	}
	var key [handshake.KeySize]byte
	seeded(cfg.seed + 7).Read(key[:])
	hcfg := handshake.DefaultServerConfig()
	hcfg.ProtocolID, hcfg.Addr = protoID, serverAddr
	hs, err := handshake.NewServer(hcfg, key, t0, seeded(cfg.seed+11))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := handshake.IssueToken(key, cfg.params, t0, seeded(cfg.seed+13))
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, pipe: pipe, hs: hs, load: cfg.load, token: tok, scfg: cfg.scfg, from: clientAddr,
		buf: make([]byte, 0, session.MaxPacketSize)}
	if cfg.zone {
		w.z = &zone{}
		w.srvH.zone = w.z
	}
	w.cli, err = session.NewClient(tok, serverAddr, cfg.ccfg, &w.cliH, t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) wall() time.Time { return t0.Add(w.now) }

// step advances virtual time by dt and runs one round: client sends, server
// receives and sends, client receives.
func (w *world) step(dt time.Duration) {
	w.t.Helper()
	w.now += dt
	for {
		out, err := w.cli.Poll(w.now, w.buf[:0])
		if err != nil {
			w.t.Fatalf("client poll at %v: %v", w.now, err)
		}
		if len(out) == 0 {
			break
		}
		if w.capture != nil {
			w.capture("c2s", out)
		}
		w.pipe.AtoB.Send(w.now, out)
	}
	w.pipe.AtoB.Deliver(w.now, w.serverRecv)
	if w.srv != nil {
		if w.z != nil && w.z.applied != 0 {
			w.srv.SetControl(w.z.applied, w.z.state)
		}
		for {
			due := w.srv.Due(w.now)
			out, err := w.srv.Poll(w.now, w.buf[:0], w.ghosts)
			if err != nil {
				w.t.Fatalf("server poll at %v: %v", w.now, err)
			}
			w.checkState("poll")
			if !due && len(out) > 0 {
				w.t.Fatalf("server poll at %v sent %d bytes after Due said nothing was due", w.now, len(out))
			}
			w.popGhostFates()
			if len(out) == 0 {
				break
			}
			if w.capture != nil {
				w.capture("s2c", out)
			}
			w.pipe.BtoA.Send(w.now, out)
		}
	}
	w.pipe.BtoA.Deliver(w.now, func(p []byte) {
		if w.ignoreS2C == nil || !w.ignoreS2C(p) {
			w.cli.Receive(w.now, p)
		}
	})
	w.checkDeadlines()
}

// checkDeadlines asserts the drivers' contract: once Poll has nothing more
// at now, NextDeadline lies in the future (a driver sleeping until a deadline
// ≤ now would spin). Receive may have made work due, so poll first.
func (w *world) checkDeadlines() {
	w.t.Helper()
	for out, _ := w.cli.Poll(w.now, w.buf[:0]); len(out) > 0; out, _ = w.cli.Poll(w.now, w.buf[:0]) {
		if w.capture != nil {
			w.capture("c2s", out)
		}
		w.pipe.AtoB.Send(w.now, out)
	}
	if d := w.cli.NextDeadline(w.now); d <= w.now {
		w.t.Fatalf("client: nothing to send at %v but NextDeadline %v", w.now, d)
	}
	if w.srv == nil {
		return
	}
	for {
		due := w.srv.Due(w.now)
		out, _ := w.srv.Poll(w.now, w.buf[:0], w.ghosts)
		w.checkState("poll")
		if !due && len(out) > 0 {
			w.t.Fatalf("server poll at %v sent %d bytes after Due said nothing was due", w.now, len(out))
		}
		w.popGhostFates()
		if len(out) == 0 {
			break
		}
		if w.capture != nil {
			w.capture("s2c", out)
		}
		w.pipe.BtoA.Send(w.now, out)
	}
	// The deadline of a driver that polls as this one did: with its ghosts.
	if w.ghosts == nil {
		if d := w.srv.NextDeadline(w.now); d <= w.now {
			w.t.Fatalf("server: nothing to send at %v but NextDeadline %v", w.now, d)
		}
	} else if d := w.srv.NextDeadlineFor(w.now, w.ghosts); d <= w.now {
		w.t.Fatalf("server: nothing to send at %v but NextDeadlineFor %v (ghosts pending %v)", w.now, d, w.ghosts.Pending())
	}
	// NextDeadlineFor's connected case is written out on its own: it must
	// be what NextDeadline and the ghosts' slot give, whatever the ghosts
	// say (and after a packet received, a tick, a send).
	gs := [...]session.GhostWriter{nil, pendingGhosts(false), pendingGhosts(true), w.ghosts}
	for i, g := range gs {
		if i == len(gs)-1 && g == nil {
			break
		}
		if d, ref := w.srv.NextDeadlineFor(w.now, g), session.NextDeadlineForRef(w.srv, w.now, g); d != ref {
			w.t.Fatalf("server at %v, ghosts %T pending %v: NextDeadlineFor %v, NextDeadline and the ghosts' slot %v", w.now, g, g != nil && g.Pending(), d, ref)
		}
	}
}

// checkState asserts that the State the server keeps of its handshake
// Session is the Session's own (after every Receive and Poll of every
// world, whatever the test does).
func (w *world) checkState(after string) {
	w.t.Helper()
	if kept, own := session.SessionStates(w.srv); kept != own {
		w.t.Fatalf("server at %v after %s: keeps State %v, its Session is %v", w.now, after, kept, own)
	}
}

// pendingGhosts is a GhostWriter that only says whether it is pending.
type pendingGhosts bool

func (g pendingGhosts) Pending() bool { return bool(g) }
func (pendingGhosts) Write(*bitstream.Writer, uint64, time.Duration) (int, error) {
	return 0, nil
}

func (w *world) popGhostFates() {
	w.gfates = w.srv.PopGhostFates(w.gfates[:0])
	if w.onGhostFate != nil {
		for _, f := range w.gfates {
			w.onGhostFate(f)
		}
	}
}

// serverRecv plays the gateway: handshake packets to the handshake server,
// protected packets to the connection (short form by source address, long
// form by connection id), NoConnection for a short form from a stranger.
func (w *world) serverRecv(p []byte) {
	kind, err := handshake.Classify(p)
	if err != nil {
		return
	}
	switch kind {
	case handshake.KindConnectRequest, handshake.KindChallengeResponse:
		out, grant, _ := w.hs.Handle(nil, p, w.from, w.wall(), w.load)
		if len(out) > 0 {
			w.pipe.BtoA.Send(w.now, out)
		}
		if grant != nil {
			sess, err := grant.Session()
			if err != nil {
				w.t.Fatal(err)
			}
			w.grant = grant
			cfg := w.scfg
			cfg.Timeout = grant.Claims.Timeout
			w.srv, err = session.NewServer(sess, cfg, &w.srvH, w.now)
			if err != nil {
				w.t.Fatal(err)
			}
		}
		return
	case handshake.KindData:
		if w.srv == nil {
			return
		}
		if w.from != w.srv.Addr() {
			if reply, err := handshake.AppendNoConnection(nil, p); err == nil {
				w.noConnOut++
				w.pipe.BtoA.Send(w.now, reply)
			}
			return
		}
	}
	if w.srv == nil {
		return
	}
	w.srv.Receive(w.now, p, w.from)
	w.checkState("receive")
	w.popGhostFates()
	if !w.consumed && w.srv.State() != handshake.StatePending {
		w.hs.Consume(w.grant.Claims.ID)
		w.consumed = true
	}
}

// run steps in increments of dt for d.
func (w *world) run(d, dt time.Duration) {
	w.t.Helper()
	for end := w.now + d; w.now < end; {
		w.step(dt)
	}
}

// connect runs until both ends are connected or fails after limit.
func (w *world) connect(limit time.Duration) {
	w.t.Helper()
	for end := w.now + limit; w.now < end; {
		w.step(time.Millisecond)
		if w.cli.State() == handshake.StateConnected && w.srv != nil && w.srv.State() == handshake.StateConnected {
			return
		}
	}
	w.t.Fatalf("not connected after %v: client %v (%v), server %v", limit, w.cli.State(), w.cli.Err(), w.srv)
}

// payload makes a recognisable event payload.
func payload(dir string, lane, i int) []byte {
	return fmt.Appendf(nil, "%s/%d/%06d", dir, lane, i)
}

// checkOrdered asserts that events hold exactly want[lane] payloads per lane,
// in order, each once.
func checkOrdered(t *testing.T, who string, got []event.Event, dir string, lanes, n int) {
	t.Helper()
	next := make([]int, lanes)
	for _, e := range got {
		if e.Class != event.Ordered {
			t.Fatalf("%s: unexpected class %v", who, e.Class)
		}
		want := payload(dir, e.Lane, next[e.Lane])
		if !bytes.Equal(e.Payload, want) {
			t.Fatalf("%s: lane %d event %d is %q, want %q", who, e.Lane, next[e.Lane], e.Payload, want)
		}
		next[e.Lane]++
	}
	for l, c := range next {
		if c != n {
			t.Fatalf("%s: lane %d delivered %d events, want %d", who, l, c, n)
		}
	}
}

// serverToClient sends every datagram the server has due now (no ghosts)
// and delivers what the link lets arrive to the client.
func (w *world) serverToClient() {
	w.t.Helper()
	for {
		due := w.srv.Due(w.now)
		out, err := w.srv.Poll(w.now, w.buf[:0], nil)
		if err != nil {
			w.t.Fatalf("server poll at %v: %v", w.now, err)
		}
		if !due && len(out) > 0 {
			w.t.Fatalf("server poll at %v sent %d bytes after Due said nothing was due", w.now, len(out))
		}
		if len(out) == 0 {
			break
		}
		w.pipe.BtoA.Send(w.now, out)
	}
	w.pipe.BtoA.Deliver(w.now, func(p []byte) { w.cli.Receive(w.now, p) })
}
