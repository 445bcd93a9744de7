package ghost

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

var updatePoses = flag.Bool("update-poses", false, "rewrite testdata/mirror_poses.gz from a fresh recording")

const posesGolden = "testdata/mirror_poses.gz"

// poseArrival is one ghost section as it reached the client: its bytes and
// the local time it was read.
type poseArrival struct {
	at   time.Duration
	data []byte
}

// recordPoseStream records what a client received from a table over a lossy,
// reordering network: 32 entities (players and NPCs) walking, turning,
// stopping for a while and starting again (rest markers, StartLead), some
// leaving and re-entering the view (kills, creates); 10 % loss, 40–120 ms
// one way (so packets overtake each other: late groups, late positions).
func recordPoseStream(t *testing.T) []poseArrival {
	t.Helper()
	reg, pc, nc := newTestRegistry(t)
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(20, 26))
	const n = 32
	type walker struct {
		e      ViewEntry
		yaw    float64
		speed  float64
		restTo time.Duration
		outTo  time.Duration
	}
	ws := make([]walker, n)
	for i := range ws {
		c := pc
		if i%3 == 0 {
			c = nc
		}
		ws[i] = walker{e: ViewEntry{Entity: uint64(1000 + i), Class: c, Priority: 1 + float32(i%4),
			State: State{Pos: [3]float64{rng.Float64()*200 - 100, rng.Float64() * 4, rng.Float64()*200 - 100}, Health: 100}},
			yaw: rng.Float64() * 2 * math.Pi, speed: 1 + 5*rng.Float64()}
	}
	type inflight struct {
		seq             uint64
		sentAt, arrive  time.Duration
		fateAt          time.Duration
		dropped, landed bool
		data            []byte
	}
	var (
		pkts   []inflight
		out    []poseArrival
		view   []ViewEntry
		w      bitstream.Writer
		buf    = make([]byte, MaxPacketBytes)
		seq    uint64
		fate   int
		latent = func() time.Duration {
			return 40*time.Millisecond + time.Duration(rng.Int64N(int64(80*time.Millisecond)))
		}
	)
	const tick = 50 * time.Millisecond
	for now := time.Second; now < 21*time.Second; now += 10 * time.Millisecond {
		// Arrivals, in arrival order.
		var due []int
		for i := range pkts {
			if p := &pkts[i]; !p.dropped && !p.landed && p.arrive <= now {
				due = append(due, i)
			}
		}
		slices.SortStableFunc(due, func(a, b int) int { return int(pkts[a].arrive - pkts[b].arrive) })
		for _, i := range due {
			pkts[i].landed = true
			out = append(out, poseArrival{at: now, data: pkts[i].data})
		}
		if now%tick != 0 {
			continue
		}
		for fate < len(pkts) {
			p := &pkts[fate]
			if p.fateAt > now || (!p.dropped && !p.landed) {
				break
			}
			tab.OnFate(notify.Fate{Seq: p.seq, Delivered: !p.dropped, SentAt: p.sentAt})
			fate++
		}
		view = view[:0]
		for i := range ws {
			wk := &ws[i]
			switch {
			case now < wk.outTo:
				continue
			case rng.IntN(400) == 0:
				wk.outTo = now + time.Duration(1+rng.IntN(3))*time.Second
				continue
			}
			if now >= wk.restTo {
				if rng.IntN(60) == 0 {
					wk.restTo = now + time.Duration(200+rng.IntN(1500))*time.Millisecond
				} else {
					if rng.IntN(15) == 0 {
						wk.yaw = math.Remainder(wk.yaw+rng.Float64()*2-1, 2*math.Pi)
					}
					s := &wk.e.State
					d := wk.speed * tick.Seconds()
					s.Pos[0] = min(max(s.Pos[0]+d*math.Cos(wk.yaw), -500), 500)
					s.Pos[2] = min(max(s.Pos[2]+d*math.Sin(wk.yaw), -500), 500)
					s.Yaw = wk.yaw
				}
			}
			view = append(view, wk.e)
		}
		if err := tab.SetView(now, view); err != nil {
			t.Fatal(err)
		}
		seq++
		w.Reset(buf)
		if _, err := tab.Write(&w, seq, now); err != nil {
			t.Fatal(err)
		}
		p := inflight{seq: seq, sentAt: now, data: slices.Clone(w.Bytes())}
		if rng.Float64() < 0.1 {
			p.dropped, p.fateAt = true, now+300*time.Millisecond
		} else {
			p.arrive = now + latent()
			p.fateAt = p.arrive + latent()
		}
		pkts = append(pkts, p)
	}
	return out
}

func encodePoseStream(s []poseArrival) []byte {
	var b []byte
	for _, a := range s {
		b = binary.LittleEndian.AppendUint64(b, uint64(a.at))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(a.data)))
		b = append(b, a.data...)
	}
	return b
}

