// Package fakezone is a stand-in zone server for botswarm's tests and for
// measuring botswarm on its own, built from the same pure parts the real
// gateway, connection actors and zone use: a handshake.Server, one
// session.Server and ghost.Table per player, and a 20 Hz tick that applies
// moves with move.Walk, echoes lane-0 events and shows each player other
// players (entity id = player id; the move sequence each state reflects in
// Extra[0..1]). It reads and writes in batches (batchudp: recvmmsg with
// UDP_GRO, sendmmsg with UDP_SEGMENT) and keeps its connections in a
// deadline heap, so one core serves thousands of bots.
// Faults can be switched on to prove the bots notice them.
//
// It is not a game server: no zones, no interest management, no NPCs.
package fakezone

import (
	"bytes"
	crand "crypto/rand"
	"errors"
	"net/netip"
	"sync"
	"time"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/batchudp"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/session"
	"github.com/ghostwire/ghostwire/zones/world"
)

// Options switch faults on and tune the server.
type Options struct {
	Listen     string // UDP address; default 127.0.0.1:0
	Key        *[handshake.KeySize]byte
	ProtocolID uint64
	Tick       time.Duration
	Bandwidth  int // per-connection bytes/s; 0: session default
	Peers      int // players each player sees; 0: all (quadratic: tests only); < 0: none
	NoEcho     bool
	// Watch picks the players shown others (nil: all). botswarm's bots
	// that are no observers skip the ghost section: sending them none
	// spares the server the ghosts' encoding, not the bots any work.
	Watch        func(pid uint64) bool
	NoSeq        bool // leave Extra empty: the bots fall back to server time
	CorruptEvery int  // flip a byte in every n-th echo
	DupEvery     int  // echo every n-th event twice
	DoubleMoveAt int  // apply the n-th move of each player twice (a broken applier)
	// StallCrossings: when a player's position crosses a zone border of
	// World (default world.Default()), acknowledge none of its moves for
	// this long — a stalled handoff.
	StallCrossings time.Duration
	World          *world.World
	// KickAt: once this long after Start, close every connected session
	// with a Disconnect saying Kicked (as an operator's kick would); the
	// players may connect again.
	KickAt time.Duration
	// HoldConnects: connection requests that come within this long after
	// Start go unanswered, as a server's limit on new connections holds
	// them back; the clients' resends are answered after it.
	HoldConnects time.Duration
	// Unplaced picks players whose connections are taken but who are
	// never placed, as zoned's gateway does when the zone refuses the
	// player's join or its restore from the record: the session stays up
	// and its datagrams flow, but no state, acknowledgement or echo ever
	// comes (nil: none).
	Unplaced func(pid uint64) bool
	// NoGRO: read without UDP_GRO, as zoned's gateway does — the bots'
	// UDP_SEGMENT groups are then cut up by the kernel in the bots' sends
	// (on loopback), which a GRO reader spares them.
	NoGRO bool
}

// ProtocolID is the fake server's default protocol id.
const ProtocolID = 0x4657_7465_7374 // "FWtest"

// Zone is the fake server. Start one with Start; Close stops it.
type Zone struct {
	Addr netip.AddrPort
	Key  [handshake.KeySize]byte

	sock  *batchudp.Conn
	w     *batchudp.Writer
	hs    *handshake.Server
	reg   *ghost.Registry
	class *ghost.Class
	start time.Time
	opts  Options

	conns []*conn // in join order
	byAdr map[netip.AddrPort]*conn
	byID  map[handshake.ConnID]*conn
	heap  []*conn
	view  []ghost.ViewEntry
	due   []*conn // tick's scratch
	mine  []ghost.ViewEntry

	in   chan *batchudp.Batch
	free chan *batchudp.Batch
	rnow time.Duration                // receive's now, for each
	each func([]byte, netip.AddrPort) // receive bound once (no closure per batch)
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	kicked bool // KickAt has passed

	mu       sync.Mutex
	maxConns int
	echoes   int
}

// batchMsgs is how many super-datagrams one recvmmsg takes (each up to 64
// KiB: a bot worker's turn of equal datagrams), batches how many such
// reads may wait for the loop, and writeQueue how many datagrams a flush
// groups (a tick's burst: the more, the larger the groups of one size).
const (
	batchMsgs  = 16
	batches    = 16
	writeQueue = 1024
)

