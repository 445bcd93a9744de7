package cluster

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// A stream over a lossy, in-order hop (what core NATS is across a restart:
// messages lost, never reordered): every batch is delivered once, in
// order, whatever is lost — single batches, runs, the tail, acks.
func TestReliableStreamDeliversEveryBatchOnceInOrder(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		var out arqOut
		var in arqIn
		var got []uint64
		floors := map[uint64]uint64{} // the floor each batch carries, stamped when first sent
		now := time.Duration(0)
		lossy := func() bool { return rng.Float64() < 0.2 }
		toReceiver := func(seq, floor uint64) {
			if lossy() {
				return
			}
			switch v, _ := in.admit(seq, floor, now); v {
			case deliver:
				got = append(got, seq)
				if !lossy() {
					out.ack(in.acked(), now)
				}
			case duplicate:
				if !lossy() {
					out.ack(in.acked(), now)
				}
			case early:
				if !lossy() {
					out.ack(in.acked(), now)
					for _, h := range out.resend(in.acked()+1, now) {
						toReceiverOnce(&in, &got, h.seq, floors[h.seq], now)
					}
				}
			}
		}
		const batches = 500
		for k := 0; k < batches; k++ {
			seq, floor := out.stamp()
			floors[seq] = floor
			out.hold(seq, make([]byte, 100), now)
			toReceiver(seq, floor)
			now += 10 * time.Millisecond
			if out.due(now) {
				for _, h := range out.timedOut(now) {
					toReceiver(h.seq, floors[h.seq])
				}
			}
		}
		// The sender keeps going after the last batch until everything is
		// acknowledged (its flushes keep coming: controls every tick).
		for i := 0; len(out.held) > 0; i++ {
			if i > 10000 {
				t.Fatalf("seed %d: %d batches never acknowledged", seed, len(out.held))
			}
			now += 10 * time.Millisecond
			if out.due(now) {
				for _, h := range out.timedOut(now) {
					toReceiver(h.seq, floors[h.seq])
				}
			}
		}
		want := make([]uint64, batches)
		for i := range want {
			want[i] = uint64(i + 1)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: delivered %d batches, not 1..%d once each in order", seed, len(got), batches)
		}
	}
}

// A peer silent past a whole timeout's resend (paused, NATS away) gets
// only the oldest held batch at each later timeout, as a probe, the
// timeout doubling up to arqRTO << arqMaxBackoff; the first ack that frees
// anything ends it, and the next timeout sends everything still held.
// Everything every 300 ms sent a peer paused 10 s 21–22 k copies.
func TestSilentPeerGetsProbes(t *testing.T) {
	var out arqOut
	for range 100 {
		s, _ := out.stamp()
		out.hold(s, make([]byte, 100), 0)
	}
	var sent []int
	var at []time.Duration
	for now := time.Duration(0); now <= 10*time.Second; now += 10 * time.Millisecond {
		if out.due(now) {
			sent = append(sent, len(out.timedOut(now)))
			at = append(at, now)
		}
	}
	want := []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 1200 * time.Millisecond, 2400 * time.Millisecond,
		4800 * time.Millisecond, 7200 * time.Millisecond, 9600 * time.Millisecond}
	if !slices.Equal(at, want) {
		t.Fatalf("timeouts at %v, want %v", at, want)
	}
	if !slices.Equal(sent, []int{100, 1, 1, 1, 1, 1, 1}) {
		t.Fatalf("batches sent at the timeouts %v, want all 100 then one probe each", sent)
	}
	out.ack(40, 10*time.Second) // the peer is back
	if out.due(10*time.Second + arqRTO - time.Millisecond) {
		t.Fatal("due before a plain timeout after the ack")
	}
	now := 10*time.Second + arqRTO
	if !out.due(now) {
		t.Fatal("not due a plain timeout after the ack: the backoff outlived the peer's silence")
	}
	if got := out.timedOut(now); len(got) != 60 || got[0].seq != 41 {
		t.Fatalf("after the ack the timeout sent %d batches, want the 60 still held from 41", len(got))
	}
}