func decodePoseStream(b []byte) ([]poseArrival, error) {
	var s []poseArrival
	for len(b) > 0 {
		if len(b) < 12 {
			return nil, fmt.Errorf("truncated header")
		}
		at, n := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint32(b[8:])
		b = b[12:]
		if uint64(len(b)) < uint64(n) {
			return nil, fmt.Errorf("truncated section")
		}
		s = append(s, poseArrival{at: time.Duration(at), data: b[:n]})
		b = b[n:]
	}
	return s, nil
}

// replayPoses reads the stream into a fresh mirror and returns, after each
// arrival, a hash of every live ghost's pose (in id order) sampled at the
// mirror's render time and at offsets around it that reach before the
// oldest snapshot, between snapshots, on them, and past the newest
// (extrapolated, then held), with its mode and State.Pos.
func replayPoses(t *testing.T, s []poseArrival) ([]uint64, MirrorStats) {
	t.Helper()
	reg, _, _ := newTestRegistry(t)
	m, err := NewMirror(reg, DefaultMirrorConfig())
	if err != nil {
		t.Fatal(err)
	}
	var r bitstream.Reader
	var ids []uint32
	sums := make([]uint64, 0, len(s))
	var word [8]byte
	put := func(h io.Writer, v uint64) {
		binary.LittleEndian.PutUint64(word[:], v)
		h.Write(word[:])
	}
	for i, a := range s {
		r.Reset(a.data)
		if err := m.Read(&r, a.at); err != nil {
			t.Fatalf("arrival %d at %v: %v", i, a.at, err)
		}
		ids = ids[:0]
		for g := range m.All() {
			ids = append(ids, g.ID)
		}
		slices.Sort(ids)
		h := fnv.New64a()
		for _, id := range ids {
			g, _ := m.Lookup(id)
			put(h, uint64(id))
			for x := range 3 {
				put(h, math.Float64bits(g.State.Pos[x]))
			}
			rt := m.RenderTime(a.at)
			for _, off := range []time.Duration{-900, -400, -130, -37, 0, 1, 25, 50, 100, 160, 230, 333, 600} {
				p, mode := m.cfg.Interp.Sample(g, rt+off*time.Millisecond)
				for x := range 3 {
					put(h, math.Float64bits(p.Pos[x]))
				}
				put(h, math.Float64bits(p.Yaw))
				put(h, uint64(mode))
			}
			p, mode := m.Pose(g, a.at)
			put(h, math.Float64bits(p.Pos[0])^math.Float64bits(p.Pos[1])<<1^math.Float64bits(p.Pos[2])<<2^math.Float64bits(p.Yaw)<<3)
			put(h, uint64(mode))
		}
		sums = append(sums, h.Sum64())
	}
	return sums, m.Stats()
}

// TestMirrorPosesRecorded replays a recorded lossy, reordered stream
// (testdata/mirror_poses.gz: the sections and, after each, a hash of every
// ghost's poses) and requires the interpolated poses to be bit-identical to
// the recording's: the client's history layout and decode may change, what
// a renderer draws may not. Regenerate (only for a deliberate change of the
// poses, or of the wire format) with -update-poses.
func TestMirrorPosesRecorded(t *testing.T) {
	if *updatePoses {
		s := recordPoseStream(t)
		sums, st := replayPoses(t, s)
		var raw []byte
		raw = binary.LittleEndian.AppendUint32(raw, uint32(len(sums)))
		for _, v := range sums {
			raw = binary.LittleEndian.AppendUint64(raw, v)
		}
		raw = append(raw, encodePoseStream(s)...)
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		zw.Write(raw)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(posesGolden, z.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d arrivals, %d bytes; %+v", posesGolden, len(s), z.Len(), st)
	}
	zb, err := os.ReadFile(posesGolden)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(zb))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	n := int(binary.LittleEndian.Uint32(raw))
	want := make([]uint64, n)
	for i := range want {
		want[i] = binary.LittleEndian.Uint64(raw[4+8*i:])
	}
	s, err := decodePoseStream(raw[4+8*n:])
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != n {
		t.Fatalf("%d arrivals, %d hashes", len(s), n)
	}
	got, st := replayPoses(t, s)
	// The recording must exercise what the history holds: late values,
	// values without their reference, rest markers, creates and kills.
	if st.Older == 0 || st.Kills == 0 || st.Creates <= 32 || st.Updates < 5000 {
		t.Fatalf("the recording does not exercise the mirror: %+v", st)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("arrival %d of %d (at %v): poses hash %#x, recorded %#x: interpolation no longer returns the recorded poses",
				i, n, s[i].at, got[i], want[i])
		}
	}
	t.Logf("%d arrivals, poses identical; %+v", n, st)
}
