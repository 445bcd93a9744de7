package gateway_test

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/gateway"
	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/session"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// quietSystem is an actor system that logs warnings only (protoactor logs
// every actor start at info level otherwise).
func quietSystem() *actor.ActorSystem {
	lvl := slog.LevelWarn
	if os.Getenv("GW_DEBUG") != "" {
		lvl = slog.LevelDebug
	}
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	}))
}

// ---------------------------------------------------------------------------
// A test zone: applies moves with move.Walk, echoes every event back to its
// sender on the same class and lane, and publishes one view per tick with
// every player it holds.

type zoneStats struct {
	mu       sync.Mutex
	joins    int
	leaves   map[handshake.Reason]int
	events   map[uint64][]string // per player, in arrival order
	moves    map[uint64]uint64   // per player: newest move seq applied
	badOrder int                 // a move out of sequence
	// loseNth > 0: the zone loses each player's loseNth Input that carries
	// moves (a batch lost on the way, as NATS may) and applies moves
	// strictly in sequence, waiting at a gap for the missing ones.
	loseNth    int
	inputsLost int
	conns      map[uint64]*actor.PID // per player: the connection of its newest Join
}

type testZone struct {
	st      *zoneStats
	next    *actor.PID // "move-me" hands the player to this zone
	players map[uint64]*zplayer
	handed  map[uint64]handoff.EventFence // fences of players handed here, for their Join
	stop    chan struct{}                 // ends the ticker goroutine; done when it has
	done    chan struct{}
	tick    uint64
	npcs    int
	reg     *ghost.Registry
	player  *ghost.Class
	npc     *ghost.Class
}

type zplayer struct {
	join   *msg.Join
	state  move.ControlState
	last   uint64
	inputs int // Inputs with moves seen
	events handoff.EventFence
}

// handedEvents goes to the next zone ahead of a handed player's Join: its
// event fence, which a real handoff's Commit carries.
type handedEvents struct {
	player uint64
	fence  handoff.EventFence
}

type zoneTick struct{}

func newTestZone(sys *actor.ActorSystem, st *zoneStats, reg *ghost.Registry, npcs int, next *actor.PID) *actor.PID {
	pc, _ := reg.Lookup(ghost.PlayerClassID)
	nc, _ := reg.Lookup(ghost.NPCClassID)
	props := actor.PropsFromProducer(func() actor.Actor {
		return &testZone{st: st, players: map[uint64]*zplayer{}, handed: map[uint64]handoff.EventFence{}, npcs: npcs, reg: reg, player: pc, npc: nc, next: next}
	})
	return sys.Root.Spawn(props)
}

func (z *testZone) Receive(ctx actor.Context) { z.receive(ctx, ctx.Message()) }

