package cluster

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/cluster/natstest"
	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// natsServer runs a real nats-server with JetStream on a random loopback
// port for one test.
func natsServer(t testing.TB) *nats.Conn {
	t.Helper()
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close) // before the server's shutdown: cleanups run last first
	return nc
}

func zonesBucket(t testing.TB, nc *nats.Conn, ttl time.Duration) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateOrUpdateKeyValue(context.Background(), LeaseBucketConfig("zones", ttl))
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Never two owners: a held zone cannot be claimed; a node that stopped
// renewing (paused, partitioned) loses its lease when it expires, another
// node claims the zone at a higher epoch, and the paused node, when it
// wakes, cannot renew it: it is told it lost the zone.
func TestLeaseFencing(t *testing.T) {
	nc := natsServer(t)
	const ttl = time.Second
	kv := zonesBucket(t, nc, ttl)
	var lostMu sync.Mutex
	var lost []string
	a, err := NewLeases(context.Background(), kv, "a", ttl, nil, func(z string) {
		lostMu.Lock()
		lost = append(lost, z)
		lostMu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewLeases(context.Background(), kv, "b", ttl, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	e1, err := a.Claim(context.Background(), "z")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Claim(context.Background(), "z"); !errors.Is(err, ErrOwned) {
		t.Fatalf("claiming a held zone: %v, want ErrOwned", err)
	}
	waitFor(t, 2*time.Second, "b to see a's lease", func() bool { o, ok := b.Owner("z"); return ok && o.Node == "a" && o.Epoch == e1 })
	// Renewals keep it alive past the TTL.
	time.Sleep(2 * ttl)
	if _, err := b.Claim(context.Background(), "z"); !errors.Is(err, ErrOwned) {
		t.Fatalf("a renewed lease was claimable after its TTL: %v", err)
	}
	// a pauses: its renewals stop, nothing is released.
	close(a.stop)
	a.kill()
	a.wg.Wait()
	var e2 uint64
	waitFor(t, 5*ttl, "the paused node's lease to expire and b to claim", func() bool {
		e2, err = b.Claim(context.Background(), "z")
		return err == nil
	})
	if e2 <= e1 {
		t.Fatalf("new epoch %d not above the old %d", e2, e1)
	}
	// Waking, before its renewal loop runs, a already knows it may no
	// longer act for the zone (what its record writes check).
	if _, held := a.Held("z"); !held || a.Valid("z") {
		t.Fatalf("paused past its lease: held %v, valid %v; want held but not valid", held, a.Valid("z"))
	}
	if !b.Valid("z") {
		t.Fatal("the new owner is not valid")
	}
	a.renewAll() // a wakes up
	if _, held := a.Held("z"); held {
		t.Fatal("the paused node still holds the zone after another claimed it")
	}
	lostMu.Lock()
	if len(lost) != 1 || lost[0] != "z" {
		t.Fatalf("lost = %v, want [z]", lost)
	}
	lostMu.Unlock()
	if o, _ := b.Owner("z"); o.Node != "b" || o.Epoch != e2 {
		t.Fatalf("owner %+v after the takeover", o)
	}
	// Release deletes only at the releaser's revision: a's stale view of
	// the lease cannot delete b's.
	a.Close(context.Background())
	time.Sleep(100 * time.Millisecond)
	if e, err := kv.Get(context.Background(), "z"); err != nil {
		t.Fatalf("b's lease gone after a closed: %v", err)
	} else if o, _ := DecodeOwner(e); o.Node != "b" {
		t.Fatalf("lease now %+v", o)
	}
}

// probe stands in for a zone actor and records what reaches it.
type probe struct {
	mu  sync.Mutex
	got []any
}

func (p *probe) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped:
	default:
		p.mu.Lock()
		p.got = append(p.got, m)
		p.mu.Unlock()
	}
}

func (p *probe) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.got)
}

// bridgeFixture is a bridge of node "n1" serving zone "z" (epoch held in a
// real lease) with a probe actor under the zone's name.
type bridgeFixture struct {
	b     *Bridge
	nc    *nats.Conn
	p     *probe
	sys   *actor.ActorSystem
	epoch uint64
}

func newBridgeFixture(t *testing.T) *bridgeFixture {
	t.Helper()
	nc := natsServer(t)
	kv := zonesBucket(t, nc, 3*time.Second)
	l, err := NewLeases(context.Background(), kv, "n1", 3*time.Second, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	ep, err := l.Claim(context.Background(), "z")
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := ghost.NewRegistry(ghost.DefaultBounds())
	_ = reg.Register(ghost.PlayerClass(nil), ghost.NPCClass(nil))
	sys := quietSystem()
	start := time.Now()
	b, err := NewBridge(Config{World: "w", Node: "n1", NC: nc, Sys: sys, Leases: l, Registry: reg, Now: func() time.Duration { return time.Since(start) }})
	if err != nil {
		t.Fatal(err)
	}
	p := &probe{}
	if _, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return p }), zone.ActorName("z")); err != nil {
		t.Fatal(err)
	}
	if err := b.Serve("z"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		sys.Shutdown()
	})
	return &bridgeFixture{b: b, nc: nc, p: p, sys: sys, epoch: ep}
}

