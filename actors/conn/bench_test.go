package conn

import (
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/actors/udp"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/session"
)

var (
	benchServer = netip.MustParseAddrPort("10.0.0.1:7777")
	benchClient = netip.MustParseAddrPort("10.0.0.2:40000")
	benchKey    = tokenkey.Key{1, 2, 3, 4, 5, 6, 7, 8}
	benchWall   = time.Unix(1_700_000_000, 0)
)

const benchStep = time.Second / 30

func seeded(seed uint64) io.Reader { return rand.NewChaCha8([32]byte{byte(seed)}) }

func benchSessionConfig() session.ServerConfig {
	c := session.DefaultServerConfig()
	c.SendRate = 30 // one packet each way per step
	return c
}

// grantFor replays the handshake of req from a seeded source: every call
// gives a session with the same connection id and keys.
func grantFor(tb testing.TB, req []byte) (*handshake.Session, []byte) {
	tb.Helper()
	hs := handshake.DefaultServerConfig()
	hs.Addr, hs.ProtocolID = benchServer, tokenkey.DefaultProtocolID
	hs.GuardCapacity = 64
	srv, err := handshake.NewServer(hs, benchKey, benchWall.Add(-time.Minute), seeded(7))
	if err != nil {
		tb.Fatal(err)
	}
	reply, grant, err := srv.Handle(nil, req, benchClient, benchWall, handshake.LoadNormal)
	if err != nil || grant == nil {
		tb.Fatalf("handshake: %v", err)
	}
	sess, err := grant.Session()
	if err != nil {
		tb.Fatal(err)
	}
	return sess, reply
}

// recording is what one client sent, step by step, to a server that
// answered every step (moves at 30 Hz, acks both ways).
type recording struct {
	req   []byte
	steps [][][]byte
}

func record(tb testing.TB, n int) *recording {
	tb.Helper()
	return recordWith(tb, n, true, nil)
}

// recordTicking is record for a replay whose connection sends a packet
// every step (its ticks bring views, so ghosts are pending at each): the
// recording's server does too, forcing its control state in a step whose
// tick brings no new ack (the client's packet an ack alone). Else that
// step's ack waits for the next tick there, no packet goes, and the
// client's later acks name packets a step off the replay's.
func recordTicking(tb testing.TB, n int) *recording {
	tb.Helper()
	return recordOpts(tb, n, true, nil, true, nil)
}

// newBenchClient is player 7's client with a token for benchServer, before
// its first Poll: the recordings' one client.
func newBenchClient(tb testing.TB) *session.Client {
	tb.Helper()
	tok, err := handshake.IssueToken(benchKey, handshake.TokenParams{
		PlayerID: 7, ProtocolID: tokenkey.DefaultProtocolID, Expiry: time.Hour, Timeout: 10 * time.Second,
		ServerAddrs: []netip.AddrPort{benchServer},
	}, benchWall, seeded(5))
	if err != nil {
		tb.Fatal(err)
	}
	cli, err := session.NewClient(tok, benchServer, session.DefaultClientConfig(), nil, benchWall, 0)
	if err != nil {
		tb.Fatal(err)
	}
	return cli
}

// recordWith is record with the client's moves only if moves is set (else
// it sends acks alone), and the server's datagrams of each step for which
// lose reports true (if not nil) lost on their way to the client.
func recordWith(tb testing.TB, n int, moves bool, lose func(step int) bool) *recording {
	tb.Helper()
	return recordOpts(tb, n, moves, lose, false, nil)
}