func (z *testZone) receive(ctx actor.Context, msgIn any) {
	switch m := msgIn.(type) {
	case *msg.Inputs: // a connection shard's round of inputs: each as it came
		for i, in := range m.List {
			m.List[i] = nil
			z.receive(ctx, in)
		}
		m.Release()
	case *actor.Started:
		// A ticker of its own, not protoactor's scheduler: its timer reads
		// its state without a lock while the cancel writes it (a data race
		// the race detector reported at shutdown, under load).
		z.stop, z.done = make(chan struct{}), make(chan struct{})
		go func(self *actor.PID, root *actor.RootContext, stop, done chan struct{}) {
			defer close(done)
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					root.Send(self, &zoneTick{})
				}
			}
		}(ctx.Self(), ctx.ActorSystem().Root, z.stop, z.done)
	case *actor.Stopping:
		close(z.stop)
		<-z.done
	case *handedEvents:
		z.handed[m.player] = m.fence
	case *msg.Join:
		z.players[m.Player] = &zplayer{join: m, last: m.LastApplied, events: z.handed[m.Player]}
		delete(z.handed, m.Player)
		z.st.mu.Lock()
		z.st.joins++
		z.st.conns[m.Player] = m.Conn
		z.st.mu.Unlock()
	case *msg.Leave:
		// Only the joined connection's Leave takes the player out, as
		// actors/zone does: a superseded login's Leave(Duplicate) goes when
		// the newer one is verified, so it comes after the newer Join, and
		// deleting on it dropped the newer client's echoes under load.
		if p := z.players[m.Player]; p != nil && (m.Conn == nil || p.join.Conn == nil || p.join.Conn.Equal(m.Conn)) {
			delete(z.players, m.Player)
		}
		z.st.mu.Lock()
		z.st.leaves[m.Reason]++
		z.st.mu.Unlock()
	case *msg.Input:
		p := z.players[m.Player]
		if p == nil {
			m.Release()
			return
		}
		z.st.mu.Lock()
		if len(m.Moves) > 0 {
			p.inputs++
		}
		if z.st.loseNth > 0 && p.inputs == z.st.loseNth && len(m.Moves) > 0 {
			z.st.inputsLost++
			z.st.mu.Unlock()
			m.Release()
			return
		}
		for _, mv := range m.Moves {
			if mv.Seq <= p.last {
				continue // already applied: a connection resends what a slow zone has not reported
			}
			if z.st.loseNth > 0 && mv.Seq != p.last+1 {
				break // wait for the missing ones
			}
			if mv.Seq != p.last+1 {
				z.st.badOrder++
			}
			p.last = mv.Seq
			p.state = move.Walk(p.state, mv, mv.Seconds())
		}
		z.st.moves[m.Player] = p.last
		// Numbered ordered events go through the player's fence, as in
		// actors/zone: a connection sends the new owner again those the
		// old one has not reported applied.
		n := 0
		for _, e := range m.Events {
			if e.Class == event.Ordered && e.Seq != 0 && !p.events.Take(m.EventGen, int(e.Lane), e.Seq) {
				continue
			}
			m.Events[n] = e
			n++
		}
		m.Events = m.Events[:n]
		for _, e := range m.Events {
			z.st.events[m.Player] = append(z.st.events[m.Player], string(e.Payload))
		}
		z.st.mu.Unlock()
		for _, e := range m.Events {
			switch string(e.Payload) {
			case "kick-me":
				ctx.Send(p.join.Conn, &msg.Kick{Player: m.Player, Reason: handshake.ReasonKicked})
			case "move-me":
				// A handoff, reduced to its effect on the connection: the next
				// zone learns the player, then the connection is redirected.
				j := *p.join
				j.LastApplied = p.last
				ctx.Send(z.next, &handedEvents{player: m.Player, fence: p.events})
				ctx.Send(z.next, &j)
				ctx.Send(p.join.Conn, &msg.Redirect{Player: m.Player, Zone: z.next, Epoch: 1})
				delete(z.players, m.Player)
			}
		}
		if len(m.Events) > 0 {
			o := msg.NewOutput()
			o.Player = m.Player
			for _, e := range m.Events {
				o.Add(e.Class, e.Lane, e.Key, e.Payload)
			}
			ctx.Send(p.join.Conn, o)
		}
		m.Release()
	case *zoneTick:
		z.tick++
		for id, p := range z.players {
			c := msg.NewControl()
			c.Player, c.LastApplied, c.State, c.Tick = id, p.last, p.state, z.tick
			ctx.Send(p.join.Conn, c)
			v := msg.NewView()
			v.Player, v.Tick = id, z.tick
			// The player itself and a few NPCs: a real zone's interest set,
			// not everyone (200 × 200 entries a tick would swamp a race build).
			var s ghost.State
			s.Pos = [3]float64{float64(p.state.Pos[0]), float64(p.state.Pos[1]), float64(p.state.Pos[2])}
			v.Entries = append(v.Entries, ghost.ViewEntry{Entity: id, Class: z.player, Priority: 1, State: s})
			for n := range z.npcs {
				var s ghost.State
				s.Pos = [3]float64{float64(n), 0, float64(z.tick % 100)}
				v.Entries = append(v.Entries, ghost.ViewEntry{Entity: 1<<40 + uint64(n), Class: z.npc, Priority: 0.5, State: s})
			}
			if p.join.Views.Publish(v) {
				ctx.Send(p.join.Ghosts, msg.ViewReadyMsg)
			}
		}
	}
}