func validBatch(zoneID string, epoch uint64) []byte {
	b, _ := proto.Marshal(&pb.ZoneBatch{Zone: zoneID, ZoneEpoch: epoch, FromNode: "n2", Items: []*pb.ZoneItem{
		{Item: &pb.ZoneItem_Input{Input: &pb.PlayerInput{Player: 7, Moves: []*pb.Move{{Seq: 1, Dt: 16}}}}},
	}})
	return b
}

// Hostile or buggy peers: a stale epoch, another zone's name, a truncated
// or garbage payload, an out-of-range item on a cluster subject are all
// dropped and counted, and nothing panics; the valid batch after them
// still gets through.
func TestBridgeDropsHostileBatches(t *testing.T) {
	f := newBridgeFixture(t)
	subj := zoneSubject("w", "z")
	good := validBatch("z", f.epoch)
	badItem, _ := proto.Marshal(&pb.ZoneBatch{Zone: "z", ZoneEpoch: f.epoch, Items: []*pb.ZoneItem{
		{Item: &pb.ZoneItem_Input{Input: &pb.PlayerInput{Player: 7, Events: []*pb.GameEvent{{Class: 99}}}}},
		{},
	}})
	cases := []struct {
		name string
		data []byte
		ctr  func() uint64
	}{
		{"stale epoch", validBatch("z", f.epoch-1), f.b.m.StaleEpoch.Load},
		{"newer epoch", validBatch("z", f.epoch+5), f.b.m.StaleEpoch.Load},
		{"other zone", validBatch("other", f.epoch), f.b.m.Misrouted.Load},
		{"truncated", good[:len(good)-3], f.b.m.Malformed.Load},
		{"garbage", []byte{0xff, 0xff, 0xff, 0x01, 0x02}, f.b.m.Malformed.Load},
		{"bad items", badItem, f.b.m.Malformed.Load},
	}
	for _, c := range cases {
		before := c.ctr()
		if err := f.nc.Publish(subj, c.data); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 2*time.Second, c.name+" counted", func() bool { return c.ctr() > before })
	}
	// An older epoch is a handover's routine tail: counted, not warned
	// (one warning an epoch filled the warnings' bound after 1,024 zone
	// moves); a newer one is warned, once a zone.
	f.b.mu.Lock()
	var keys []string
	for k := range f.b.warned {
		keys = append(keys, k)
	}
	f.b.mu.Unlock()
	if slices.Sort(keys); slices.Index(keys, "stale:z") < 0 || slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, "stale:z:") }) {
		t.Fatalf("warnings kept %q: want one for the zone's newer epoch (stale:z), none an epoch", keys)
	}
	if err := f.nc.Publish(connSubject("w", "n1"), []byte("not a protobuf \xff\xff")); err != nil {
		t.Fatal(err)
	}
	if n := f.p.count(); n != 0 {
		t.Fatalf("%d messages reached the zone from hostile batches", n)
	}
	if err := f.nc.Publish(subj, good); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "the valid batch to reach the zone", func() bool { return f.p.count() == 1 })
	f.p.mu.Lock()
	in, ok := f.p.got[0].(*msg.Input)
	f.p.mu.Unlock()
	if !ok || in.Player != 7 || len(in.Moves) != 1 || in.Moves[0].Seq != 1 {
		t.Fatalf("zone got %#v", f.p.got[0])
	}
}

