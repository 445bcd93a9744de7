package conn

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/udp"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/session"
)

// nodeTickAt is the zone's tick in client step i, if one falls in it:
// the multiple of 50 ms (a 20 Hz zone) in the step's 1/30 s, two steps in
// three (30 Hz clients).
func nodeTickAt(i int) (time.Duration, bool) {
	const period = 50 * time.Millisecond
	lo, hi := time.Duration(i)*benchStep, time.Duration(i+1)*benchStep
	t := (lo/period + 1) * period
	return t, t <= hi
}

// nodeSessionConfig is a node's session at a send rate just under the
// zone's tick (19 Hz against 20), so that the send slot after a tick's
// packet opens after the next tick, as it does on a node for a
// connection with ghosts in view (their hold, Server.holdUntil, keeps
// the slot shut until then): each tick sends one packet and the datagrams
// between send nothing (at 30 Hz both ways, as in
// BenchmarkShardReceiveCold, an ack-only packet follows every datagram,
// ≈ 2,000 instructions a node does not spend).
func nodeSessionConfig() session.ServerConfig {
	c := session.DefaultServerConfig()
	c.SendRate = 19
	return c
}

// recordNode records n client steps of 1/30 s as a node's shard meets
// them: the zone's Control at its tick when one falls in the step (its
// LastApplied the server's, 0.2 m on, forced: a packet every tick, as
// ghosts in view make on a node, where a tick with no new ack and no
// correction sent nothing and let the slot open for an ack-only packet)
// and the server polled (the tick's packet); then the client's datagrams
// (moves and acks) at the step's end, the server polled after each (the
// pump after its round). ctls is each step's control state.
func recordNode(tb testing.TB, n int) (x *recording, ctls []move.ControlState) {
	tb.Helper()
	cli := newBenchClient(tb)
	x = &recording{steps: make([][][]byte, n)}
	ctls = make([]move.ControlState, n)
	x.req, _ = cli.Poll(0, nil)
	sess, reply := grantFor(tb, x.req)
	if err := cli.Receive(0, reply); err != nil {
		tb.Fatal(err)
	}
	srv, err := session.NewServer(sess, nodeSessionConfig(), nil, 0)
	if err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, 0, udp.MaxDatagram)
	poll := func(now time.Duration) {
		for {
			p, _ := srv.Poll(now, buf[:0], nil)
			if len(p) == 0 {
				return
			}
			_ = cli.Receive(now, p)
		}
	}
	var state move.ControlState
	for i := range n {
		if at, ok := nodeTickAt(i); ok {
			state.Pos[0] += 0.2
			srv.SetControl(srv.LastApplied(), state)
			srv.ForceControl() // a packet every tick, as ghosts in view make on a node
			poll(at)
		}
		ctls[i] = state
		now := time.Duration(i+1) * benchStep
		for cli.InputDue(now) {
			_, _ = cli.Input(move.Move{Dt: 32, Forward: 90, Yaw: uint16(i * 64)})
		}
		for {
			p, _ := cli.Poll(now, buf[:0])
			if len(p) == 0 {
				break
			}
			x.steps[i] = append(x.steps[i], append([]byte(nil), p...))
			_, _ = srv.Receive(now, p, benchClient)
			poll(now)
		}
	}
	return x, ctls
}

// zoneSink is a zone as a process: it keeps the Inputs of a shard's round
// until those of the next round come (or tick), and releases them then, as
// a zone handles its mailbox's Inputs soon after each round sends them and
// lets them go — on a server on another core, their way back to the
// shard's InputCache through the returns stack.
type zoneSink struct {
	mu    sync.Mutex
	ins   []*msg.Input
	moves int
}

func (z *zoneSink) SendUserMessage(_ *actor.PID, m any) {
	z.mu.Lock()
	defer z.mu.Unlock()
	switch m := m.(type) {
	case *msg.Input:
		z.releaseLocked()
		z.ins = append(z.ins, m)
	case *msg.Inputs:
		z.releaseLocked()
		z.ins = append(z.ins, m.List...)
		m.ReleaseTaken()
	}
}
func (z *zoneSink) SendSystemMessage(*actor.PID, any) {}
func (z *zoneSink) Stop(*actor.PID)                   {}

func (z *zoneSink) releaseLocked() {
	for i, in := range z.ins {
		z.moves += len(in.Moves)
		in.Release()
		z.ins[i] = nil
	}
	z.ins = z.ins[:0]
}

// tick releases the Inputs the zone holds and reports how many moves the
// Inputs it released since the last tick carried.
func (z *zoneSink) tick() (moves int) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.releaseLocked()
	moves, z.moves = z.moves, 0
	return moves
}

