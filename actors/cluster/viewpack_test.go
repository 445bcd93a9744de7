package cluster

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// viewScene is a crowd seen by one player, changing tick by tick the way a
// zone's does: most entities walk, a few stand, some leave and others
// enter the interest set, now and then a name, health or class changes.
type viewScene struct {
	rng     *rand.Rand
	classes []*ghost.Class
	next    uint64
	cur     []ghost.ViewEntry
}

func newViewScene(reg *ghost.Registry, n int, seed uint64) *viewScene {
	s := &viewScene{rng: rand.New(rand.NewPCG(seed, 1)), next: 1}
	for _, id := range []uint16{ghost.PlayerClassID, ghost.NPCClassID} {
		c, _ := reg.Lookup(id)
		s.classes = append(s.classes, c)
	}
	for range n {
		s.cur = append(s.cur, s.fresh())
	}
	return s
}

func (s *viewScene) fresh() ghost.ViewEntry {
	s.next++
	e := ghost.ViewEntry{Entity: s.next*7 + 1<<33, Class: s.classes[s.rng.IntN(2)], Priority: s.rng.Float32()}
	e.State.Pos = [3]float64{s.rng.Float64()*1000 - 500, 0, s.rng.Float64()*1000 - 500}
	e.State.Vel = [3]float64{s.rng.Float64() - 0.5, 0, s.rng.Float64() - 0.5}
	e.State.Health = int32(s.rng.IntN(200) - 50)
	e.State.Name = ghost.MustName("bot")
	e.State.Extra = [4]uint32{1, 2, uint32(s.rng.Uint64()), 1 << 31}
	return e
}

// step advances the scene one tick.
func (s *viewScene) step() []ghost.ViewEntry {
	for i := range s.cur {
		e := &s.cur[i]
		if i%5 != 0 { // four in five walk
			for k := range 3 {
				e.State.Pos[k] += e.State.Vel[k] / 20
			}
			e.State.Yaw += 0.01
			e.Priority = s.rng.Float32()
		}
		switch s.rng.IntN(50) {
		case 0:
			e.State.Health--
		case 1:
			e.State.Name = ghost.MustName("renamed-" + string(rune('a'+s.rng.IntN(26))))
		case 2:
			e.Class = s.classes[s.rng.IntN(2)]
		case 3:
			e.ChangedMask = s.rng.Uint64()
		case 4:
			e.State.Flags ^= 4
		}
	}
	if len(s.cur) > 0 && s.rng.IntN(3) == 0 { // one leaves
		i := s.rng.IntN(len(s.cur))
		s.cur = append(s.cur[:i], s.cur[i+1:]...)
	}
	if s.rng.IntN(3) == 0 { // one enters, somewhere in the order
		i := s.rng.IntN(len(s.cur) + 1)
		s.cur = append(s.cur[:i], append([]ghost.ViewEntry{s.fresh()}, s.cur[i:]...)...)
	}
	if s.rng.IntN(10) == 0 && len(s.cur) > 2 { // the zone reorders
		s.rng.Shuffle(len(s.cur), func(i, j int) { s.cur[i], s.cur[j] = s.cur[j], s.cur[i] })
	}
	return s.cur
}

// packedFixture: a bridge with one local player whose connection is
// elsewhere in this process (its view slot is read directly).
func packedFixture(t *testing.T, player uint64) (*Bridge, *msg.ViewSlot) {
	t.Helper()
	b, _ := fuzzBridge(t)
	slot := new(msg.ViewSlot)
	b.mu.Lock()
	b.locals[player] = &msg.Join{Player: player, Conn: actor.NewPID(b.cfg.Sys.Address(), "conn"), Views: slot}
	b.mu.Unlock()
	t.Cleanup(func() { b.forgetLocal(player, nil, handshake.ReasonClientQuit) })
	return b, slot
}

// Every view a player's stream carries arrives exactly as the zone built
// it, keyframes and deltas alike, through membership changes, reorders
// and every kind of field change; deltas of a walking crowd are a fraction
// of a keyframe.
func TestPackedViewsRoundTrip(t *testing.T) {
	const player = 1<<40 + 5
	b, slot := packedFixture(t, player)
	scene := newViewScene(b.cfg.Registry, 200, 1)
	enc := viewEnc{stream: 99}
	gaps := b.m.ViewGaps.Load() // the bridge is shared with other tests
	var blob []byte
	var keySize, deltaSize, deltas int
	for tick := uint64(1); tick <= 3*keyframeEvery+7; tick++ {
		want := scene.step()
		blob = enc.appendView(blob[:0], player, tick, int64(tick)*50e6, 3, want)
		if err := b.deliverPacked("n2", blob); err != nil {
			t.Fatalf("tick %d: %v", tick, err)
		}
		v := slot.Take()
		if v == nil {
			t.Fatalf("tick %d: no view delivered", tick)
		}
		if v.Player != player || v.Tick != tick || v.Epoch != 3 || int64(v.ServerTime) != int64(tick)*50e6 {
			t.Fatalf("tick %d: header %d/%d/%d/%d", tick, v.Player, v.Tick, v.Epoch, v.ServerTime)
		}
		if !reflect.DeepEqual(v.Entries, want) {
			t.Fatalf("tick %d: %d entries decoded differ from the %d sent", tick, len(v.Entries), len(want))
		}
		v.Release()
		if (tick-1)%keyframeEvery == 0 {
			keySize = len(blob)
		} else {
			deltaSize += len(blob)
			deltas++
		}
	}
	if g := b.m.ViewGaps.Load() - gaps; g != 0 {
		t.Fatalf("%d gaps on a lossless stream", g)
	}
	if avg := deltaSize / deltas; avg*2 > keySize {
		t.Fatalf("a delta averages %d bytes, a keyframe %d: deltas should cost well under half", avg, keySize)
	}
	t.Logf("200 entries: keyframe %d bytes, delta %d bytes on average", keySize, deltaSize/deltas)
}