// recordOpts is recordWith, with the control state forced in each step
// that brings no new ack if every is set (recordTicking), and the client's
// datagrams of each step for which cut reports true (if not nil) lost on
// their way to the server: neither received nor recorded.
func recordOpts(tb testing.TB, n int, moves bool, lose func(step int) bool, every bool, cut func(step int) bool) *recording {
	tb.Helper()
	cli := newBenchClient(tb)
	req, _ := cli.Poll(0, nil)
	sess, reply := grantFor(tb, req)
	if err := cli.Receive(0, reply); err != nil {
		tb.Fatal(err)
	}
	srv, err := session.NewServer(sess, benchSessionConfig(), nil, 0)
	if err != nil {
		tb.Fatal(err)
	}
	x := &recording{req: req, steps: make([][][]byte, n)}
	buf := make([]byte, 0, udp.MaxDatagram)
	var state move.ControlState
	applied := uint64(1<<64 - 1) // none yet: the first step's ack is new
	for i := range n {
		now := time.Duration(i+1) * benchStep
		for moves && cli.InputDue(now) {
			_, _ = cli.Input(move.Move{Dt: 32, Forward: 90, Yaw: uint16(i * 64)})
		}
		for {
			p, _ := cli.Poll(now, buf[:0])
			if len(p) == 0 {
				break
			}
			if cut != nil && cut(i) {
				continue
			}
			x.steps[i] = append(x.steps[i], append([]byte(nil), p...))
			_, _ = srv.Receive(now, p, benchClient)
		}
		state.Pos[0] += 0.2
		fresh := srv.LastApplied() != applied
		applied = srv.LastApplied()
		srv.SetControl(applied, state)
		if !moves || (every && !fresh) {
			srv.ForceControl() // a data packet each step all the same (the replay's zone forces too)
		}
		for {
			p, _ := srv.Poll(now, buf[:0], nil)
			if len(p) == 0 {
				break
			}
			if lose == nil || !lose(i) {
				_ = cli.Receive(now, p)
			}
		}
	}
	return x
}

// nowhere is a shard writer that sends nothing.
type nowhere struct{}

func (nowhere) WriteBatch(ms []udp.Message) (int, error) { return len(ms), nil }

// benchShard is one shard without its goroutine, and n connections on it
// that replay the same recording (same keys: each accepts every packet).
func benchShard(tb testing.TB, x *recording, n int) (*shard, []*Conn) {
	tb.Helper()
	return benchShardWith(tb, x, n, nil)
}

// benchShardWith is benchShard with the connections' config changed by
// tune, if not nil.
func benchShardWith(tb testing.TB, x *recording, n int, tune func(*Config)) (*shard, []*Conn) {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Session = benchSessionConfig()
	if tune != nil {
		tune(&cfg)
	}
	p := &Pool{cfg: PoolConfig{Config: cfg, WriteBatch: 64}, counters: new(Counters), log: slog.New(slog.DiscardHandler)}
	s := &shard{pool: p, w: nowhere{}, out: make([]byte, 64*udp.MaxDatagram), ms: make([]udp.Message, 0, 64)}
	s.cq.Taker = s
	p.shards = []*shard{s}
	cs := make([]*Conn, n)
	for i := range cs {
		sess, _ := grantFor(tb, x.req)
		c := &Conn{sh: s, hs: sess, player: 7, hidx: -1}
		if err := c.start(0, 0); err != nil {
			tb.Fatal(err)
		}
		cs[i] = c
	}
	return s, cs
}

// step is one connection's 33 ms step as its shard runs it: the client's
// datagrams, the zone's Control for the tick, the pump (seal, commit).
func step(s *shard, c *Conn, pkts [][]byte, now time.Duration, ctl move.ControlState) {
	for _, p := range pkts {
		feed(s, c, p, now)
	}
	control(s, c, now, ctl)
}

// feed hands c the client's datagram p, as the gateway routes it.
func feed(s *shard, c *Conn, p []byte, now time.Duration) {
	s.handle(c, clientDatagram(p), now)
}

// postClient posts the client's datagram p to c's inbox, for the shard's
// next round.
func postClient(s *shard, c *Conn, p []byte) { s.post(c, clientDatagram(p)) }

// clientDatagram is a pooled copy of p from the client's address.
func clientDatagram(p []byte) *msg.Datagram {
	d := msg.NewDatagram()
	d.N = copy(d.Buf, p)
	d.Addr = benchClient
	return d
}