// FuzzZoneBatch feeds arbitrary bytes to the zone subject's decoder: an
// error and a counter, never a panic.
func FuzzZoneBatch(f *testing.F) {
	f.Add(validBatch("z", 1))
	f.Add([]byte{})
	join, _ := proto.Marshal(&pb.ZoneBatch{Zone: "z", ZoneEpoch: 1, FromNode: "n2", Items: []*pb.ZoneItem{
		{Item: &pb.ZoneItem_Join{Join: &pb.PlayerJoin{Player: 3}}},
		{Item: &pb.ZoneItem_Leave{Leave: &pb.PlayerLeave{Player: 3, Reason: 300}}},
		{Item: &pb.ZoneItem_Teleport{Teleport: &pb.TeleportItem{Entity: 3, Pos: &pb.Vec3{X: 1}}}},
		{Item: &pb.ZoneItem_Handoff{Handoff: &pb.HandoffItem{Msg: &pb.HandoffMessage{Kind: pb.HandoffKind_HANDOFF_KIND_OFFER, Entity: 3, Epoch: 1, From: "y", To: "z"}, GatewayNode: "n2"}}},
		{Item: &pb.ZoneItem_Replicas{Replicas: &pb.ReplicaBatch{From: "y", To: "z"}}},
	}})
	f.Add(join)
	// Joins passed on: through another gateway, back to this node's (n1),
	// through a gateway that is no node id.
	passed, _ := proto.Marshal(&pb.ZoneBatch{Zone: "z", ZoneEpoch: 1, FromNode: "n2", Items: []*pb.ZoneItem{
		{Item: &pb.ZoneItem_Join{Join: &pb.PlayerJoin{Player: 5, Conn: "link-n3", GatewayNode: "n3", ConnTag: 9, EventGen: 2}}},
		{Item: &pb.ZoneItem_Join{Join: &pb.PlayerJoin{Player: 6, Conn: "link-n1", GatewayNode: "n1", ConnTag: 9}}},
		{Item: &pb.ZoneItem_Join{Join: &pb.PlayerJoin{Player: 7, Conn: "link-n1", GatewayNode: "n1.x"}}},
	}})
	f.Add(passed)
	// Connection updates naming a connection by its tag (ControlUpdate,
	// Redirect, ConnKick, EventsOut conn_tag): none, one never here, the
	// largest.
	tagged, _ := proto.Marshal(&pb.ConnBatch{FromNode: "n2",
		Controls:  []*pb.ControlUpdate{{Player: 3, ConnTag: 9}, {Player: 3}},
		Redirects: []*pb.Redirect{{Player: 3, Zone: "z", Epoch: 2, ConnTag: 1 << 31}},
		Kicks:     []*pb.ConnKick{{Player: 3, Reason: 2, ConnTag: 0xffffffff}},
		Outputs:   []*pb.EventsOut{{Player: 3, ConnTag: 9, Events: []*pb.GameEvent{{Class: 1, Payload: []byte("e")}}}}})
	f.Add(tagged)
	// An Output with its event fence (msg.Output.Applied): a usual one,
	// and one with more lanes than a fence has.
	fenced, _ := proto.Marshal(&pb.ConnBatch{FromNode: "n2", Outputs: []*pb.EventsOut{
		{Player: 3, EventGen: 7, EventLast: []uint64{4, 0, 2}, Events: []*pb.GameEvent{{Class: 1, Payload: []byte("e")}}},
		{Player: 3, EventGen: 7, EventLast: make([]uint64, 40)}}})
	f.Add(fenced)
	// On a reliable stream: the first of it, one after a gap, a duplicate.
	for _, seq := range []uint64{1, 5, 1} {
		s, _ := proto.Marshal(&pb.ZoneBatch{Zone: "z", ZoneEpoch: 1, FromNode: "n2", Stream: 77, Seq: seq, Floor: 1,
			Items: []*pb.ZoneItem{{Item: &pb.ZoneItem_Join{Join: &pb.PlayerJoin{Player: 4}}}}})
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, p := fuzzBridge(t)
		b.onZoneBatch("z", &nats.Msg{Subject: zoneSubject("w", "z"), Data: data})
		b.onConnBatch(&nats.Msg{Subject: connSubject("w", "n1"), Data: data})
		b.onAck(&nats.Msg{Subject: ackSubject("w", "n1"), Data: data})
		var cb pb.ConnBatch
		if proto.Unmarshal(data, &cb) == nil {
			_ = b.deliverConn(&cb)
		}
		_ = p
	})
}

var (
	fuzzOnce sync.Once
	fuzzB    *Bridge
	fuzzP    *probe
)

// fuzzBridge is one bridge for every fuzz input, with no NATS connection:
// the decoders are called directly.
func fuzzBridge(t *testing.T) (*Bridge, *probe) {
	fuzzOnce.Do(func() {
		reg, _ := ghost.NewRegistry(ghost.DefaultBounds())
		_ = reg.Register(ghost.PlayerClass(nil), ghost.NPCClass(nil))
		sys := quietSystem()
		l := &Leases{held: map[string]*held{"z": {epoch: 1}}, owners: map[string]Owner{}, changed: make(chan struct{})}
		fuzzP = &probe{}
		_, _ = sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return fuzzP }), zone.ActorName("z"))
		fuzzB = &Bridge{cfg: Config{World: "w", Node: "n1", Sys: sys, Leases: l, Registry: reg, MaxBatch: 512,
			Now: func() time.Duration { return 0 }}, m: new(Metrics), log: discard(), served: map[string]*nats.Subscription{},
			links: map[string]*link{}, locals: map[uint64]*msg.Join{}, warned: map[string]bool{}, bases: map[uint64]*viewBase{}}
	})
	return fuzzB, fuzzP
}

func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discard() }))
}

