package conn

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/actors/udp"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/session"
)

// BenchmarkLoopbackShards (informative: real sockets, real time, the whole
// process's CPU) is a node's connection shards at 1,000 players on
// 127.0.0.1: a Pool of 2 shards (1 ms quantum, sendmmsg batches of 64)
// whose connections send to a sink socket, 1,000 session.Clients that
// send their datagrams at their own rate (≈ 22 a second each), staged to
// their shards as the gateway's reader stages a read batch (every
// millisecond, one Flush), and 8 zones that each post their 125 players'
// Controls every 50 ms (PostControls, a batch a shard), the zones an
// eighth of a tick apart; the server's datagrams are read
// from the sink and fed to their clients (so the acks are real). An op is
// one millisecond of that. It reports, a datagram in or out: the
// process's CPU (getrusage: the clients and the sink's reader included),
// its context switches, the shards' rounds and wake-ups (rounds not
// straight, Pool.Rounds); sendmmsg calls a datagram out (the shards');
// and the datagrams a second each way. On a shared host the CPU moves
// with the load beside it; the counts do not much.
func BenchmarkLoopbackShards(b *testing.B) {
	benchLoopbackShards(b)
}

func benchLoopbackShards(b *testing.B) {
	const players, zones, tick = 1000, 8, 50 * time.Millisecond
	ctx := context.Background()
	sink, err := udp.Listen(ctx, "127.0.0.1:0", 64)
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	if err := sink.SetBuffers(8<<20, 1<<20); err != nil {
		b.Fatal(err)
	}
	out, err := udp.Listen(ctx, "127.0.0.1:0", 64) // the node's socket: its shards' writers
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	mono := time.Now()
	now := func() time.Duration { return time.Since(mono) }
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	defer sys.Shutdown()
	cfg := DefaultConfig()
	p, err := NewPool(PoolConfig{Config: cfg, Shards: 2, Quantum: DefaultQuantum, WriteBatch: 64, Sys: sys, Now: now,
		NewWriter: func() Writer { return out.NewWriter(64) }})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()

	// The players: a client each, its connection granted from the sink's
	// address (the node sends there).
	hcfg := handshake.DefaultServerConfig()
	hcfg.Addr, hcfg.ProtocolID = benchServer, tokenkey.DefaultProtocolID
	hcfg.GuardCapacity = 2 * players
	hsrv, err := handshake.NewServer(hcfg, benchKey, benchWall.Add(-time.Minute), seeded(7))
	if err != nil {
		b.Fatal(err)
	}
	clis := make([]*session.Client, players)
	conns := make([]*Conn, players)
	byConn := map[handshake.ConnID]int{}
	for i := range players {
		tok, err := handshake.IssueToken(benchKey, handshake.TokenParams{
			PlayerID: uint64(i + 1), ProtocolID: tokenkey.DefaultProtocolID, Expiry: time.Hour, Timeout: 10 * time.Second,
			ServerAddrs: []netip.AddrPort{benchServer},
		}, benchWall, rand.NewChaCha8([32]byte{byte(i), byte(i >> 8), 0xbe}))
		if err != nil {
			b.Fatal(err)
		}
		cli, err := session.NewClient(tok, benchServer, session.DefaultClientConfig(), nil, benchWall, now())
		if err != nil {
			b.Fatal(err)
		}
		req, _ := cli.Poll(now(), nil)
		reply, grant, err := hsrv.Handle(nil, req, sink.LocalAddr(), benchWall, handshake.LoadNormal)
		if err != nil || grant == nil {
			b.Fatalf("handshake %d: %v", i, err)
		}
		sess, err := grant.Session()
		if err != nil {
			b.Fatal(err)
		}
		if err := cli.Receive(now(), reply); err != nil {
			b.Fatal(err)
		}
		c, err := p.Open(Params{Handshake: sess, Player: uint64(i + 1)})
		if err != nil {
			b.Fatal(err)
		}
		clis[i], conns[i] = cli, c
		byConn[cli.ID()] = i
	}

	// The sink: the node's datagrams, kept for the clients' loop.
	var (
		rxMu   sync.Mutex
		rx     [][]byte
		rxFree [][]byte
		rxN    int
	)
	sinkDone := make(chan struct{})
	go func() {
		defer close(sinkDone)
		ms := make([]udp.Message, 64)
		for i := range ms {
			ms[i].Buf = make([]byte, udp.MaxDatagram)
		}
		for {
			n, err := sink.ReadBatch(ms)
			if err != nil {
				if !errors.Is(err, udp.ErrClosed) {
					b.Error(err)
				}
				return
			}
			rxMu.Lock()
			for _, m := range ms[:n] {
				var buf []byte
				if k := len(rxFree); k > 0 {
					buf, rxFree = rxFree[k-1][:0], rxFree[:k-1]
				}
				rx = append(rx, append(buf, m.Buf[:m.N]...))
			}
			rxN += n
			rxMu.Unlock()
		}
	}()

	// The zones: each one's players' Controls every tick, a batch a shard.
	stop := make(chan struct{})
	var zwg sync.WaitGroup
	for z := range zones {
		zwg.Add(1)
		go func() {
			defer zwg.Done()
			per := map[*shard][]msg.PortControl{}
			var state move.ControlState
			time.Sleep(time.Duration(z) * tick / zones)
			t := time.NewTicker(tick)
			defer t.Stop()
			for k := uint64(1); ; k++ {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				state.Pos[0] += 0.2
				for i := z; i < players; i += zones {
					m := msg.NewControl()
					m.Player, m.State, m.Tick = uint64(i+1), state, k
					c := conns[i]
					per[c.sh] = append(per[c.sh], msg.PortControl{Conn: c, Control: m})
				}
				for s, cs := range per {
					s.PostControls(cs)
					clear(cs)
					per[s] = cs[:0]
				}
			}
		}()
	}
	defer func() {
		close(stop)
		zwg.Wait()
	}()

	// The clients' loop, one millisecond an op: the node's datagrams in,
	// then each client whose 30 Hz turn it is sends, staged and flushed
	// as one read batch.
	st := p.NewStager()
	addr := sink.LocalAddr()
	buf := make([]byte, 0, udp.MaxDatagram)
	var taken [][]byte
	const slots = 33
	msTick := 0
	sentIn := 0
	step := func() {
		t := now()
		rxMu.Lock()
		taken, rx = rx, taken[:0]
		rxMu.Unlock()
		for _, pkt := range taken {
			if id, _, err := handshake.ParseRouted(pkt); err == nil {
				if i, ok := byConn[id]; ok {
					_ = clis[i].Receive(t, pkt)
				}
			}
		}
		rxMu.Lock()
		rxFree = append(rxFree, taken...)
		rxMu.Unlock()
		clear(taken)
		for i := msTick % slots; i < players; i += slots {
			cli := clis[i]
			for cli.InputDue(t) {
				_, _ = cli.Input(move.Move{Dt: 32, Forward: 90, Yaw: uint16(i * 64)})
			}
			for {
				pkt, _ := cli.Poll(t, buf[:0])
				if len(pkt) == 0 {
					break
				}
				d := msg.NewDatagram()
				d.N = copy(d.Buf, pkt)
				d.Addr, d.At = addr, t
				st.Stage(conns[i], d)
				sentIn++
			}
		}
		st.Flush()
		msTick++
		if d := time.Duration(msTick)*time.Millisecond - now(); d > 0 {
			time.Sleep(d)
		}
	}
	// Warm up: every connection verified and sending, the rings grown.
	mono0 := now()
	for now()-mono0 < 2*time.Second {
		step()
	}
	msTick = int(now() / time.Millisecond)
	rounds0, sent0, batches0, in0 := p.Rounds(), p.Sent(), p.Batches(), sentIn
	if in0 == 0 || sent0 == 0 {
		// Two seconds carry ≈ 30 k datagrams in and 20 k out: none is a
		// broken path, not a short run.
		b.Fatalf("warm-up: %d datagrams in, %d out", in0, sent0)
	}
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	t0 := now()
	b.ResetTimer()
	for b.Loop() {
		step()
	}
	b.StopTimer()
	el := now() - t0
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	rounds1, sent1, batches1 := p.Rounds(), p.Sent(), p.Batches()
	in, outN := float64(sentIn-in0), float64(sent1-sent0)
	if in+outN == 0 {
		// A run of a few ops (-benchtime 1x: a millisecond) may fall
		// between the node's sends; nothing to divide by.
		return
	}
	cpu := time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano())
	csw := float64(ru1.Nvcsw - ru0.Nvcsw + ru1.Nivcsw - ru0.Nivcsw)
	var rounds, wakes float64
	for i := range rounds1 {
		d := float64(rounds1[i] - rounds0[i])
		rounds += d
		if RoundCause(i) != RoundStraight {
			wakes += d
		}
	}
	dg := in + outN
	b.ReportMetric(float64(cpu.Nanoseconds())/dg, "cpu-ns/dg")
	b.ReportMetric(csw/dg, "csw/dg")
	b.ReportMetric(rounds/dg, "rounds/dg")
	b.ReportMetric(wakes/dg, "wakes/dg")
	if outN > 0 {
		b.ReportMetric(float64(batches1-batches0)/outN, "sendmmsg/dg-out")
	}
	b.ReportMetric(float64(rounds1[RoundPosted]-rounds0[RoundPosted])/el.Seconds(), "posted-rounds/s")
	b.ReportMetric(float64(rounds1[RoundTimer]-rounds0[RoundTimer])/el.Seconds(), "timer-rounds/s")
	b.ReportMetric(in/el.Seconds(), "in/s")
	b.ReportMetric(outN/el.Seconds(), "out/s")
	b.ReportMetric(float64(p.Counters().Rejected()), "rejected")
}
