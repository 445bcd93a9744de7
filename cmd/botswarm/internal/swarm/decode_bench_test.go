package swarm

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/session"
)

// mirrorSections records n ghost sections as an observing bot's server end
// writes them: one a 50 ms tick, every packet delivered, a view of players
// walking at 5 m/s (turning now and then), each stamped with its last
// applied move (Extra[0..1], 30 a second) as a zone stamps them.
func mirrorSections(tb testing.TB, players, n int) (*ghost.Registry, [][]byte, []time.Duration) {
	reg, secs, times, _ := recordSections(tb, players, n, true)
	return reg, secs, times
}

// recordSections is mirrorSections that also returns the last view;
// stamped false leaves Extra 0 (a zone with NoSeqExtra).
func recordSections(tb testing.TB, players, n int, stamped bool) (*ghost.Registry, [][]byte, []time.Duration, []ghost.ViewEntry) {
	tb.Helper()
	reg := session.DefaultRegistry()
	tab, err := ghost.NewTable(reg, ghost.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	pc, _ := reg.Lookup(ghost.PlayerClassID)
	rng := rand.New(rand.NewPCG(3, 4))
	view := make([]ghost.ViewEntry, players)
	yaw := make([]float64, players)
	for i := range view {
		yaw[i] = rng.Float64() * 2 * math.Pi
		view[i] = ghost.ViewEntry{Entity: DefaultConfig().PlayerBase + uint64(i)<<pidSessionBits + 1, Class: pc, Priority: 1,
			State: ghost.State{Pos: [3]float64{rng.Float64()*100 - 50, 0, rng.Float64()*100 - 50}, Health: 100}}
	}
	var (
		w     bitstream.Writer
		buf   [session.MaxPacketSize]byte
		secs  [][]byte
		times []time.Duration
	)
	now := time.Second
	for seq := uint64(1); len(secs) < n; seq++ {
		now += 50 * time.Millisecond
		for i := range view {
			if rng.IntN(20) == 0 {
				yaw[i] += rng.Float64() - 0.5
			}
			s := &view[i].State
			s.Pos[0] += 0.25 * math.Cos(yaw[i])
			s.Pos[2] += 0.25 * math.Sin(yaw[i])
			s.Yaw = yaw[i]
			if stamped {
				mv := uint64(now / (time.Second / 30))
				s.Extra = [4]uint32{uint32(mv), uint32(mv >> 32)}
			}
		}
		if err := tab.SetView(now, view); err != nil {
			tb.Fatal(err)
		}
		w.Reset(buf[:])
		if _, err := tab.Write(&w, seq, now); err != nil {
			tb.Fatal(err)
		}
		tab.OnFate(notify.Fate{Seq: seq, Delivered: true, SentAt: now})
		secs = append(secs, append([]byte(nil), w.Bytes()...))
		times = append(times, now)
	}
	return reg, secs, times, view
}

// BenchmarkMirrorSection is an observing bot's ghost decode alone: one op
// reads one recorded section of 64 moving players (every one updated:
// position, yaw and the move stamp) into the bot's mirror, as
// session.Client.readSections does. The first 10 sections (the creates) are
// read before the timer; past mirrorSectionsLen ops the mirror starts over
// (callgrind: keep both counts below 590 so every op is an update section).
func BenchmarkMirrorSection(b *testing.B) { benchMirrorSection(b, true) }

// BenchmarkMirrorSectionUnstamped is BenchmarkMirrorSection without the
// players' move stamps (a zone with NoSeqExtra): what the stamps cost the
// decode (callgrind, a section of 64: 69.7 k instructions stamped, 58.7 k
// without; 384 bytes against 202. Before ExtraGroup's one-window Decode
// and the mirror's one-window records: 94.0 k and 68.5 k).
func BenchmarkMirrorSectionUnstamped(b *testing.B) { benchMirrorSection(b, false) }

func benchMirrorSection(b *testing.B, stamped bool) {
	_, secs, times, _ := recordSections(b, 64, mirrorSectionsLen, stamped)
	reg := session.DefaultRegistry() // the bots' too
	var m *ghost.Mirror
	var r bitstream.Reader
	i := 0
	start := func() {
		var err error
		if m, err = ghost.NewMirror(reg, ghost.DefaultMirrorConfig()); err != nil {
			b.Fatal(err)
		}
		for i = 0; i < 10; i++ {
			r.Reset(secs[i])
			if err := m.Read(&r, times[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	start()
	u0, upd := m.Stats().Updates, uint64(0)
	ops := 0
	b.ReportAllocs()
	for b.Loop() {
		if i == len(secs) {
			upd += m.Stats().Updates - u0
			start()
			u0 = m.Stats().Updates
		}
		r.Reset(secs[i])
		if err := m.Read(&r, times[i]+5*time.Millisecond); err != nil {
			b.Fatal(err)
		}
		i++
		ops++
	}
	b.ReportMetric(float64(upd+m.Stats().Updates-u0)/float64(ops), "updates/op")
	b.ReportMetric(float64(len(secs[len(secs)-1])), "bytes/section")
}

const mirrorSectionsLen = 600

// BenchmarkMirrorSectionCold is BenchmarkMirrorSection over mirrorsCold
// mirrors, as a swarm's observers are: op j reads section j / mirrorsCold
// into mirror j % mirrorsCold, so each mirror's ghosts (64 of ≈ 1.2 KB, the
// interpolation history most of it) are out of the caches when its next
// section comes, as with a thousand observing bots beside a server. The
// first 10 sections are read before the timer; callgrind or cachegrind
// counts must stay below mirrorsCold·590 ops (every op an update section).
func BenchmarkMirrorSectionCold(b *testing.B) {
	_, secs, times := mirrorSections(b, 64, mirrorSectionsLen)
	reg := session.DefaultRegistry()
	ms := make([]*ghost.Mirror, mirrorsCold)
	var r bitstream.Reader
	for k := range ms {
		m, err := ghost.NewMirror(reg, ghost.DefaultMirrorConfig())
		if err != nil {
			b.Fatal(err)
		}
		for i := range 10 {
			r.Reset(secs[i])
			if err := m.Read(&r, times[i]); err != nil {
				b.Fatal(err)
			}
		}
		ms[k] = m
	}
	j := 0
	b.ReportAllocs()
	for b.Loop() {
		i := 10 + j/mirrorsCold
		if i == len(secs) {
			b.Fatalf("past the %d recorded sections", len(secs))
		}
		r.Reset(secs[i])
		if err := ms[j%mirrorsCold].Read(&r, times[i]+5*time.Millisecond); err != nil {
			b.Fatal(err)
		}
		j++
	}
}

const mirrorsCold = 1000