func newZoneStats() *zoneStats {
	return &zoneStats{leaves: map[handshake.Reason]int{}, events: map[uint64][]string{}, moves: map[uint64]uint64{},
		conns: map[uint64]*actor.PID{}}
}

// ---------------------------------------------------------------------------
// A test client: session.Client over its own UDP socket, optionally through
// a netsim link in each direction.

type tclient struct {
	id     uint64
	c      *session.Client
	sock   *net.UDPConn
	server netip.AddrPort
	start  time.Time
	up     *netsim.Link // client → server (nil: direct)
	down   *netsim.Link // server → client

	mu     sync.Mutex
	got    []string // events received, in order
	sentAt int      // events queued so far

	connectedAt atomic.Int64
	maxGhosts   int // most ghosts the client's mirror held at once
	// onSend, if set, sees every datagram the client sends (copy to keep).
	onSend func(p []byte)
	// hold, set by the script, keeps the client from sending (Poll) while
	// it still reads and takes input: its sequence number stands still.
	hold bool
}

func (tc *tclient) Event(e event.Event) {
	tc.mu.Lock()
	tc.got = append(tc.got, string(e.Payload))
	tc.mu.Unlock()
}

func (tc *tclient) received() []string {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return append([]string(nil), tc.got...)
}

func newClient(t testing.TB, id uint64, tok []byte, server netip.AddrPort, start time.Time, link *netsim.Config, seed uint64) *tclient {
	t.Helper()
	sock, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	_ = sock.SetReadBuffer(1 << 20)
	tc := &tclient{id: id, sock: sock, server: server, start: start}
	cfg := session.DefaultClientConfig()
	c, err := session.NewClient(tok, server, cfg, tc, time.Now(), time.Since(start))
	if err != nil {
		t.Fatal(err)
	}
	tc.c = c
	if link != nil {
		up, down := *link, *link
		up.Seed, down.Seed = seed*2+1, seed*2+2
		if tc.up, err = netsim.NewLink(up); err != nil {
			t.Fatal(err)
		}
		if tc.down, err = netsim.NewLink(down); err != nil {
			t.Fatal(err)
		}
	}
	return tc
}

// script is called by run on every loop turn, inside the client's goroutine.
type script func(tc *tclient, now time.Duration)

// run drives the client until it closed or ctx ends. Every call into the
// client happens on this goroutine.
func (tc *tclient) run(ctx context.Context, s script) error {
	defer func() { tc.sock.Close() }() // the script may have swapped sockets
	buf := make([]byte, 0, 1500)
	rbuf := make([]byte, 1500)
	now := func() time.Duration { return time.Since(tc.start) }
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t := now()
		if s != nil {
			s(tc, t)
		}
		if tc.c.State() == handshake.StateConnected {
			tc.maxGhosts = max(tc.maxGhosts, tc.c.Mirror().Len())
			if tc.connectedAt.Load() == 0 {
				tc.connectedAt.Store(int64(t))
			}
			for tc.c.InputDue(t) {
				if _, err := tc.c.Input(move.Move{Dt: 32, Forward: 60, Yaw: uint16(tc.id * 100)}); err != nil {
					return err
				}
			}
		}
		for !tc.hold {
			out, _ := tc.c.Poll(t, buf[:0])
			if len(out) == 0 {
				break
			}
			if tc.onSend != nil {
				tc.onSend(out)
			}
			if tc.up != nil {
				tc.up.Send(t, out)
			} else if _, err := tc.sock.WriteToUDPAddrPort(out, tc.server); err != nil {
				return err
			}
		}
		if tc.up != nil {
			tc.up.Deliver(t, func(p []byte) { _, _ = tc.sock.WriteToUDPAddrPort(p, tc.server) })
			tc.down.Deliver(t, func(p []byte) { _ = tc.c.Receive(t, p) })
		}
		if tc.c.State() == handshake.StateClosed && (tc.up == nil || tc.up.Pending() == 0) {
			return tc.c.Err()
		}
		wake := min(tc.c.NextDeadline(t), t+20*time.Millisecond)
		if tc.c.State() == handshake.StateConnected {
			wake = min(wake, t+33*time.Millisecond)
		}
		if tc.up != nil {
			if at, ok := tc.up.NextDelivery(); ok {
				wake = min(wake, at)
			}
			if at, ok := tc.down.NextDelivery(); ok {
				wake = min(wake, at)
			}
		}
		if wake <= t {
			wake = t + 200*time.Microsecond
		}
		_ = tc.sock.SetReadDeadline(tc.start.Add(wake))
		for {
			n, _, err := tc.sock.ReadFromUDPAddrPort(rbuf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					break
				}
				return err
			}
			at := now()
			if tc.down != nil {
				tc.down.Send(at, rbuf[:n])
			} else {
				_ = tc.c.Receive(at, rbuf[:n])
			}
			// Drain what else is queued without waiting.
			_ = tc.sock.SetReadDeadline(time.Now())
		}
	}
}

