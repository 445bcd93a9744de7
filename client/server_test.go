package client_test

import (
	"math"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	crand "crypto/rand"

	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/session"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

const protoID = 77

// testServer is the smallest real server: one UDP socket on 127.0.0.1, the
// handshake, a session.Server per connection routed by address (short form)
// and connection id (long form), a walker zone per player, and an echo of
// every event on the lane it came on. Two goroutines (read, run); Stop ends
// them.
type testServer struct {
	t     testing.TB
	pc    net.PacketConn
	addr  netip.AddrPort
	key   [handshake.KeySize]byte
	hs    *handshake.Server
	start time.Time
	stop  chan struct{}
	done  chan struct{}
	// in carries the datagrams read (by read, its own goroutine) to run;
	// bounded: when full, read waits and the kernel's buffer fills.
	in       chan datagram
	readDone chan struct{}

	mu     sync.Mutex // guards the maps and counters below, read by tests
	byID   map[handshake.ConnID]*tconn
	byAddr map[netip.AddrPort]*tconn
	ended  map[handshake.Reason]int
	echoed int
	kick   map[uint64]bool // player ids to kick
	reg    *ghost.Registry
	npc    *ghost.Class
	view   []ghost.ViewEntry
	fates  []notify.Fate
	// ghostDelay holds a new connection's first ghosts back this long (a
	// zone that takes a while to place a reconnecting player).
	ghostDelay time.Duration
	// zone, when set, fences ordered events per player as a zone does
	// (docs/protocol.md §7.20): a server echoes only the events it
	// applies. Servers of one cluster share it.
	zone *sharedZone
}

// sharedZone is the players' zone behind several test servers: per player
// the event fence and the lane events applied, in order.
type sharedZone struct {
	mu      sync.Mutex
	fence   map[uint64]*handoff.EventFence
	applied map[uint64][]string
}

func newSharedZone() *sharedZone {
	return &sharedZone{fence: map[uint64]*handoff.EventFence{}, applied: map[uint64][]string{}}
}

// take applies e unless the player's fence covers it, and returns the
// fence's value for e's lane (0: not applied, not numbered).
func (z *sharedZone) take(player, gen uint64, e event.Event) (bool, uint64) {
	z.mu.Lock()
	defer z.mu.Unlock()
	f := z.fence[player]
	if f == nil {
		f = new(handoff.EventFence)
		z.fence[player] = f
	}
	if !f.Take(gen, e.Lane, e.Seq) {
		return false, f.Last[e.Lane]
	}
	z.applied[player] = append(z.applied[player], string(e.Payload))
	return true, f.Last[e.Lane]
}

func (z *sharedZone) log(player uint64) []string {
	z.mu.Lock()
	defer z.mu.Unlock()
	return append([]string(nil), z.applied[player]...)
}

// npcs is how many NPCs every player sees.
const npcs = 5

// npcView is the zone's view at now: npcs NPCs on circles around the origin.
func (ts *testServer) npcView(now time.Duration) []ghost.ViewEntry {
	ts.view = ts.view[:0]
	for i := 0; i < npcs; i++ {
		a := now.Seconds() + float64(i)
		ts.view = append(ts.view, ghost.ViewEntry{Entity: uint64(500 + i), Class: ts.npc, Priority: 1,
			State: ghost.State{Pos: [3]float64{20 * math.Cos(a), 0, 20 * math.Sin(a)}, Health: 10}})
	}
	return ts.view
}

type tconn struct {
	ts       *testServer
	srv      *session.Server
	grant    *handshake.Grant
	state    move.ControlState
	moves    uint64
	player   uint64
	consumed bool
	tab      *ghost.Table
	viewAt   time.Duration
}

func (c *tconn) Move(m move.Move) {
	c.state = move.Walk(c.state, m, m.Seconds())
	c.moves++
}

func (c *tconn) Event(e event.Event) {
	if z := c.ts.zone; z != nil && e.Class == event.Ordered {
		ok, fence := z.take(c.player, c.srv.EventGen(), e)
		if fence > 0 {
			c.srv.SetEventsApplied(e.Lane, fence)
		}
		if !ok {
			return // applied before (resent after a redirect): no echo
		}
	}
	c.ts.echoed++
	p := append([]byte("echo:"), e.Payload...)
	if e.Class == event.Ordered {
		c.srv.SendEvent(e.Lane, p)
	} else {
		c.srv.SendUnordered(p)
	}
}

func startServer(t testing.TB) *testServer { return startServerKey(t, nil) }

// startServerKey starts a server sharing key (nil: a fresh one), as the
// gateways of one cluster share the token key.
func startServerKey(t testing.TB, key *[handshake.KeySize]byte) *testServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, pc: pc, addr: pc.LocalAddr().(*net.UDPAddr).AddrPort(), start: time.Now(),
		stop: make(chan struct{}), done: make(chan struct{}),
		in: make(chan datagram, 4096), readDone: make(chan struct{}),
		byID: map[handshake.ConnID]*tconn{}, byAddr: map[netip.AddrPort]*tconn{}, ended: map[handshake.Reason]int{},
		kick: map[uint64]bool{}, reg: session.DefaultRegistry()}
	ts.npc, _ = ts.reg.Lookup(ghost.NPCClassID)
	crand.Read(ts.key[:])
	if key != nil {
		ts.key = *key
	}
	cfg := handshake.DefaultServerConfig()
	cfg.ProtocolID, cfg.Addr = protoID, ts.addr
	if ts.hs, err = handshake.NewServer(cfg, ts.key, time.Now().Add(-time.Second), crand.Reader); err != nil {
		t.Fatal(err)
	}
	go ts.read()
	go ts.run()
	return ts
}

