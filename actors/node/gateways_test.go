package node

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/cluster"
	"github.com/ghostwire/ghostwire/actors/msg"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// Players whose connections are on a gateway node that died (its record's
// heartbeat stopped) or started again (its record's start time changed)
// leave this node's zones: nobody else would send their Leaves, and they
// stood in the zones for good (8 of them after a kill -9, by hand). Two
// stand-in gateways heartbeat into the nodes bucket as nodes do: gwx stops
// (a crash), gwy starts again. gwx's player and gwy's player from before
// its restart leave; the player that joined through gwy after its restart
// stays. A third, gwz, stops cleanly (it announces its stop, as a drained
// node does): its player leaves too, and the node says so at info level,
// where a crash is a warning (a drain warned, found by hand); so does a
// fourth, gwr, that stops cleanly and starts again (a rolling restart).
func TestPlayersOfAGoneGatewayLeave(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	cfg := testConfig(t)
	cfg.NodeID, cfg.Zones, cfg.NPCs = "n1", "x0z0,x1z0,x0z1,x1z1", 0
	logs := &logLines{}
	n, err := Start(context.Background(), cfg, slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(context.Background())
	kv := n.nats.kv[BucketNodes]
	var mu sync.Mutex
	ago := time.Now().Add(-time.Minute).UnixMilli()
	started := map[string]int64{"gwx": ago, "gwy": ago, "gwz": ago, "gwr": ago}
	beat := func(gw string) {
		mu.Lock()
		rec := &pb.NodeRecord{Node: gw, StartedUnixMs: started[gw], HeartbeatUnixMs: time.Now().UnixMilli()}
		mu.Unlock()
		b, _ := proto.Marshal(rec)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := kv.Put(ctx, gw, b); err != nil {
			t.Errorf("heartbeat of %s: %v", gw, err)
		}
	}
	gwxStop := make(chan struct{})
	defer every(500*time.Millisecond, func() {
		beat("gwy")
		beat("gwr")
		select {
		case <-gwxStop:
		default:
			beat("gwx")
			beat("gwz")
		}
	})()
	beat("gwx")
	beat("gwy")
	beat("gwz")
	beat("gwr")

	join := func(player uint64, gw string) {
		pid := &actor.PID{Address: n.game.sys.Address(), Id: cluster.LinkID(gw), RequestId: uint32(player)}
		n.game.sys.Root.Send(n.Zones().PID("x0z0"), &msg.Join{Player: player, Conn: pid, Ghosts: pid, Views: new(msg.ViewSlot)})
	}
	owned := func(player uint64) bool {
		var ok bool
		inspect(t, n, func(z *sim.Zone) {
			if e, in := z.Entity(player); in && e.Owned {
				ok = true
			}
		})
		return ok
	}
	join(101, "gwx")
	join(102, "gwy")
	join(103, "gwz")
	join(105, "gwr")
	waitFor(t, 5*time.Second, "the players in x0z0", func() bool { return owned(101) && owned(102) && owned(103) && owned(105) })
	time.Sleep(gatewayCheckEvery + time.Second) // the watch has seen the gateways

	// gwx crashes: no more heartbeats. gwz stops cleanly: it announces
	// it, and its record goes the slow way, by expiry, as if the watch had
	// read too late to see its delete (under -race it did: the delete
	// aged out of the 3 s bucket first, and the stop was taken for a
	// crash).
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	announceLeft(ctx, n.nats.nc, n.member.world, &pb.NodeRecord{Node: "gwz", StartedUnixMs: started["gwz"]})
	// gwr stops cleanly and starts again at once (a rolling restart).
	announceLeft(ctx, n.nats.nc, n.member.world, &pb.NodeRecord{Node: "gwr", StartedUnixMs: started["gwr"]})
	cancel()
	close(gwxStop)
	mu.Lock()
	started["gwy"] = time.Now().UnixMilli() // gwy starts again
	started["gwr"] = started["gwy"]
	mu.Unlock()
	beat("gwy")
	beat("gwr")
	time.Sleep(100 * time.Millisecond)
	join(104, "gwy") // a player who connects through the restarted gwy
	waitFor(t, 5*time.Second, "the player of the restarted gwy", func() bool { return owned(104) })

	restarted := time.Now()
	waitFor(t, gatewayGoneAfter+2*gatewayCheckEvery+2*time.Second, "gwy's player from before its restart to leave", func() bool { return !owned(102) })
	if d := time.Since(restarted); d < gatewayGoneAfter-gatewayCheckEvery {
		t.Fatalf("gwy's player from before its restart left %v after it, not after the grace (its client may be reconnecting)", d)
	}
	waitFor(t, 3*time.Second+gatewayGoneAfter+2*gatewayCheckEvery+2*time.Second, "the player of the dead gwx to leave", func() bool { return !owned(101) })
	waitFor(t, 2*time.Second, "the players of the stopped gwz and the restarted gwr to leave", func() bool { return !owned(103) && !owned(105) })
	if !owned(104) {
		t.Fatal("the player who joined through gwy after its restart was taken out")
	}
	if got := n.Zones().Metrics().GatewayGoneLeaves.Load(); got != 4 {
		t.Fatalf("gateway_gone_leaves_total %d, want 4", got)
	}
	for gw, want := range map[string]string{"gwx": "WARN no heartbeat", "gwy": "WARN started again", "gwz": "INFO stopped", "gwr": "INFO stopped and started again"} {
		if got := logs.gone(gw); got != want {
			t.Errorf("%s: logged %q, want %q", gw, got, want)
		}
	}
}

// logLines keeps the level and "why" of the node's gateway-gone lines.
type logLines struct {
	mu   sync.Mutex
	seen map[string]string // node → "LEVEL why"
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logLines) WithGroup(string) slog.Handler            { return l }

func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, "gateway node") {
		return nil
	}
	var node, why string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "node":
			node = a.Value.String()
		case "why":
			why = a.Value.String()
		}
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]string{}
	}
	l.seen[node] = r.Level.String() + " " + why
	return nil
}

func (l *logLines) gone(node string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[node]
}

// every runs fn every d on a goroutine of its own until stop, which waits
// for it (and may be called more than once).
func every(d time.Duration, fn func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(d)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				fn()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}