// A node restarted under the same id (a crash, a pod restart) takes its
// own unexpired leases over at a new epoch at once; another node's it
// cannot.
func TestLeaseTakeoverBySameNode(t *testing.T) {
	nc := natsServer(t)
	kv := zonesBucket(t, nc, 3*time.Second)
	old, err := NewLeases(context.Background(), kv, "n", 3*time.Second, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e1, err := old.Claim(context.Background(), "z")
	if err != nil {
		t.Fatal(err)
	}
	old.Abandon() // the old run dies without releasing
	again, err := NewLeases(context.Background(), kv, "n", 3*time.Second, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(context.Background())
	e2, err := again.Claim(context.Background(), "z")
	if err != nil {
		t.Fatalf("restarted node could not take its own lease: %v", err)
	}
	if e2 <= e1 {
		t.Fatalf("epoch %d after takeover, was %d", e2, e1)
	}
	other, err := NewLeases(context.Background(), kv, "m", 3*time.Second, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	if _, err := other.Claim(context.Background(), "z"); !errors.Is(err, ErrOwned) {
		t.Fatalf("another node claimed a live lease: %v", err)
	}
}

// Handoff messages are aged by the receiver (handoff.Config.MaxAge): a
// stamp from another process's node clock must arrive as the same instant
// on the receiver's. Two nodes whose clocks started 12 s apart (the second
// started later) agree on a message's age.
func TestHandoffStampsCrossClocks(t *testing.T) {
	start := time.Now()
	early := &Bridge{cfg: Config{Origin: start.Add(-12 * time.Second)}} // its clock reads 12 s more
	late := &Bridge{cfg: Config{Origin: start}}
	sentEarly := 20 * time.Second // "now" on the early node
	got := late.localStamp(early.wallStamp(sentEarly))
	if want := 8 * time.Second; got < want-time.Millisecond || got > want+time.Millisecond {
		t.Fatalf("stamp %v on the early node reads %v on the late one, want %v", sentEarly, got, want)
	}
	if back := early.localStamp(late.wallStamp(got)); back < sentEarly-time.Millisecond || back > sentEarly+time.Millisecond {
		t.Fatalf("round trip %v, want %v", back, sentEarly)
	}
}

// A cross-process Commit reaches the zone only once the player record says
// the zone owns the player at the new epoch: a Commit older than the record
// (a duplicate from a stale owner, a split brain) is refused and counted.
func TestCommitNeedsThePlayerRecord(t *testing.T) {
	f := newBridgeFixture(t)
	js, _ := jetstream.New(f.nc)
	kv, err := js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "players"})
	if err != nil {
		t.Fatal(err)
	}
	players := NewPlayers(kv, "n1", nil)
	defer players.Close()
	f.b.cfg.Players = players
	newer, _ := proto.Marshal(&pb.PlayerRecord{Player: 7, Zone: "elsewhere", Epoch: 10})
	if _, err := kv.Put(context.Background(), PlayerKey(7), newer); err != nil {
		t.Fatal(err)
	}
	commit := func(player uint64, epoch uint64) []byte {
		b, _ := proto.Marshal(&pb.ZoneBatch{Zone: "z", ZoneEpoch: f.epoch, FromNode: "n2", Items: []*pb.ZoneItem{{Item: &pb.ZoneItem_Handoff{Handoff: &pb.HandoffItem{
			Msg: &pb.HandoffMessage{Kind: pb.HandoffKind_HANDOFF_KIND_COMMIT, Entity: player, Epoch: epoch, From: "y", To: "z",
				State: &pb.EntitySnapshot{Entity: player, Control: &pb.ControlState{Pos: &pb.Vec3{}, Vel: &pb.Vec3{}}, Name: "p"}},
			GatewayNode: "n2"}}}}})
		return b
	}
	if err := f.nc.Publish(zoneSubject("w", "z"), commit(7, 3)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "the stale Commit to be refused", func() bool { return f.b.m.RecordRefused.Load() == 1 })
	if err := f.nc.Publish(zoneSubject("w", "z"), commit(8, 3)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "the good Commit to reach the zone", func() bool { return f.p.count() == 1 })
	f.p.mu.Lock()
	env, ok := f.p.got[0].(*zone.HandoffEnvelope)
	f.p.mu.Unlock()
	if !ok || env.Msg.Entity != 8 {
		t.Fatalf("zone got %#v, want player 8's Commit", f.p.got[0])
	}
	e, err := kv.Get(context.Background(), PlayerKey(8))
	if err != nil {
		t.Fatal(err)
	}
	var rec pb.PlayerRecord
	if err := proto.Unmarshal(e.Value(), &rec); err != nil || rec.GetZone() != "z" || rec.GetEpoch() != 4 || rec.GetNode() != "n1" {
		t.Fatalf("record %v, want zone z, epoch 4, node n1", &rec)
	}
}

// The bridge's map of local connections stays bounded: connections that
// ended (their view slot closed) are swept, whichever zone heard their
// Leave.
func TestBridgeForgetsEndedConnections(t *testing.T) {
	b, _ := fuzzBridge(t)
	before := b.Locals()
	sys := b.cfg.Sys
	for i := range 3 * localsSweep {
		j := &msg.Join{Player: 1<<40 + uint64(i), Conn: actor.NewPID(sys.Address(), "conn"), Views: new(msg.ViewSlot)}
		b.rememberLocal(j)
		j.Views.Close() // the connection ends without a Leave through this bridge
	}
	if n := b.Locals() - before; n > localsSweep {
		t.Fatalf("%d ended connections still remembered after %d joins, want at most %d", n, 3*localsSweep, localsSweep)
	}
}

// A NATS restart shorter than the lease's slack costs no lease: the owner
// is fenced while it cannot renew (Valid false: no writes as owner), keeps
// the zone, and renews at the same epoch once NATS is back; nobody is told
// the zone was lost. (make chaos-nats restarts a real server mid-run.)
func TestLeaseSurvivesNATSRestart(t *testing.T) {
	opts := natstest.Options(t) // one store, kept across the restart
	start := func() *natsserver.Server { return natstest.Run(t, opts) }
	srv := start()
	opts.Port = srv.Addr().(*net.TCPAddr).Port // the restart listens where clients reconnect
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// A long TTL leaves the restart a third of it (2 s) between the fence
	// and the lease's expiry, also under the race detector on a busy host.
	const ttl = 6 * time.Second
	kv := zonesBucket(t, nc, ttl)
	l, lost := countingLeases(t, kv, "a", ttl)
	defer l.Close(context.Background())
	nc.SetReconnectHandler(func(*nats.Conn) { l.RenewNow() })
	epoch, err := l.Claim(context.Background(), "z")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl / 3) // a few renewals
	srv.Shutdown()
	srv.WaitForShutdown()
	// Down past the fence (2/3 TTL after the last renewal), back well
	// before the lease expires.
	waitFor(t, ttl, "the owner to be fenced while NATS is down", func() bool { return !l.Valid("z") })
	srv = start()
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	waitFor(t, ttl/3, "the lease renewed after the restart", func() bool { return l.Valid("z") })
	if got, held := l.Held("z"); !held || got != epoch {
		t.Fatalf("after the restart: held %v at epoch %d, want epoch %d", held, got, epoch)
	}
	if n := lost.Load(); n != 0 {
		t.Fatalf("zone reported lost %d times across a short NATS restart", n)
	}
	l.Close(context.Background()) // while the server is up (the deferred shutdown runs first)
}