// The bridge's sends run the probe: past the first unanswered resend, a
// timeout sends one held batch, not all of them.
func TestSendReliableProbesASilentPeer(t *testing.T) {
	var now time.Duration
	b := &Bridge{m: new(Metrics), warned: map[string]bool{}, cfg: Config{Now: func() time.Duration { return now }}}
	var o arqOut
	send := func() { b.sendReliable(&o, "gw.w.zone.x", KindZone, &pb.ZoneBatch{}, func(_, _, _ uint64) {}) }
	for range 50 {
		send()
	}
	now = arqRTO
	send() // the first timeout: all 50 again
	if got := b.m.BatchesResent.Load(); got != 50 {
		t.Fatalf("first timeout resent %d, want 50", got)
	}
	now = 2 * arqRTO
	send() // unanswered: a probe
	if got := b.m.BatchesResent.Load(); got != 51 {
		t.Fatalf("second timeout resent %d in all, want 51 (one probe)", got)
	}
}

// A node that stops serving a zone forgets the receiving ends of the
// zone's streams: when the zone comes back (handed back after a pause),
// its proxies' streams start again at their floors, and the batches its
// owners meanwhile acknowledged are not counted as skipped. A link's
// stream is not the zone's, and stays.
func TestZoneStreamsForgottenWithTheirZone(t *testing.T) {
	b := &Bridge{m: new(Metrics), warned: map[string]bool{}, served: map[string]*nats.Subscription{}, cfg: Config{Now: func() time.Duration { return 0 }}}
	for seq := uint64(1); seq <= 5; seq++ {
		if !b.admitBatch("n1", "x1z1", 7, seq, 1) || !b.admitBatch("n1", "", 8, seq, 1) {
			t.Fatalf("batch %d not delivered", seq)
		}
	}
	b.Unserve("x1z1")
	// Back after its owners meanwhile acknowledged up to 29: the sender
	// holds from 30 on.
	if b.admitBatch("n1", "x1z1", 7, 30, 30) != true {
		t.Fatal("the zone's stream, heard again at its floor, not delivered")
	}
	if got := b.m.BatchesSkipped.Load(); got != 0 {
		t.Fatalf("%d batches counted skipped: the zone's old stream state outlived the zone", got)
	}
	if b.admitBatch("n1", "", 8, 5, 1) {
		t.Fatal("the link's stream forgotten with the zone: batch 5 delivered twice")
	}
}

// toReceiverOnce delivers a resent batch without loss (the test's nak path).
func toReceiverOnce(in *arqIn, got *[]uint64, seq, floor uint64, now time.Duration) {
	if v, _ := in.admit(seq, floor, now); v == deliver {
		*got = append(*got, seq)
	}
}

// A receiver that first hears of a stream mid-way starts there; one that
// asks for batches its sender no longer holds jumps to the sender's floor
// and counts what it skipped; a resend request is not repeated at once.
func TestReliableStreamEdges(t *testing.T) {
	var in arqIn
	if v, _ := in.admit(40, 40, 0); v != deliver || in.next != 41 {
		t.Fatalf("first batch of a stream heard mid-way: %v, want deliver", v)
	}
	if v, _ := in.admit(42, 41, time.Millisecond); v != early {
		t.Fatalf("a gap: %v, want early (ask for a resend)", v)
	}
	if v, _ := in.admit(43, 41, 2*time.Millisecond); v != earlyQuiet {
		t.Fatalf("a gap again right after asking: %v, want earlyQuiet", v)
	}
	v, jumped := in.admit(50, 45, time.Second)
	if v != early || jumped != 4 || in.next != 45 {
		t.Fatalf("sender floor 45 past the receiver's 41: %v, jumped %d, next %d; want early, 4, 45", v, jumped, in.next)
	}
	if v, _ := in.admit(44, 44, time.Second); v != duplicate {
		t.Fatalf("a batch below the floor: %v, want duplicate", v)
	}
	var out arqOut
	for range 3 {
		s, _ := out.stamp()
		out.hold(s, make([]byte, arqMaxHeld/2-arqHeldOverhead), 0)
	}
	if len(out.held) != 2 || out.held[0].seq != 2 {
		t.Fatalf("holding %d batches from %d, want the newest 2 within arqMaxHeld", len(out.held), out.held[0].seq)
	}
	if _, floor := out.stamp(); floor != 2 {
		t.Fatalf("floor %d, want 2 (the oldest held)", floor)
	}
}