// control hands c its zone's Control for the tick and pumps it (the
// tick's packet).
func control(s *shard, c *Conn, now time.Duration, ctl move.ControlState) {
	m := msg.NewControl()
	m.LastApplied, m.State = c.srv.LastApplied(), ctl
	s.handle(c, m, now)
	s.pumpOne(c, now)
}

// BenchmarkShardColdPath: one connection's step on its shard — its
// client's datagram in (route already done: onDatagram, Receive, the
// input to the zone), the zone's Control, the pump (Poll without ghosts,
// commit, the shard's sendmmsg to nowhere) — across 4,096 connections in
// turn, so each one's state is cold when its turn comes, as on a server
// with thousands of players. The ghost table is empty (the ghost
// engineer's benchmarks cover it). ns/pkt is per datagram in or out.
func BenchmarkShardColdPath(b *testing.B) {
	coldSteps(b, step)
}

// coldSteps runs one connection's step (step or stepRounds) per op across
// 4,096 connections in turn, as BenchmarkShardColdPath describes, checks
// the replay, and reports ns/pkt (per datagram in or out); it returns the
// datagrams sent.
func coldSteps(b *testing.B, run func(*shard, *Conn, [][]byte, time.Duration, move.ControlState)) (sent uint64) {
	const conns, steps = 4096, 256
	x := record(b, steps)
	s, cs := benchShard(b, x, conns)
	var ctl move.ControlState
	i, k, pkts := 0, 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if k == len(cs) {
			k, i = 0, i+1
			ctl.Pos[0] += 0.2
			if i == steps {
				b.StopTimer()
				s, cs = benchShard(b, x, conns)
				i = 0
				b.StartTimer()
			}
		}
		now := time.Duration(i+1) * benchStep
		run(s, cs[k], x.steps[i], now, ctl)
		pkts += len(x.steps[i])
		k++
	}
	s.flush()
	b.StopTimer()
	sent = s.pool.sent.Load()
	if sent == 0 {
		b.Fatal("nothing sent")
	}
	if st := cs[0].srv.Stats(); st.Rejected() != 0 {
		b.Fatalf("replay diverged: %d rejected (%+v)", st.Rejected(), st.Counters)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pkts+int(sent)), "ns/pkt")
	return sent
}

// stepRounds is step as a server's shard meets it: each of the client's
// datagrams in a round of its own (handled, then pumped: most such pumps
// send nothing, the send slot not being open yet), then the zone's
// Control in another (pumped: the tick's packet).
func stepRounds(s *shard, c *Conn, pkts [][]byte, now time.Duration, ctl move.ControlState) {
	for _, p := range pkts {
		feed(s, c, p, now)
		s.pumpOne(c, now)
		now += benchStep / time.Duration(2*len(pkts)+1)
	}
	control(s, c, now, ctl)
}

// BenchmarkShardColdRounds is BenchmarkShardColdPath with a round per
// event (stepRounds), as on a server where a client's datagrams and its
// zone's ticks come apart: a pump after each datagram as well as after
// each Control. ns/pkt is per datagram in or out.
func BenchmarkShardColdRounds(b *testing.B) {
	sent := coldSteps(b, stepRounds)
	b.ReportMetric(float64(sent)/float64(b.N), "sent/step")
}