// countingLeases starts a node's Leases that counts the zones it is told
// it lost.
func countingLeases(t *testing.T, kv jetstream.KeyValue, node string, ttl time.Duration) (*Leases, *atomic.Int32) {
	t.Helper()
	lost := new(atomic.Int32)
	l, err := NewLeases(context.Background(), kv, node, ttl, nil, func(string) { lost.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	return l, lost
}

// A renewal the server applied but whose reply was lost (NATS went away
// between the two) leaves the owner with a stale revision: its next
// renewal is refused for a moved revision. The lease still names the
// owner at its epoch, so the owner adopts the revision and stays owner;
// a lease that changed hands is still lost.
func TestLeaseRenewalReplyLost(t *testing.T) {
	nc := natsServer(t)
	const ttl = 3 * time.Second
	kv := zonesBucket(t, nc, ttl)
	l, lost := countingLeases(t, kv, "a", ttl)
	defer l.Close(context.Background())
	epoch, err := l.Claim(context.Background(), "z")
	if err != nil {
		t.Fatal(err)
	}
	// The "lost reply": the owner's value written again behind its back.
	e, err := kv.Get(context.Background(), "z")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(context.Background(), "z", e.Value(), e.Revision()); err != nil {
		t.Fatal(err)
	}
	l.renewAll()
	if got, held := l.Held("z"); !held || got != epoch || lost.Load() != 0 {
		t.Fatalf("after its own renewal's lost reply: held %v at epoch %d (want %d), lost %d", held, got, epoch, lost.Load())
	}
	// Another node's lease at the same key: lost.
	e, err = kv.Get(context.Background(), "z")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := proto.Marshal(&pb.ZoneOwner{Zone: "z", Node: "b", Epoch: e.Revision() + 1})
	if _, err := kv.Update(context.Background(), "z", other, e.Revision()); err != nil {
		t.Fatal(err)
	}
	l.renewAll()
	if _, held := l.Held("z"); held || lost.Load() != 1 {
		t.Fatalf("after another node took the lease: held %v, lost %d; want not held, lost once", held, lost.Load())
	}
}

// slowKV is a players bucket whose every request takes delay (a busy KV:
// a round trip took up to a second under -race at load).
type slowKV struct {
	countingKV
	delay time.Duration
}

func (s *slowKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	time.Sleep(s.delay)
	return s.countingKV.Update(ctx, key, value, revision)
}

func (s *slowKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	time.Sleep(s.delay)
	return s.countingKV.Get(ctx, key)
}

// The copies of a Commit the source resends while its record write is in
// flight cost no write of their own: the write delivers the Commit once,
// and the copy it delivers is the newest (the first may be older than the
// zone's MaxAge by the time a slow write completes); a copy after it was
// written goes to the zone (which acknowledges it again) without another
// write.
func TestCommitCopiesShareTheRecordWrite(t *testing.T) {
	f := newBridgeFixture(t)
	js, _ := jetstream.New(f.nc)
	bucket, err := js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "players"})
	if err != nil {
		t.Fatal(err)
	}
	kv := &slowKV{countingKV: countingKV{KeyValue: bucket}, delay: 300 * time.Millisecond}
	players := NewPlayers(kv, "n1", nil)
	defer players.Close()
	f.b.cfg.Players = players
	commit := func(sent time.Duration) []byte {
		b, _ := proto.Marshal(&pb.ZoneBatch{Zone: "z", ZoneEpoch: f.epoch, FromNode: "n2", Items: []*pb.ZoneItem{{Item: &pb.ZoneItem_Handoff{Handoff: &pb.HandoffItem{
			Msg: &pb.HandoffMessage{Kind: pb.HandoffKind_HANDOFF_KIND_COMMIT, Entity: 8, Epoch: 3, From: "y", To: "z", SentNs: f.b.wallStamp(sent),
				State: &pb.EntitySnapshot{Entity: 8, Control: &pb.ControlState{Pos: &pb.Vec3{}, Vel: &pb.Vec3{}}, Name: "p"}},
			GatewayNode: "n2"}}}}})
		return b
	}
	const copies = 10
	for i := range copies { // resent every 50 ms, a write taking longer
		if err := f.nc.Publish(zoneSubject("w", "z"), commit(time.Duration(i+1)*time.Second)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, 5*time.Second, "the Commit to reach the zone", func() bool { return f.p.count() == 1 })
	f.p.mu.Lock()
	first, _ := f.p.got[0].(*zone.HandoffEnvelope)
	f.p.mu.Unlock()
	// Copies arrive in order, and each one coalesced while the write was in
	// flight became the newest: the write delivers copy number coalesced+1.
	if c := f.b.m.CommitsCoalesced.Load(); first == nil || first.Msg.Sent != time.Duration(c+1)*time.Second {
		t.Fatalf("the write delivered %#v after %d copies coalesced, want the newest (sent at %v)", first, c, time.Duration(c+1)*time.Second)
	}
	requests := kv.gets.Load() + kv.updates.Load()
	if c := f.b.m.CommitsCoalesced.Load(); c == 0 || c >= copies {
		t.Fatalf("%d of %d copies coalesced, want all but the first while its write was in flight", c, copies)
	}
	if err := f.nc.Publish(zoneSubject("w", "z"), commit(copies*time.Second)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "the copy after the write to reach the zone", func() bool { return f.p.count() == 2 })
	if got := kv.gets.Load() + kv.updates.Load(); got != requests || requests > 3 {
		t.Fatalf("KV requests: %d for %d copies in flight, %d after one more; want one write's (≤ 3) and none more", requests, copies, got)
	}
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	for _, m := range f.p.got {
		if env, ok := m.(*zone.HandoffEnvelope); !ok || env.Msg.Entity != 8 || env.Msg.Kind != handoff.KindCommit {
			t.Fatalf("zone got %#v, want player 8's Commit", m)
		}
	}
}

// replyLagKV is a zones bucket whose Update replies late: the clock moves
// on by lag while the request is out (the server wrote the lease at some
// moment in between).
type replyLagKV struct {
	jetstream.KeyValue
	now *atomic.Int64 // the leases' clock, ns since an epoch
	lag time.Duration
}

func (k *replyLagKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	rev, err := k.KeyValue.Update(ctx, key, value, revision)
	k.now.Add(int64(k.lag))
	return rev, err
}

// A renewal counts from when it was sent, not from its reply: the lease
// may expire TTL after the send, so an owner whose reply came late must
// fence itself as if it renewed at the send (counted from the reply, it
// went on writing as owner up to a round trip past the lease's possible
// expiry: a second owner's window).
func TestLeaseRenewalCountsFromItsSend(t *testing.T) {
	nc := natsServer(t)
	const ttl = time.Minute // the renewal loop's first tick (TTL/6) comes after the test
	bucket := zonesBucket(t, nc, ttl)
	clock := new(atomic.Int64)
	t0 := time.Unix(1_000_000, 0)
	kv := &replyLagKV{KeyValue: bucket, now: clock, lag: 20 * time.Second}
	l, lost := countingLeases(t, kv, "a", ttl)
	defer l.Close(context.Background())
	l.now = func() time.Time { return t0.Add(time.Duration(clock.Load())) }
	kv.lag = 0
	if _, err := l.Claim(context.Background(), "z"); err != nil {
		t.Fatal(err)
	}
	clock.Store(int64(10 * time.Second)) // renewed at t0+10s, its reply at t0+30s
	kv.lag = 20 * time.Second
	l.renewAll()
	if _, held := l.Held("z"); !held || lost.Load() != 0 {
		t.Fatalf("a late reply still renews: held %v, lost %d", held, lost.Load())
	}
	fence := ttl - ttl/3 // 40 s after the last renewal
	clock.Store(int64(10*time.Second + fence - time.Second))
	if !l.Valid("z") {
		t.Fatal("not valid within the fence of the renewal's send")
	}
	clock.Store(int64(10*time.Second + fence + time.Second))
	if l.Valid("z") {
		t.Fatal("still valid a fence after the renewal was sent: it counted from the reply")
	}
}

// lostRequestKV is a zones bucket whose Updates, while lose is set, are
// never answered (sent on a connection NATS lost): they return only when
// their context ends.
type lostRequestKV struct {
	jetstream.KeyValue
	lose    atomic.Bool
	waiting atomic.Int32
}

func (k *lostRequestKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	if k.lose.Load() {
		k.waiting.Add(1)
		defer k.waiting.Add(-1)
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return k.KeyValue.Update(ctx, key, value, revision)
}

// A renewal whose request went out on a connection NATS then lost waits
// for a reply that never comes. RenewNow (NATS reconnected) abandons it and
// renews at once; kept waiting, it held every renewal back until the lease
// was given up (TestLeaseSurvivesNATSRestart failed 2 of 6 under load).
func TestRenewNowAbandonsALostRenewal(t *testing.T) {
	nc := natsServer(t)
	const ttl = time.Minute // the renewal loop's own ticks (TTL/6) come after the test
	kv := &lostRequestKV{KeyValue: zonesBucket(t, nc, ttl)}
	l, lost := countingLeases(t, kv, "a", ttl)
	defer l.Close(context.Background())
	epoch, err := l.Claim(context.Background(), "z")
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	claimed := l.held["z"].lastOK
	l.mu.Unlock()
	kv.lose.Store(true)
	l.RenewNow() // the renewal goes out and is lost
	waitFor(t, 5*time.Second, "the renewal to be in flight", func() bool { return kv.waiting.Load() == 1 })
	kv.lose.Store(false)
	l.RenewNow() // NATS is back
	waitFor(t, 5*time.Second, "a renewal after the reconnect", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		h, ok := l.held["z"]
		return ok && h.lastOK.After(claimed)
	})
	if got, held := l.Held("z"); !held || got != epoch || lost.Load() != 0 {
		t.Fatalf("held %v at epoch %d (want %d), lost %d", held, got, epoch, lost.Load())
	}
}

// heldReplyKV is a zones bucket whose Update, once armed, is applied by the
// server but its reply held back until release is closed (a renewal in
// flight on a busy host).
type heldReplyKV struct {
	jetstream.KeyValue
	armed   atomic.Bool
	applied chan struct{}
	release chan struct{}
}

func (k *heldReplyKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	rev, err := k.KeyValue.Update(ctx, key, value, revision)
	if k.armed.CompareAndSwap(true, false) {
		close(k.applied)
		<-k.release
	}
	return rev, err
}

// A zone released while its lease's renewal is in flight (written by the
// server, its reply not yet taken) is released all the same: the lease
// still names this node at its epoch, at the renewal's revision. Deleting
// at the revision held before the renewal failed ("wrong last sequence"),
// and a draining node then kept the zone's lease until it expired, its
// players owned by nobody (actors/node TestDrainRedirectsClientsWithoutDisconnects
// under load: "player 2 owned 0 times after the drain").
func TestLeaseReleaseDuringRenewal(t *testing.T) {
	nc := natsServer(t)
	const ttl = 3 * time.Second
	kv := &heldReplyKV{KeyValue: zonesBucket(t, nc, ttl), applied: make(chan struct{}), release: make(chan struct{})}
	l, lost := countingLeases(t, kv, "a", ttl)
	defer l.Close(context.Background())
	if _, err := l.Claim(context.Background(), "z"); err != nil {
		t.Fatal(err)
	}
	kv.armed.Store(true)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		l.renewAll()
	}()
	<-kv.applied
	err := l.Release(context.Background(), "z")
	close(kv.release)
	<-renewed
	if err != nil {
		t.Fatalf("release during a renewal: %v", err)
	}
	if _, err := kv.Get(context.Background(), "z"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the lease is still in the bucket after its release (get: %v)", err)
	}
	if _, held := l.Held("z"); held || lost.Load() != 0 {
		t.Fatalf("after the release: held %v, lost %d; want neither", held, lost.Load())
	}
}

