package node

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// lockedLog is a text log the test reads while nodes write it.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// lines counts the lines at level that contain every one of texts.
func (l *lockedLog) lines(level string, texts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if !strings.Contains(line, "level="+level) {
			continue
		}
		all := true
		for _, t := range texts {
			all = all && strings.Contains(line, t)
		}
		if all {
			n++
		}
	}
	return n
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// A drain asks a target that is stopping for no further zone, and warns
// once about the zones nobody took, not once each (found by hand: a whole
// cluster of 64 zones stopped at once logged a warning for every zone of
// every node, each naming a target that had stopped). n0 stands in for a
// node drained at the same time: its record fresh and not yet draining,
// its take subject answering that it is stopping. n2's drain of three
// zones to n0 and n1 asks n0 once; n1's drain of all four zones, n0 its
// only target, asks n0 once more and warns once.
func TestDrainSkipsAStoppingTarget(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var log1, log2 lockedLog
	logTo := func(l *lockedLog) *slog.Logger {
		return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	cfg1 := testConfig(t)
	cfg1.NodeID, cfg1.Zones = "n1", "x0z0"
	n1, err := Start(ctx, cfg1, logTo(&log1))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n1.Stop(context.Background()) }()
	cfg2 := testConfig(t)
	cfg2.NodeID, cfg2.Zones = "n2", "x1z0,x0z1,x1z1"
	cfg2.NATSURL, cfg2.KeyFile = n1.NATSURL(), filepath.Join(cfg1.DataDir, "token.key")
	n2, err := Start(ctx, cfg2, logTo(&log2))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n2.Stop(context.Background()) }()

	// n0: a fresh record every 500 ms, and a take subject that refuses.
	var asked atomic.Int32
	sub, err := n1.nats.nc.Subscribe(takeSubject(n1.member.world, "n0"), func(r *nats.Msg) {
		asked.Add(1)
		_ = r.Respond([]byte("error: " + errStopping.Error()))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	beat := standIn(t, n1, "n0")
	stopBeats := every(500*time.Millisecond, beat)
	defer stopBeats()

	// n2's drain: targets n0, n1 (sorted); round robin puts n0 first for
	// the first and third zones.
	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	err = n2.Stop(sctx)
	scancel()
	if err != nil {
		t.Fatal(err)
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("n2's drain asked the stopping n0 %d times, want once:\n%s", n, log2.String())
	}
	if n := log2.lines("INFO", "drained", "zones=3"); n != 1 {
		t.Fatalf("n2's drain: %d lines saying 3 zones drained, want 1:\n%s", n, log2.String())
	}
	if n := log2.lines("WARN", "not handed over"); n != 0 {
		t.Fatalf("n2's drain warned %d times of zones not handed over:\n%s", n, log2.String())
	}
	waitFor(t, 10*time.Second, "every zone on n1", func() bool {
		return len(n1.Zones().IDs()) == 4
	})

	// n1's drain: n0 its only target, asked for the first zone only; the
	// four zones nobody took said in one warning.
	sctx, scancel = context.WithTimeout(ctx, 20*time.Second)
	stopBeats()
	beat()
	err = n1.Stop(sctx)
	scancel()
	if err != nil {
		t.Fatal(err)
	}
	if n := asked.Load(); n != 2 {
		t.Fatalf("n1's drain asked the stopping n0 %d times in all, want twice:\n%s", n, log1.String())
	}
	if n := log1.lines("WARN", "not handed over"); n != 1 || log1.lines("WARN", "zones not handed over", "zones=4", "refused it: this node is stopping") != 1 {
		t.Fatalf("n1's drain: %d warnings of zones not handed over, want 1 counting the 4 and saying why:\n%s", n, log1.String())
	}
}

// A drain asks the node whose --zones list names a zone first (else that
// node asks for it back from whichever took it: a second handover, a
// second freeze), and the others round robin as before.
func TestDrainOrderAsksTheListerFirst(t *testing.T) {
	targets := []string{"a", "b", "c"}
	lists := map[string][]string{"c": {"z1"}, "a": nil}
	for _, c := range []struct {
		zone string
		i    int
		want []string
	}{
		{"z1", 0, []string{"c", "a", "b"}},
		{"z1", 1, []string{"c", "b", "a"}},
		{"z1", 2, []string{"c", "a", "b"}},
		{"z2", 0, []string{"a", "b", "c"}},
		{"z2", 1, []string{"b", "c", "a"}},
	} {
		if got := drainOrder(targets, lists, c.zone, c.i); !slices.Equal(got, c.want) {
			t.Errorf("drainOrder(%s, %d) = %v, want %v", c.zone, c.i, got, c.want)
		}
	}
	if !slices.Equal(targets, []string{"a", "b", "c"}) {
		t.Fatalf("targets changed: %v", targets)
	}
}

// A drain's first target that hangs (a paused node, its record still
// fresh) costs the drain half of its time, not all of it: the next target
// takes the zone, and the hung one is asked for no other. Before, each ask
// waited up to two TTLs (6 s) against the default 5 s shutdown, so the
// first zone's ask used the whole budget and no zone was handed over
// (n1, running a fixed list, claims no orphan: they stayed unowned).
func TestDrainGetsPastAHungTarget(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var log2 lockedLog
	cfg1 := testConfig(t)
	cfg1.NodeID, cfg1.Zones = "n1", "x0z0"
	n1, err := Start(ctx, cfg1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n1.Stop(context.Background()) }()
	cfg2 := testConfig(t) // the default --shutdown-timeout
	cfg2.NodeID, cfg2.Zones = "n2", "x1z0,x0z1,x1z1"
	cfg2.NATSURL, cfg2.KeyFile = n1.NATSURL(), filepath.Join(cfg1.DataDir, "token.key")
	n2, err := Start(ctx, cfg2, slog.New(slog.NewTextHandler(&log2, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n2.Stop(context.Background()) }()

	// n0: a fresh record, and a take subject that never answers.
	var asked atomic.Int32
	sub, err := n1.nats.nc.Subscribe(takeSubject(n1.member.world, "n0"), func(*nats.Msg) { asked.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	beat := standIn(t, n1, "n0")
	defer every(500*time.Millisecond, beat)()

	if err := n2.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("the hung n0 asked %d times, want once:\n%s", n, log2.String())
	}
	if log2.lines("INFO", "drained", "zones=3") != 1 {
		t.Fatalf("n2's drain did not hand its 3 zones over:\n%s", log2.String())
	}
	waitFor(t, 10*time.Second, "every zone on n1", func() bool { return len(n1.Zones().IDs()) == 4 })
}

// standIn writes a fresh directory record for node, which no process
// runs, into n's nodes bucket at each call of the returned beat (and once
// now): a live node to the others, not draining.
func standIn(t *testing.T, n *Node, node string) (beat func()) {
	kv := n.nats.kv[BucketNodes]
	started := time.Now().Add(-time.Minute).UnixMilli()
	beat = func() {
		b, _ := proto.Marshal(&pb.NodeRecord{Node: node, StartedUnixMs: started, HeartbeatUnixMs: time.Now().UnixMilli()})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := kv.Put(ctx, node, b); err != nil {
			t.Errorf("%s's heartbeat: %v", node, err)
		}
	}
	beat()
	return beat
}