// BenchmarkShardSteady is BenchmarkShardColdRounds past the start and
// through the shard's own rounds: 512 connections (their state does not
// fit the caches, as on a server with a thousand players), each warmed
// with 64 steps before the timer starts, so that what is measured is the
// steady state of a playing connection, not its first packets (rings
// growing, the first acks). Connections step eight at a time, as a shard
// meets them (roundOf): their clients' datagrams posted and a round run
// (handled, pumped, any deadline due served, flushed), then their zone's
// Controls the same way — a read batch of ≈ 16 datagrams is ≈ 8 a shard.
// An op is one connection's step. For instruction counts split into the
// receive and the send half, read callgrind's inclusive counts of
// conn.(*Conn).onDatagram and conn.(*Conn).pump. ns/pkt is per datagram
// in or out.
func BenchmarkShardSteady(b *testing.B) {
	const conns, warm, steps, batch = 512, 64, 256, 8
	x := record(b, steps)
	runShardSteady(b, x, warm, batch, func() (*shard, []*Conn) { return warmShard(b, x, conns, warm, batch) },
		func(s *shard, _ int, cs []*Conn, pkts [][]byte, now time.Duration, ctl move.ControlState) {
			roundOf(s, cs, pkts, now, ctl)
		})
}

// runShardSteady is the loop of BenchmarkShardSteady and its variants:
// an op is one connection's step, connections step batch at a time by
// round (the connections cs, the first at index k0 of setup's) from step
// warm on, the shard and its connections made again by setup (warmed to
// step warm) once every connection has taken the recording's steps; then
// every replay is checked and ns/pkt reported.
func runShardSteady(b *testing.B, x *recording, warm, batch int, setup func() (*shard, []*Conn),
	round func(s *shard, k0 int, cs []*Conn, pkts [][]byte, now time.Duration, ctl move.ControlState)) {
	s, cs := setup()
	s.pool.sent.Store(0)
	var ctl move.ControlState
	ctl.Pos[0] = 0.2 * float32(warm)
	i, k, pkts := warm, 0, 0
	var sent uint64
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if k == len(cs) {
			k, i = 0, i+1
			ctl.Pos[0] += 0.2
			if i == len(x.steps) {
				b.StopTimer()
				sent += s.pool.sent.Load()
				s, cs = setup()
				s.pool.sent.Store(0)
				i = warm
				ctl.Pos[0] = 0.2 * float32(warm)
				b.StartTimer()
			}
		}
		if k%batch == batch-1 {
			round(s, k+1-batch, cs[k+1-batch:k+1], x.steps[i], time.Duration(i+1)*benchStep, ctl)
		}
		pkts += len(x.steps[i])
		k++
	}
	if r := k % batch; r != 0 { // the last connections' steps (b.N not a multiple of batch)
		round(s, k-r, cs[k-r:k], x.steps[i], time.Duration(i+1)*benchStep, ctl)
	}
	b.StopTimer()
	sent += s.pool.sent.Load()
	if sent == 0 {
		b.Fatal("nothing sent")
	}
	for _, c := range cs {
		if st := c.srv.Stats(); st.Rejected() != 0 {
			b.Fatalf("replay diverged: %d rejected (%+v)", st.Rejected(), st.Counters)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pkts+int(sent)), "ns/pkt")
}

// roundOf is one step of the connections cs through their shard's inbox
// and rounds (post, round), as a server's shard runs them: the clients'
// datagrams, each of pkts for each connection, in one round each, then
// their zone's Controls in one.
func roundOf(s *shard, cs []*Conn, pkts [][]byte, now time.Duration, ctl move.ControlState) {
	for _, p := range pkts {
		for _, c := range cs {
			postClient(s, c, p)
		}
		s.round(now)
		now += benchStep / time.Duration(2*len(pkts)+1)
	}
	for _, c := range cs {
		m := msg.NewControl()
		m.LastApplied, m.State = c.srv.LastApplied(), ctl
		s.post(c, m)
	}
	s.round(now)
}