// A lease whose renewal came late is fenced (Valid false) though this node
// still holds it: WaitValid asks for a renewal at once and returns when it
// lands, so a write that must not be lost to a slow renewal (a drained
// zone's final checkpoints) goes ahead as owner. A lease gone is not
// waited for.
func TestLeaseWaitValidRenewsAFencedLease(t *testing.T) {
	nc := natsServer(t)
	const ttl = time.Minute // the renewal loop's own tick (TTL/6) comes after the test
	bucket := zonesBucket(t, nc, ttl)
	clock := new(atomic.Int64)
	t0 := time.Unix(1_000_000, 0)
	l, lost := countingLeases(t, bucket, "a", ttl)
	defer l.Close(context.Background())
	l.now = func() time.Time { return t0.Add(time.Duration(clock.Load())) }
	for _, z := range []string{"z", "gone"} {
		if _, err := l.Claim(context.Background(), z); err != nil {
			t.Fatal(err)
		}
	}
	clock.Store(int64(ttl - ttl/3 + time.Second)) // past the fence, before the give-up
	if l.Valid("z") {
		t.Fatal("valid past the fence without a renewal")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.WaitValid(ctx, "z"); err != nil {
		t.Fatalf("WaitValid: %v", err)
	}
	if !l.Valid("z") || lost.Load() != 0 {
		t.Fatalf("after WaitValid: valid %v, lost %d", l.Valid("z"), lost.Load())
	}
	// Deleted behind this node's back: the renewal finds it gone.
	clock.Add(int64(ttl - ttl/3 + time.Second))
	if err := bucket.Delete(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitValid(ctx, "gone"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("WaitValid of a lease gone: %v, want ErrNotHeld", err)
	}
}

// holdKV is a zones bucket whose Update of one key, once armed, is applied
// by the server but its reply held back until release is closed or the
// request's context ends (a renewal slow to come back on a busy host: the
// server wrote it, the reply is on its way). ended records how the held
// request's context ended.
type holdKV struct {
	jetstream.KeyValue
	key     string
	armed   atomic.Bool
	applied chan struct{}
	release chan struct{}
	ended   chan error
}

func newHoldKV(kv jetstream.KeyValue, key string) *holdKV {
	return &holdKV{KeyValue: kv, key: key, applied: make(chan struct{}), release: make(chan struct{}), ended: make(chan error, 1)}
}

func (k *holdKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	rev, err := k.KeyValue.Update(ctx, key, value, revision)
	if key == k.key && k.armed.CompareAndSwap(true, false) {
		close(k.applied)
		select {
		case <-k.release:
			k.ended <- nil
		case <-ctx.Done():
			k.ended <- ctx.Err()
			return 0, ctx.Err()
		}
	}
	return rev, err
}

// lastOK is when zone's lease was last renewed (as of the renewal's send).
func lastOK(l *Leases, zone string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.held[zone]; ok {
		return h.lastOK
	}
	return time.Time{}
}

// A renewal slow to come back holds back no other lease's: each lease
// renews on its own. (Renewed in rounds that waited for every renewal, one
// lease's slow reply kept the node's other leases from renewing until it
// came; on a starved host, where a round trip took seconds, a node's
// leases lapsed together.) The slow one still renews when its reply comes.
func TestLeaseRenewalsDoNotWaitForEachOther(t *testing.T) {
	nc := natsServer(t)
	const ttl = 12 * time.Second // renewals every 2 s; the held one is given up 11 s after its last
	kv := newHoldKV(zonesBucket(t, nc, ttl), "slow")
	l, lost := countingLeases(t, kv, "a", ttl)
	defer l.Close(context.Background())
	for _, z := range []string{"slow", "fast"} {
		if _, err := l.Claim(context.Background(), z); err != nil {
			t.Fatal(err)
		}
	}
	kv.armed.Store(true)
	<-kv.applied // slow's renewal is written, its reply held
	held := l.now()
	waitFor(t, 8*time.Second, "the fast lease renewed while the slow one's reply is held", func() bool {
		return lastOK(l, "fast").After(held)
	})
	before := lastOK(l, "slow")
	close(kv.release)
	waitFor(t, 5*time.Second, "the slow lease renewed by its late reply", func() bool { return lastOK(l, "slow").After(before) })
	for _, z := range []string{"slow", "fast"} {
		if _, ok := l.Held(z); !ok {
			t.Fatalf("zone %s not held", z)
		}
	}
	if n := lost.Load(); n != 0 {
		t.Fatalf("%d zones reported lost", n)
	}
}

// Close ends a renewal in flight instead of waiting for it (it could take
// until its lease is given up: 55 s here) and still releases the lease,
// at the revision the renewal moved it to; nobody is told it was lost.
func TestLeaseCloseEndsARenewalInFlight(t *testing.T) {
	nc := natsServer(t)
	const ttl = time.Minute
	bucket := zonesBucket(t, nc, ttl)
	kv := newHoldKV(bucket, "z")
	l, lost := countingLeases(t, kv, "a", ttl)
	if _, err := l.Claim(context.Background(), "z"); err != nil {
		t.Fatal(err)
	}
	kv.armed.Store(true)
	l.RenewNow()
	<-kv.applied
	l.Close(context.Background())
	if err := <-kv.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the renewal in flight ended with %v, want it canceled by Close", err)
	}
	if _, err := bucket.Get(context.Background(), "z"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the lease is still in the bucket after Close (get: %v)", err)
	}
	if n := lost.Load(); n != 0 {
		t.Fatalf("%d zones reported lost on Close", n)
	}
}