// token mints a connect token for player.
func (ts *testServer) token(player uint64, mod ...func(*handshake.TokenParams)) []byte {
	p := handshake.TokenParams{PlayerID: player, ProtocolID: protoID, Expiry: time.Minute,
		Timeout: 10 * time.Second, ServerAddrs: []netip.AddrPort{ts.addr}}
	for _, f := range mod {
		f(&p)
	}
	tok, err := handshake.IssueToken(ts.key, p, time.Now(), crand.Reader)
	if err != nil {
		ts.t.Fatal(err)
	}
	return tok
}

func (ts *testServer) Stop() {
	close(ts.stop)
	<-ts.done
}

func (ts *testServer) now() time.Duration { return time.Since(ts.start) }

// read moves datagrams from the socket to ts.in until the socket closes.
// It does nothing else, so the kernel's receive buffer drains however long a
// round over the connections takes: with reading and the round in one
// goroutine, a starved host (load 14 on 2 cores under -race) let the buffer
// overflow for longer than a client's five Disconnect copies take, the
// kernel dropped all five (about 1,000 drops a run), and the server saw a
// Timeout instead of ClientQuit (TestManyClients).
func (ts *testServer) read() {
	defer close(ts.readDone)
	for {
		buf := make([]byte, 2048)
		n, from, err := ts.pc.ReadFrom(buf)
		if err != nil {
			return // closed by run
		}
		select {
		case ts.in <- datagram{p: buf[:n], from: from.(*net.UDPAddr).AddrPort()}:
		case <-ts.stop:
			return
		}
	}
}

// datagram is one datagram read, with its sender.
type datagram struct {
	p    []byte
	from netip.AddrPort
}

func (ts *testServer) run() {
	defer close(ts.done)
	defer func() { <-ts.readDone }()
	defer ts.pc.Close()
	out := make([]byte, 0, session.MaxPacketSize)
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		// Handle what has been read before the round over every
		// connection, waiting up to 2 ms for the first datagram.
		wait.Reset(2 * time.Millisecond)
		select {
		case <-ts.stop:
			return
		case d := <-ts.in:
			ts.mu.Lock()
			ts.handle(d.p, d.from, out)
			for range len(ts.in) {
				d := <-ts.in
				ts.handle(d.p, d.from, out)
			}
			ts.mu.Unlock()
		case <-wait.C:
		}
		ts.mu.Lock()
		now := ts.now()
		for id, c := range ts.byID {
			if ts.kick[c.player] {
				delete(ts.kick, c.player)
				c.srv.Close(now, handshake.ReasonKicked)
			}
			c.srv.SetControl(c.srv.LastApplied(), c.state)
			if now-c.viewAt >= 50*time.Millisecond { // the zone tick: a few NPCs walking in circles
				c.viewAt = now
				c.tab.SetView(now, ts.npcView(now))
			}
			for {
				pkt, err := c.srv.Poll(now, out[:0], c.tab)
				for _, f := range c.srv.PopGhostFates(ts.fates[:0]) {
					c.tab.OnFate(f)
				}
				if err != nil || len(pkt) == 0 {
					break
				}
				ts.pc.WriteTo(pkt, net.UDPAddrFromAddrPort(c.srv.Addr()))
			}
			if c.srv.Done() {
				ts.ended[c.srv.Reason()]++
				ts.hs.Consume(c.grant.Claims.ID)
				delete(ts.byID, id)
				delete(ts.byAddr, c.srv.Addr())
			}
		}
		ts.mu.Unlock()
	}
}