// A peer that opens stream after stream cannot grow a receiver's memory
// without bound: past arqMaxStreams the least recently heard is forgotten.
func TestReliableStreamsBounded(t *testing.T) {
	b := &Bridge{m: new(Metrics), warned: map[string]bool{}, cfg: Config{Now: func() time.Duration { return 0 }}}
	now := time.Duration(0)
	b.cfg.Now = func() time.Duration { return now }
	for s := uint64(1); s <= arqMaxStreams+100; s++ {
		now += time.Millisecond
		if !b.admitBatch("n2", "", s, 1, 1) {
			t.Fatalf("stream %d: its first batch was not delivered", s)
		}
	}
	if len(b.ins) > arqMaxStreams {
		t.Fatalf("%d streams tracked, bound %d", len(b.ins), arqMaxStreams)
	}
	if _, kept := b.ins[1]; kept {
		t.Fatal("the least recently heard stream was kept")
	}
	if b.m.StreamsEvicted.Load() == 0 {
		t.Fatal("evictions not counted")
	}
}

// A sender whose peer stopped acknowledging (paused past its resends)
// thins its held batches, the oldest first, before it drops any: a link's
// views go, its events, controls and rejoins stay held, so the peer gets
// them when it wakes. (Dropped whole, a 10 s SIGSTOP of a node with 90
// bots skipped 794 batches and lost 41 echoes.) Thinning that frees too
// little still ends in drops, within the bound.
func TestHeldBatchesThinBeforeTheyDrop(t *testing.T) {
	out := arqOut{thin: func(d []byte) []byte { return d[:len(d)/8] }}
	const n = 16
	for range n {
		s, _ := out.stamp()
		out.hold(s, make([]byte, arqMaxHeld/8), 0)
	}
	if len(out.held) != n || out.held[0].seq != 1 {
		t.Fatalf("holding %d batches from %d, want all %d: thinned, none dropped", len(out.held), out.held[0].seq, n)
	}
	if out.bytes > arqMaxHeld || len(out.held[0].data) != arqMaxHeld/64 || len(out.held[n-1].data) != arqMaxHeld/8 {
		t.Fatalf("%d bytes held (bound %d), oldest %d, newest %d: want the oldest thinned, the newest whole",
			out.bytes, arqMaxHeld, len(out.held[0].data), len(out.held[n-1].data))
	}
	sum := 0
	for _, h := range out.held {
		sum += len(h.data) + arqHeldOverhead
	}
	if sum != out.bytes {
		t.Fatalf("bytes %d, held %d", out.bytes, sum)
	}
	out.ack(4, 0)
	if out.thinned > len(out.held) || out.held[0].seq != 5 {
		t.Fatalf("after an ack: thinned %d of %d held from %d", out.thinned, len(out.held), out.held[0].seq)
	}

	keep := arqOut{thin: func(d []byte) []byte { return d }}
	for range 3 {
		s, _ := keep.stamp()
		keep.hold(s, make([]byte, arqMaxHeld/2-arqHeldOverhead), 0)
	}
	if len(keep.held) != 2 || keep.bytes > arqMaxHeld {
		t.Fatalf("thinning that frees nothing: %d held, %d bytes; want the newest 2 within the bound", len(keep.held), keep.bytes)
	}

	// Batches thinned to almost nothing are bounded in number too.
	tiny := arqOut{thin: func(d []byte) []byte { return d[:1] }}
	for range 100_000 {
		s, _ := tiny.stamp()
		tiny.hold(s, make([]byte, 64), 0)
	}
	if max := arqMaxHeld / (1 + arqHeldOverhead); len(tiny.held) > max {
		t.Fatalf("%d tiny batches held, want at most %d", len(tiny.held), max)
	}
}

// A link holds ConnBatches and thins their views; a zone proxy holds
// ZoneBatches and thins their replicas: each stream is made with the
// thinning of its own kind.
func TestStreamsThinTheirOwnKind(t *testing.T) {
	link := newLinkActor(nil, nil)
	views, _ := proto.Marshal(&pb.ConnBatch{FromNode: "n1", Controls: []*pb.ControlUpdate{{Player: 1}},
		PackedViews: make([]byte, arqMaxHeld/4)})
	proxy := newZoneProxy(nil, "x1z1")
	reps, _ := proto.Marshal(&pb.ZoneBatch{Zone: "x1z1", Items: []*pb.ZoneItem{
		{Item: &pb.ZoneItem_Input{Input: &pb.PlayerInput{Player: 3}}},
		{Item: &pb.ZoneItem_Replicas{Replicas: &pb.ReplicaBatch{From: strings.Repeat("x", arqMaxHeld/4), To: "x1z1"}}}}})
	for _, c := range []struct {
		name string
		o    *arqOut
		data []byte
		left func([]byte) bool
	}{
		{"link", &link.arq, views, func(d []byte) bool {
			var cb pb.ConnBatch
			return proto.Unmarshal(d, &cb) == nil && len(cb.PackedViews) == 0 && len(cb.Controls) == 1
		}},
		{"zone proxy", &proxy.arq, reps, func(d []byte) bool {
			var zb pb.ZoneBatch
			return proto.Unmarshal(d, &zb) == nil && len(zb.Items) == 1 && zb.Items[0].GetInput() != nil
		}},
	} {
		for range 6 {
			s, _ := c.o.stamp()
			c.o.hold(s, c.data, 0)
		}
		if len(c.o.held) != 6 || !c.left(c.o.held[0].data) {
			t.Fatalf("%s: %d batches held, the oldest thinned %v; want all 6, the oldest without its bulk", c.name, len(c.o.held), c.left(c.o.held[0].data))
		}
	}
}