// ---------------------------------------------------------------------------
// Gateway setup.

type rig struct {
	sys   *actor.ActorSystem
	gw    *gateway.Gateway
	key   tokenkey.Key
	zone  *actor.PID
	zst   *zoneStats
	start time.Time
	// zone2 takes players the first zone hands off ("move-me").
	zone2   *actor.PID
	zone2st *zoneStats
}

func newRig(t testing.TB, mutate func(*gateway.Config)) *rig {
	t.Helper()
	return newRigNPCs(t, 3, mutate)
}

// newRigNPCs is newRig with npcs NPCs in every player's view.
func newRigNPCs(t testing.TB, npcs int, mutate func(*gateway.Config)) *rig {
	t.Helper()
	key, err := tokenkey.Generate(crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sys := quietSystem()
	zst := newZoneStats()
	cfg := gateway.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Key = key
	// Every test client shares 127.0.0.1's /24 bucket.
	cfg.RateLimit.Burst = 100000
	cfg.RateLimit.Interval = time.Microsecond
	cfg.RateLimit.GlobalBurst = 100000
	cfg.RateLimit.GlobalInterval = time.Microsecond
	zone2st := newZoneStats()
	zone2 := newTestZone(sys, zone2st, cfg.Conn.Registry, npcs, nil)
	zone := newTestZone(sys, zst, cfg.Conn.Registry, npcs, zone2)
	cfg.Zone = func(uint64, []byte) *actor.PID { return zone }
	if mutate != nil {
		mutate(&cfg)
	}
	gw, err := gateway.New(context.Background(), sys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{sys: sys, gw: gw, key: key, zone: zone, zst: zst, zone2: zone2, zone2st: zone2st, start: time.Now()}
}

func (r *rig) token(t testing.TB, player uint64) []byte {
	t.Helper()
	return r.tokenTimeout(t, player, 10*time.Second)
}

func (r *rig) tokenTimeout(t testing.TB, player uint64, timeout time.Duration) []byte {
	t.Helper()
	tok, err := handshake.IssueToken(r.key, handshake.TokenParams{
		PlayerID: player, ProtocolID: tokenkey.DefaultProtocolID, Expiry: time.Minute,
		Timeout: timeout, ServerAddrs: []netip.AddrPort{r.gw.PublicAddr()},
		UserData: []byte(fmt.Sprint("player-", player)),
	}, time.Now(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (r *rig) close(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.gw.Close(ctx); err != nil {
		t.Errorf("gateway close: %v", err)
	}
	_ = r.sys.Root.StopFuture(r.zone).Wait()
	_ = r.sys.Root.StopFuture(r.zone2).Wait()
	r.sys.Shutdown()
}

// eventually polls cond every 10 ms until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