type conn struct {
	z        *Zone
	srv      *session.Server
	tab      *ghost.Table
	pid      uint64
	blind    bool // not Watched: shown no one
	state    move.ControlState
	applied  uint64
	moves    int
	fates    []notify.Fate
	echoN    int
	wake     time.Duration
	hi       int
	gone     bool
	zone     *world.Zone   // StallCrossings: the zone the player was in
	stall    time.Duration // StallCrossings: no acknowledgement before this
	unplaced bool          // Options.Unplaced: no state, no echo
}

// Start listens and serves until Close.
func Start(opts Options) (*Zone, error) {
	if opts.ProtocolID == 0 {
		opts.ProtocolID = ProtocolID
	}
	if opts.Tick == 0 {
		opts.Tick = 50 * time.Millisecond
	}
	if opts.StallCrossings > 0 && opts.World == nil {
		opts.World = world.Default()
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	s, err := batchudp.Listen(opts.Listen)
	if err != nil {
		return nil, err
	}
	s.SetBuffers(8<<20, 8<<20)
	if opts.NoGRO {
		s.DisableGRO()
	}
	z := &Zone{Addr: s.LocalAddr(), sock: s, w: s.NewWriter(writeQueue), opts: opts, start: time.Now(),
		byAdr: map[netip.AddrPort]*conn{}, byID: map[handshake.ConnID]*conn{},
		in: make(chan *batchudp.Batch, batches), free: make(chan *batchudp.Batch, batches), done: make(chan struct{})}
	z.each = func(p []byte, from netip.AddrPort) { z.receive(z.rnow, p, from) }
	if opts.Key != nil {
		z.Key = *opts.Key
	} else {
		for i := range z.Key {
			z.Key[i] = byte(i*7 + 1)
		}
	}
	hc := handshake.DefaultServerConfig()
	hc.ProtocolID, hc.Addr = opts.ProtocolID, z.Addr
	if z.hs, err = handshake.NewServer(hc, z.Key, time.Now(), crand.Reader); err != nil {
		s.Close()
		return nil, err
	}
	z.reg = session.DefaultRegistry()
	z.class, _ = z.reg.Lookup(ghost.PlayerClassID)
	for range cap(z.free) {
		z.free <- batchudp.NewBatch(batchMsgs, 0)
	}
	z.wg.Add(2)
	go z.read()
	go z.loop()
	return z, nil
}

// Close stops the server and waits for its goroutines. Safe to call twice.
func (z *Zone) Close() {
	z.once.Do(func() {
		close(z.done)
		z.sock.Close()
		z.wg.Wait()
	})
}

// Stats returns the most connections held at once and the echoes sent.
func (z *Zone) Stats() (maxConns, echoes int) {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.maxConns, z.echoes
}

func (z *Zone) now() time.Duration { return time.Since(z.start) }

func (z *Zone) read() {
	defer z.wg.Done()
	for {
		var b *batchudp.Batch
		select {
		case b = <-z.free:
		case <-z.done:
			return
		}
		if err := z.sock.ReadBatch(b); err != nil {
			if errors.Is(err, batchudp.ErrClosed) {
				return
			}
			z.free <- b
			continue
		}
		select {
		case z.in <- b:
		case <-z.done:
			return
		}
	}
}

func (z *Zone) loop() {
	defer z.wg.Done()
	timer := time.NewTimer(time.Millisecond)
	defer timer.Stop()
	nextTick := z.now()
	for {
		now := z.now()
		wait := nextTick - now
		if len(z.heap) > 0 {
			wait = min(wait, z.heap[0].wake-now)
		}
		wait = max(wait, 0)
		timer.Reset(wait)
		select {
		case <-z.done:
			return
		case b := <-z.in:
			z.rnow = z.now()
			b.Each(z.each)
			z.free <- b
			// Take what else is queued, but not past the tick: a server
			// that cannot keep up with its input must still tick and send
			// (and let the socket drop what it cannot read), not read its
			// backlog for seconds with nothing sent — as it did, 0 datagrams
			// to 5,000 bots for whole seconds on a busy host.
		drain:
			for range batches {
				if z.now() >= nextTick {
					break
				}
				select {
				case b := <-z.in:
					z.rnow = z.now()
					b.Each(z.each)
					z.free <- b
				default:
					break drain
				}
			}
		case <-timer.C:
		}
		now = z.now()
		if now >= nextTick {
			z.tick(now)
			nextTick += z.opts.Tick
			if nextTick < now {
				nextTick = now + z.opts.Tick
			}
		}
		for len(z.heap) > 0 && z.heap[0].wake <= now {
			c := z.heap[0]
			z.poll(c, now)
			if c.gone {
				continue
			}
			c.wake = c.srv.NextDeadline(now)
			if c.wake <= now {
				c.wake = now + time.Millisecond // Poll said nothing is due: look again soon
			}
			z.down(c.hi)
		}
		z.flush()
	}
}

// poll sends what c has due and drops it when it is done.
func (z *Zone) poll(c *conn, now time.Duration) {
	for {
		p, err := c.srv.Poll(now, z.w.Slot(), c.tab)
		c.fates = c.srv.PopGhostFates(c.fates[:0])
		for _, f := range c.fates {
			c.tab.OnFate(f)
		}
		if err != nil || len(p) == 0 {
			break
		}
		z.w.Commit(p, c.srv.Addr())
	}
	if c.srv.Done() {
		z.drop(c)
	}
}

func (z *Zone) flush() { z.w.Flush() }

func (z *Zone) drop(c *conn) {
	c.gone = true
	z.remove(c.hi)
	if z.byAdr[c.srv.Addr()] == c {
		delete(z.byAdr, c.srv.Addr())
	}
	delete(z.byID, c.srv.ID())
	for i, x := range z.conns {
		if x == c {
			z.conns = append(z.conns[:i], z.conns[i+1:]...)
			break
		}
	}
}

func (z *Zone) receive(now time.Duration, p []byte, from netip.AddrPort) {
	kind, err := handshake.Classify(p)
	if err != nil {
		return
	}
	switch kind {
	case handshake.KindConnectRequest, handshake.KindChallengeResponse:
		if now >= z.opts.HoldConnects {
			z.handshake(now, p, from)
		}
		return
	}
	// The long form and Disconnect name their connection (bots sharing a
	// socket share an address); the short form is routed by address.
	var c *conn
	switch kind {
	case handshake.KindRouted:
		if id, _, err := handshake.ParseRouted(p); err == nil {
			c = z.byID[id]
		}
	case handshake.KindDisconnect:
		if id, err := handshake.ParseDisconnectID(p); err == nil {
			c = z.byID[id]
		}
	default:
		c = z.byAdr[from]
	}
	if c == nil {
		return
	}
	old := c.srv.Addr()
	moved, _ := c.srv.Receive(now, p, from)
	if moved {
		if z.byAdr[old] == c {
			delete(z.byAdr, old)
		}
		z.byAdr[c.srv.Addr()] = c
	}
	if w := c.srv.NextDeadline(now); w < c.wake {
		c.wake = w
		z.up(c.hi)
	}
}

func (z *Zone) handshake(now time.Duration, p []byte, from netip.AddrPort) {
	reply, grant, _ := z.hs.Handle(z.w.Slot(), p, from, time.Now(), handshake.LoadNormal)
	if len(reply) > 0 {
		z.w.Commit(reply, from)
	}
	if grant == nil {
		return
	}
	sess, err := grant.Session()
	if err != nil {
		return
	}
	cfg := session.DefaultServerConfig()
	cfg.Timeout = grant.Claims.Timeout
	if z.opts.Bandwidth > 0 {
		cfg.Bandwidth = z.opts.Bandwidth
	}
	c := &conn{z: z, pid: grant.Claims.PlayerID}
	c.blind = z.opts.Watch != nil && !z.opts.Watch(c.pid)
	c.unplaced = z.opts.Unplaced != nil && z.opts.Unplaced(c.pid)
	if c.srv, err = session.NewServer(sess, cfg, c, now); err != nil {
		return
	}
	if c.tab, err = ghost.NewTable(z.reg, ghost.DefaultConfig()); err != nil {
		return
	}
	z.hs.Consume(grant.Claims.ID)
	z.byAdr[from] = c
	z.byID[grant.ID] = c
	z.conns = append(z.conns, c)
	c.wake = now
	c.hi = len(z.heap)
	z.heap = append(z.heap, c)
	z.up(c.hi)
	z.mu.Lock()
	z.maxConns = max(z.maxConns, len(z.conns))
	z.mu.Unlock()
}

func (c *conn) Move(m move.Move) {
	c.moves++
	c.state = move.Walk(c.state, m, m.Seconds())
	if c.z.opts.DoubleMoveAt > 0 && c.moves == c.z.opts.DoubleMoveAt {
		c.state = move.Walk(c.state, m, m.Seconds())
	}
	c.applied = m.Seq
}

func (c *conn) Event(e event.Event) {
	o := c.z.opts
	if o.NoEcho || c.unplaced || e.Class != event.Ordered || e.Lane != 0 {
		return
	}
	c.echoN++
	p := e.Payload
	if o.CorruptEvery > 0 && c.echoN%o.CorruptEvery == 0 && len(p) > 10 {
		p = bytes.Clone(p)
		p[10] ^= 0xff
	}
	_ = c.srv.SendEvent(0, p)
	if o.DupEvery > 0 && c.echoN%o.DupEvery == 0 {
		_ = c.srv.SendEvent(0, p)
	}
	c.z.mu.Lock()
	c.z.echoes++
	c.z.mu.Unlock()
}

// tick acknowledges moves and shows players to each other; every connection
// then has a packet due, which it sends at once. The deadline heap is
// rebuilt once afterwards rather than each connection moved to its top
// and back (two sifts through the heap per connection and tick touched a
// cold connection at every level: ≈ 10 % of the server's CPU at 2,000
// players).
func (z *Zone) tick(now time.Duration) {
	if z.opts.KickAt > 0 && !z.kicked && now >= z.opts.KickAt {
		z.kicked = true
		for _, c := range z.conns {
			if c.srv.State() == handshake.StateConnected {
				c.srv.Close(now, handshake.ReasonKicked) // Poll sends the Disconnect copies
			}
		}
	}
	z.view = z.view[:0]
	for _, c := range z.conns {
		st := ghost.State{Pos: [3]float64{float64(c.state.Pos[0]), float64(c.state.Pos[1]), float64(c.state.Pos[2])}}
		if !z.opts.NoSeq {
			st.Extra[0], st.Extra[1] = uint32(c.applied), uint32(c.applied>>32)
		}
		z.view = append(z.view, ghost.ViewEntry{Entity: c.pid, Class: z.class, Priority: 1, State: st})
	}
	n := len(z.conns)
	for i, c := range z.conns {
		if c.srv.State() != handshake.StateConnected {
			continue
		}
		if z.opts.StallCrossings > 0 {
			x, y := float64(c.state.Pos[0]), float64(c.state.Pos[2])
			if c.zone == nil || !c.zone.Contains(x, y) {
				if nz, ok := z.opts.World.ZoneAt(x, y); ok {
					if c.zone != nil && c.applied > 0 {
						c.stall = now + z.opts.StallCrossings
					}
					c.zone = nz
				}
			}
		}
		if c.applied > 0 && now >= c.stall && !c.unplaced {
			c.srv.SetControl(c.applied, c.state)
		}
		z.mine = z.mine[:0]
		k := n - 1
		if z.opts.Peers != 0 {
			k = max(min(k, z.opts.Peers), 0)
		}
		if c.blind {
			k = 0
		}
		for j := 1; j <= k; j++ {
			e := z.view[(i+j)%n]
			if z.conns[(i+j)%n].applied > 0 {
				z.mine = append(z.mine, e)
			}
		}
		_ = c.tab.SetView(now, z.mine)
		z.due = append(z.due, c)
	}
	// Poll after the loop: a poll may drop its connection from z.conns.
	for _, c := range z.due {
		z.poll(c, now)
		if !c.gone {
			c.wake = c.srv.NextDeadline(now)
			if c.wake <= now {
				c.wake = now + time.Millisecond
			}
		}
	}
	clear(z.due)
	z.due = z.due[:0]
	for i := len(z.heap)/2 - 1; i >= 0; i-- {
		z.down(i)
	}
}

// Heap on wake.
func (z *Zone) less(i, j int) bool { return z.heap[i].wake < z.heap[j].wake }
func (z *Zone) swap(i, j int) {
	z.heap[i], z.heap[j] = z.heap[j], z.heap[i]
	z.heap[i].hi, z.heap[j].hi = i, j
}
func (z *Zone) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !z.less(i, p) {
			return
		}
		z.swap(i, p)
		i = p
	}
}
func (z *Zone) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(z.heap) {
			return
		}
		m := l
		if r := l + 1; r < len(z.heap) && z.less(r, l) {
			m = r
		}
		if !z.less(m, i) {
			return
		}
		z.swap(i, m)
		i = m
	}
}
func (z *Zone) remove(i int) {
	n := len(z.heap) - 1
	if i != n {
		z.swap(i, n)
	}
	z.heap[n] = nil
	z.heap = z.heap[:n]
	if i < n {
		z.down(i)
		z.up(i)
	}
}