// A lost view breaks its stream: the deltas after it are dropped and
// counted, never applied to the wrong base, until the next keyframe
// restores the exact view.
func TestPackedViewsRecoverFromLoss(t *testing.T) {
	const player = 1<<40 + 6
	b, slot := packedFixture(t, player)
	scene := newViewScene(b.cfg.Registry, 50, 2)
	enc := viewEnc{stream: 7}
	gaps := b.m.ViewGaps.Load()
	var blob []byte
	for tick := uint64(1); tick <= 2*keyframeEvery+1; tick++ {
		want := scene.step()
		blob = enc.appendView(blob[:0], player, tick, 0, 1, want)
		if tick == 5 {
			continue // lost on the way
		}
		if err := b.deliverPacked("n2", blob); err != nil {
			t.Fatal(err)
		}
		v := slot.Take()
		switch {
		case tick > 5 && tick <= keyframeEvery:
			if v != nil {
				t.Fatalf("tick %d: a delta past the lost view was applied", tick)
			}
		case v == nil:
			t.Fatalf("tick %d: no view", tick)
		case !reflect.DeepEqual(v.Entries, want):
			t.Fatalf("tick %d: view differs", tick)
		}
		if v != nil {
			v.Release()
		}
	}
	if g := b.m.ViewGaps.Load() - gaps; g != keyframeEvery-5 {
		t.Fatalf("counted %d gaps, want %d", g, keyframeEvery-5)
	}
	// A delta from another sender's stream never applies to this one.
	other := viewEnc{stream: 8, seq: 1}
	blob = other.appendView(blob[:0], player, 100, 0, 1, scene.step())
	if err := b.deliverPacked("n3", blob); err != nil || slot.Take() != nil {
		t.Fatalf("a delta of another stream was applied (err %v)", err)
	}
}

// The bridge's whole path: views a link packs reach the local player's
// ghost manager through a real ConnBatch encoding.
func TestPackedViewsInConnBatch(t *testing.T) {
	const player = 1<<40 + 8
	b, slot := packedFixture(t, player)
	scene := newViewScene(b.cfg.Registry, 30, 3)
	enc := viewEnc{stream: 1}
	want := scene.step()
	cb := &pb.ConnBatch{FromNode: "n2"}
	cb.PackedViews = enc.appendView(nil, player, 1, 0, 1, want)
	if err := b.deliverConn(cb); err != nil {
		t.Fatal(err)
	}
	v := slot.Take()
	if v == nil || !reflect.DeepEqual(v.Entries, want) {
		t.Fatal("view not delivered intact")
	}
	v.Release()
}

// Malformed blobs are refused with an error, never a panic or an
// allocation sized by a hostile count.
func TestPackedViewsRefuseGarbage(t *testing.T) {
	const player = 1<<40 + 9
	b, _ := packedFixture(t, player)
	scene := newViewScene(b.cfg.Registry, 10, 4)
	enc := viewEnc{stream: 1}
	good := enc.appendView(nil, player, 1, 0, 1, scene.step())
	for name, blob := range map[string][]byte{
		"truncated":  good[:len(good)-3],
		"huge count": {0x85, 0x80, 0x80, 0x01, 1, 0, 1, 1, 1, 0, 0xff, 0xff, 0xff, 0x0f, 2, 0, 0},
		"bad bits":   {0x85, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 1, 0, 1, 1, 1, 0, 1, 4, 0, 5, 0x80, 0x80, 0x01, 0},
	} {
		if err := b.deliverPacked("n2", blob); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzPackedViews feeds arbitrary bytes to the packed-view decoder.
func FuzzPackedViews(f *testing.F) {
	reg, _ := ghost.NewRegistry(ghost.DefaultBounds())
	_ = reg.Register(ghost.PlayerClass(nil), ghost.NPCClass(nil))
	scene := newViewScene(reg, 5, 5)
	enc := viewEnc{stream: 1}
	key := enc.appendView(nil, 1<<40+10, 1, 0, 1, scene.step())
	f.Add(key)
	f.Add(enc.appendView(append([]byte(nil), key...), 1<<40+10, 2, 0, 1, scene.step()))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, _ := packedFixture(t, 1<<40+10)
		_ = b.deliverPacked("n2", data)
	})
}

// BenchmarkViewPack: one crowded player's view (200 entries, four in five
// walking) packed as a delta and applied on the receiving side.
func BenchmarkViewPack(b *testing.B) {
	reg, _ := ghost.NewRegistry(ghost.DefaultBounds())
	_ = reg.Register(ghost.PlayerClass(nil), ghost.NPCClass(nil))
	scene := newViewScene(reg, 200, 6)
	// A scene without membership changes: the steady state of a crowd.
	views := make([][]ghost.ViewEntry, keyframeEvery)
	for i := range views {
		for k := range scene.cur {
			scene.cur[k].State.Pos[0] += 0.05
		}
		views[i] = append([]ghost.ViewEntry(nil), scene.cur...)
	}
	enc := viewEnc{stream: 1}
	var vb viewBase
	blob := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		blob = enc.appendView(blob[:0], 1, uint64(i), 0, 1, views[i%len(views)])
		r := packReader{b: blob}
		h := r.header()
		var base []ghost.ViewEntry
		if h.baseSeq != 0 {
			base = vb.cur
		}
		vb.next = r.entries(vb.next, base, h.count, reg)
		if r.err != nil {
			b.Fatal(r.err)
		}
		vb.cur, vb.next = vb.next, vb.cur
	}
	b.ReportMetric(float64(len(blob)), "bytes/view")
}