// handle routes one datagram (mu held).
func (ts *testServer) handle(p []byte, from netip.AddrPort, out []byte) {
	kind, err := handshake.Classify(p)
	if err != nil {
		return
	}
	now := ts.now()
	var c *tconn
	switch kind {
	case handshake.KindConnectRequest, handshake.KindChallengeResponse:
		reply, grant, _ := ts.hs.Handle(out[:0], p, from, time.Now(), handshake.LoadNormal)
		if len(reply) > 0 {
			ts.pc.WriteTo(reply, net.UDPAddrFromAddrPort(from))
		}
		if grant != nil {
			sess, err := grant.Session()
			if err != nil {
				return
			}
			c = &tconn{ts: ts, grant: grant, player: grant.Claims.PlayerID, viewAt: -time.Hour}
			if ts.ghostDelay > 0 {
				c.viewAt = now + ts.ghostDelay
			}
			if c.tab, err = ghost.NewTable(ts.reg, ghost.DefaultConfig()); err != nil {
				ts.t.Error(err)
				return
			}
			cfg := session.DefaultServerConfig()
			cfg.Timeout = grant.Claims.Timeout
			if c.srv, err = session.NewServer(sess, cfg, c, now); err != nil {
				ts.t.Error(err)
				return
			}
			ts.byID[grant.ID] = c
			ts.byAddr[from] = c
		}
		return
	case handshake.KindRouted:
		id, _, err := handshake.ParseRouted(p)
		if err != nil {
			return
		}
		c = ts.byID[id]
	case handshake.KindDisconnect:
		id, err := handshake.ParseDisconnectID(p)
		if err != nil {
			return
		}
		c = ts.byID[id]
	case handshake.KindData:
		c = ts.byAddr[from]
		if c == nil {
			if reply, err := handshake.AppendNoConnection(out[:0], p); err == nil {
				ts.pc.WriteTo(reply, net.UDPAddrFromAddrPort(from))
			}
			return
		}
	default:
		return
	}
	if c == nil {
		return
	}
	old := c.srv.Addr()
	if moved, _ := c.srv.Receive(now, p, from); moved {
		delete(ts.byAddr, old)
		ts.byAddr[c.srv.Addr()] = c
	}
	if !c.consumed && c.srv.State() != handshake.StatePending {
		ts.hs.Consume(c.grant.Claims.ID) // verified: the token opens nothing more
		c.consumed = true
	}
}

// snapshot returns the server's counters.
func (ts *testServer) snapshot() (conns int, ended map[handshake.Reason]int, echoed int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	e := make(map[handshake.Reason]int, len(ts.ended))
	for k, v := range ts.ended {
		e[k] = v
	}
	return len(ts.byID), e, ts.echoed
}

func (ts *testServer) kickPlayer(id uint64) {
	ts.mu.Lock()
	ts.kick[id] = true
	ts.mu.Unlock()
}

// echoOf is what the server sends back for payload.
func echoOf(p []byte) []byte { return append([]byte("echo:"), p...) }

// redirectAll sends every connection to other with a token other accepts
// (what gateway.RedirectAll does for a node's gateway).
func (ts *testServer) redirectAll(other *testServer) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for _, c := range ts.byID {
		tok := other.token(c.player, func(p *handshake.TokenParams) { p.Expiry = 30 * time.Second })
		if c.srv.Redirect(ts.now(), other.addr, tok) == nil {
			n++
		}
	}
	return n
}
