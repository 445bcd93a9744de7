package ghostmgr

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// BenchmarkManagers1000 is the ghost managers of a node at 1,000 players
// (informative; run under callgrind or cachegrind to compare builds):
// 1,000 managers with 43 ghosts each in view out of a 1,000-entity zone (a
// quarter players, all walking). One op is one 50 ms zone tick: the zone
// publishes each player's view by references into the tick's snapshot,
// then each connection, in a fixed shuffled order, does what its pump
// does when the tick's packet is due — Take the view, apply the fates of
// the packets acked since (the previous one: fates ≈ 1 RTT late, one in
// twenty dropped), Apply the view, Write an 800-byte packet. Every table
// is cold when its turn comes, as on the server. Under callgrind,
// Manager.OnFate's and Manager.apply's inclusive costs over their calls
// are one fate's and one apply's.
func BenchmarkManagers1000(b *testing.B) {
	const conns, per, ents = 1000, 43, 1000
	reg, pc, nc, sw := snapWorld(b)
	rng := rand.New(rand.NewPCG(1, 1))
	states := make([]ghost.State, ents)
	classes := make([]*ghost.Class, ents)
	vel := make([][2]float64, ents)
	for i := range states {
		classes[i] = nc
		if i%4 == 0 {
			classes[i] = pc
		}
		states[i].Pos = [3]float64{rng.Float64()*200 - 100, 0, rng.Float64()*200 - 100}
		states[i].Health = 100
		states[i].Name = ghost.MustName("wolf")
		vel[i] = [2]float64{rng.Float64()*6 - 3, rng.Float64()*6 - 3}
	}
	ms := make([]*Manager, conns)
	slots := make([]msg.ViewSlot, conns)
	refs := make([][]ghost.ViewRef, conns)
	for k := range ms {
		var err error
		if ms[k], err = New(reg, ghost.DefaultConfig(), &slots[k], nil); err != nil {
			b.Fatal(err)
		}
		base := rng.IntN(ents - per)
		for j := range per {
			refs[k] = append(refs[k], ghost.NewViewRef(uint32(base+j), classes[base+j], rng.Float32()+0.01))
		}
	}
	order := rand.New(rand.NewPCG(5, 5)).Perm(conns)
	now, seq := time.Second, uint64(0)
	var buf [800]byte
	var w bitstream.Writer
	tick := func() {
		now += 50 * time.Millisecond
		for i := range states {
			states[i].Pos[0] += vel[i][0] / 20
			states[i].Pos[2] += vel[i][1] / 20
			states[i].Yaw = float64(i) + now.Seconds()
		}
		sn := sw.Next(ents)
		for i := range states {
			sn.Set(i, uint64(i+1), classes[i], &states[i])
		}
		sw.Seal(sn)
		for k := range ms {
			v := slots[k].NewViewRefs(per, 0)
			v.SetSnap(sn)
			v.Refs = append(v.Refs[:0], refs[k]...)
			v.Player, v.Tick = uint64(k+1), seq+1
			slots[k].Publish(v)
		}
		seq++
		for _, k := range order {
			m := ms[k]
			m.Take()
			if seq > 1 {
				m.OnFate(notify.Fate{Seq: seq - 1, Delivered: (seq+uint64(k))%20 != 0, SentAt: now - 50*time.Millisecond})
			}
			m.Apply(now)
			w.Reset(buf[:])
			if _, err := m.Write(&w, seq, now); err != nil {
				b.Fatal(err)
			}
		}
	}
	for range 40 { // every ghost created, the in-flight stores at their steady size
		tick()
	}
	b.ReportAllocs()
	for b.Loop() {
		tick()
	}
	b.StopTimer()
	var st Stats
	for _, m := range ms {
		s := m.Stats()
		st.Views += s.Views
		st.Fates += s.Fates
		st.Sections += s.Sections
		st.ViewErrors += s.ViewErrors
		st.Table.UnknownFates += s.Table.UnknownFates
	}
	if st.ViewErrors != 0 || st.Table.UnknownFates != 0 || st.Fates == 0 || st.Sections < st.Views/2 {
		b.Fatalf("the ghosts did not flow: %+v", st)
	}
	b.ReportMetric(float64(st.Fates)/float64(st.Sections), "fates/section")
	b.ReportMetric(float64(ms[0].Table().Len()), "ghosts/conn")
}