// BenchmarkShardReceiveCold is the receive half of BenchmarkShardSteady
// over 2,048 connections (each one's state long out of the caches when
// its next datagram comes, as on a server with a thousand players and
// more): an op is one client datagram, posted with those of seven other
// connections and handled in one round (onDatagram, the pump after it,
// which most often only asks Due), the zone's Controls of those eight
// (the tick's packets, so the acks stay real) in another round. Every
// connection is warmed with 16 steps before the timer starts. For the
// receive path alone read callgrind's inclusive counts (and, with
// --cache-sim=yes, misses) of conn.(*shard).handleFrom against its calls
// on datagram rounds, or of conn.(*Conn).onDatagram. ns/pkt is per
// datagram in.
func BenchmarkShardReceiveCold(b *testing.B) {
	const conns, warm, steps, batch = 2048, 16, 96, 8
	x := record(b, steps)
	setup := func() (*shard, []*Conn) { return warmShard(b, x, conns, warm, batch) }
	s, cs := setup()
	var ctl move.ControlState
	ctl.Pos[0] = 0.2 * float32(warm)
	i, k, pkts := warm, 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if k == len(cs) {
			k, i = 0, i+1
			ctl.Pos[0] += 0.2
			if i == steps {
				b.StopTimer()
				s, cs = setup()
				i = warm
				ctl.Pos[0] = 0.2 * float32(warm)
				b.StartTimer()
			}
		}
		if k%batch == batch-1 {
			roundOf(s, cs[k+1-batch:k+1], x.steps[i], time.Duration(i+1)*benchStep, ctl)
		}
		pkts += len(x.steps[i])
		k++
	}
	b.StopTimer()
	for _, c := range cs {
		if st := c.srv.Stats(); st.Rejected() != 0 {
			b.Fatalf("replay diverged: %d rejected (%+v)", st.Rejected(), st.Counters)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pkts), "ns/pkt")
}

// warmShard makes a shard of conns connections (benchShard) and runs warm
// steps of x through it, batch connections a round, the Controls moving
// 0.2 m a step: the warm state the shard benchmarks time from.
func warmShard(b *testing.B, x *recording, conns, warm, batch int) (*shard, []*Conn) {
	s, cs := benchShard(b, x, conns)
	var ctl move.ControlState
	for i := range warm {
		ctl.Pos[0] += 0.2
		for k := 0; k < conns; k += batch {
			roundOf(s, cs[k:k+batch], x.steps[i], time.Duration(i+1)*benchStep, ctl)
		}
	}
	return s, cs
}

// BenchmarkShardSteadyServer (informative): BenchmarkShardSteady with
// the messages made as a server makes them, where that one takes them
// from the pools: each client datagram a compact copy from the reader's
// cache (msg.Datagram.CompactWith, as the gateway's router; the shard's
// msg.DatagramCache takes it back), each Control from the player's
// ViewSlot (as the zone; Release gives it back there), a step's Controls
// posted in one batch (msg.ControlBatch, as the zone's tick). The
// difference from BenchmarkShardSteady is what the pools cost that
// benchmark and not a server (≈ 2.3 % of its instructions: sync.Pool's
// Get and Put of a full-size datagram and of a Control an op).
func BenchmarkShardSteadyServer(b *testing.B) {
	const conns, warm, steps, batch = 512, 64, 256, 8
	x := record(b, steps)
	var rd msg.DatagramCache // the gateway reader's
	src := msg.NewDatagram()
	var cb msg.ControlBatch
	var ports []msg.ControlPort
	setup := func() (*shard, []*Conn) {
		s, cs := warmShard(b, x, conns, warm, batch)
		s.cq.Taker = s
		ports = ports[:0]
		for _, c := range cs {
			ports = append(ports, c.port())
		}
		return s, cs
	}
	runShardSteady(b, x, warm, batch, setup, func(s *shard, k0 int, cs []*Conn, pkts [][]byte, now time.Duration, ctl move.ControlState) {
		for _, p := range pkts {
			for _, c := range cs {
				src.N = copy(src.Buf, p)
				src.Addr = benchClient
				s.post(c, src.CompactWith(&rd))
			}
			s.round(now)
			now += benchStep / time.Duration(2*len(pkts)+1)
		}
		for i, c := range cs {
			m := c.views.NewControl()
			m.LastApplied, m.State = c.srv.LastApplied(), ctl
			cb.Add(&ports[k0+i], m)
		}
		cb.Flush()
		s.round(now)
	})
}