// BenchmarkShardDatagramIn: a client datagram in, at a node's shape, over
// 2,048 connections (each one's state long out of the caches when its
// next datagram comes): clients at 30 Hz, the zone at 20 Hz, and each
// tick's packet the only one a connection sends (nodeSessionConfig; every
// Control forced, a packet every tick, as a node's ghosts make one). The
// shard benchmarks before it sent an ack-only packet after every datagram
// and dropped the Inputs. Each datagram is a compact copy from a reader's
// cache (msg.Datagram.CompactWith) that the shard's cache takes back; its
// moves go in an Input to the player's zone (zoneSink), which lets go of
// a round's Inputs when the next round's come; a tick's Controls come
// from the players' view slots, eight connections' in one ControlBatch
// list and round. A step's rounds run in time order: its tick's, if it
// has one, for every connection, then its datagrams', eight connections a
// round (a read batch of ≈ 16 on two shards). An op is one client
// datagram with its share of the ticks: compare counts of whole cycles of
// three steps (multiples of 6,144 ops), two of which tick. For the
// receive path alone read callgrind's inclusive count of
// conn.(*Conn).onDatagram. ns/pkt is per datagram in or out; out/in is
// what the node sends for each datagram it receives (≈ 0.67).
func BenchmarkShardDatagramIn(b *testing.B) { benchShardDatagramIn(b, false) }

// BenchmarkShardDatagramInShuffled is BenchmarkShardDatagramIn with the
// connections taken in a fixed random order, not the order they were
// made in. On a node a round's connections are whichever clients sent,
// scattered over the heap; in order of allocation, neighbours in a size
// class whose objects are not a whole number of lines (notify's 240-byte
// Conn) share a line, and the second one's touch of it hits: the
// in-order count flatters such an object by about a line each time a
// connection's state is cold. Compare layouts here.
func BenchmarkShardDatagramInShuffled(b *testing.B) { benchShardDatagramIn(b, true) }

func benchShardDatagramIn(b *testing.B, shuffle bool) {
	const conns, warm, steps, batch = 2048, 15, 96, 8
	x, ctls := recordNode(b, steps)
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	zone := &zoneSink{}
	zpid, _ := sys.ProcessRegistry.Add(zone, "zone")
	var rd msg.DatagramCache // the gateway reader's
	src := msg.NewDatagram()
	var cb msg.ControlBatch
	var ports []msg.ControlPort
	moves := 0
	// tick runs step i's tick, if it has one, for every connection.
	tick := func(s *shard, cs []*Conn, i int) {
		at, ok := nodeTickAt(i)
		if !ok {
			return
		}
		moves += zone.tick()
		for k0 := 0; k0 < len(cs); k0 += batch {
			for j, c := range cs[k0 : k0+batch] {
				m := c.views.NewControl()
				m.LastApplied, m.State, m.Force = c.srv.LastApplied(), ctls[i], true
				cb.Add(&ports[k0+j], m)
			}
			cb.Flush()
			s.round(at)
		}
	}
	// datagrams runs step i's datagrams of the connections cs.
	datagrams := func(s *shard, cs []*Conn, i int) {
		now := time.Duration(i+1) * benchStep
		for _, p := range x.steps[i] {
			for _, c := range cs {
				src.N = copy(src.Buf, p)
				src.Addr = benchClient
				s.post(c, src.CompactWith(&rd))
			}
			s.round(now)
		}
	}
	setup := func() (*shard, []*Conn) {
		s, cs := benchShardWith(b, x, conns, func(c *Config) { c.Session = nodeSessionConfig() })
		s.pool.sys = sys
		if shuffle {
			r := rand.New(rand.NewPCG(1, 2))
			r.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
		}
		ports = ports[:0]
		for _, c := range cs {
			c.zone = zpid
			ports = append(ports, c.port())
		}
		for i := range warm {
			tick(s, cs, i)
			for k := 0; k < conns; k += batch {
				datagrams(s, cs[k:k+batch], i)
			}
		}
		return s, cs
	}
	s, cs := setup()
	s.pool.sent.Store(0)
	i, k, pkts := warm, 0, 0
	var sent uint64
	moves = 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if k == len(cs) {
			k, i = 0, i+1
			if i == steps {
				b.StopTimer()
				sent += s.pool.sent.Load()
				s, cs = setup()
				s.pool.sent.Store(0)
				i = warm
				b.StartTimer()
			}
		}
		if k == 0 {
			tick(s, cs, i)
		}
		if k%batch == batch-1 {
			datagrams(s, cs[k+1-batch:k+1], i)
		}
		pkts += len(x.steps[i])
		k++
	}
	b.StopTimer()
	sent += s.pool.sent.Load()
	moves += zone.tick()
	if sent == 0 || moves == 0 {
		b.Fatalf("%d datagrams sent, %d moves to the zone", sent, moves)
	}
	for _, c := range cs {
		if st := c.srv.Stats(); st.Rejected() != 0 {
			b.Fatalf("replay diverged: %d rejected (%+v)", st.Rejected(), st.Counters)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pkts+int(sent)), "ns/pkt")
	b.ReportMetric(float64(sent)/float64(pkts), "out/in")
}