// checkThinned encodes full, thins it with thin, decodes the result into
// got and compares it with want.
func checkThinned(t *testing.T, thin func([]byte) []byte, full, got, want proto.Message) {
	t.Helper()
	data, err := proto.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(thin(data), got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("thinned:\n%v\nwant:\n%v", got, want)
	}
}

// A link's batch thinned keeps everything but its views; one without
// views, or one that does not decode, is kept as it is.
func TestThinConnBatchDropsOnlyViews(t *testing.T) {
	full := &pb.ConnBatch{FromNode: "n1", Stream: 3, Seq: 9, Floor: 2,
		Controls:    []*pb.ControlUpdate{{Player: 1, LastApplied: 5}},
		Outputs:     []*pb.EventsOut{{Player: 1, EventGen: 4, EventLast: []uint64{2}, Events: []*pb.GameEvent{{Class: 1, Payload: []byte("echo")}}}},
		Rejoins:     []*pb.Rejoin{{Player: 2, Zone: "x1z1", Epoch: 7}},
		Views:       []*pb.ViewUpdate{{Player: 1, Tick: 3}},
		PackedViews: make([]byte, 4096)}
	want := proto.Clone(full).(*pb.ConnBatch)
	want.Views, want.PackedViews = nil, nil
	checkThinned(t, thinConnBatch, full, &pb.ConnBatch{}, want)
	bare, _ := proto.Marshal(&pb.ConnBatch{FromNode: "n1", Controls: []*pb.ControlUpdate{{Player: 1}}})
	for _, d := range [][]byte{bare, {0xff, 0xff, 0xff}} {
		if t2 := thinConnBatch(d); string(t2) != string(d) {
			t.Fatalf("thinConnBatch(%x) = %x, want it unchanged", d, t2)
		}
	}
}

// A zone proxy's batch thinned keeps everything but its replica batches.
func TestThinZoneBatchDropsOnlyReplicas(t *testing.T) {
	full := &pb.ZoneBatch{Zone: "x1z1", ZoneEpoch: 7, FromNode: "n1", Stream: 2, Seq: 5, Floor: 1, Items: []*pb.ZoneItem{
		{Item: &pb.ZoneItem_Replicas{Replicas: &pb.ReplicaBatch{From: "x0z1", To: "x1z1"}}},
		{Item: &pb.ZoneItem_Input{Input: &pb.PlayerInput{Player: 3, EventGen: 4}}},
		{Item: &pb.ZoneItem_Handoff{Handoff: &pb.HandoffItem{Msg: &pb.HandoffMessage{Entity: 3, From: "x0z1", To: "x1z1"}}}},
		{Item: &pb.ZoneItem_Replicas{Replicas: &pb.ReplicaBatch{From: "x0z1", To: "x1z1"}}},
		{Item: &pb.ZoneItem_Join{Join: &pb.PlayerJoin{Player: 5}}},
	}}
	want := proto.Clone(full).(*pb.ZoneBatch)
	want.Items = []*pb.ZoneItem{want.Items[1], want.Items[2], want.Items[4]}
	checkThinned(t, thinZoneBatch, full, &pb.ZoneBatch{}, want)
	bare, _ := proto.Marshal(&pb.ZoneBatch{Zone: "x1z1", Items: []*pb.ZoneItem{{Item: &pb.ZoneItem_Join{Join: &pb.PlayerJoin{Player: 5}}}}})
	for _, d := range [][]byte{bare, {0xff, 0xff, 0xff}} {
		if t2 := thinZoneBatch(d); string(t2) != string(d) {
			t.Fatalf("thinZoneBatch(%x) = %x, want it unchanged", d, t2)
		}
	}
}
