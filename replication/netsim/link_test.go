package netsim

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

const ms = time.Millisecond

// TestSIM1Acceptance is SEED-CHECKLIST SIM-1: 100k packets, loss 10%, latency 100 ms, jitter
// ±20 ms → loss 10 ± 0.5%, mean delay 100 ± 2 ms, every delay in [80, 120] ms, reordering
// observed when jitter may reorder and never observed when it may not.
func TestSIM1Acceptance(t *testing.T) {
	tests := []struct {
		name         string
		allowReorder bool
		n            int
		meanLo       time.Duration // FIFO clamping pushes the mean up, never down
		meanHi       time.Duration
		minAtMost    time.Duration // the smallest delay seen must reach down to this
	}{
		{name: "jitter reorders", allowReorder: true, n: 100_000, meanLo: 98 * ms, meanHi: 102 * ms, minAtMost: 81 * ms},
		{name: "jitter keeps FIFO", allowReorder: false, n: 50_000, meanLo: 98 * ms, meanHi: 120 * ms, minAtMost: 85 * ms},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := mustLink(t, Config{
				Loss: 0.10, Latency: 100 * ms, Jitter: 20 * ms,
				AllowJitterReorder: tc.allowReorder, Seed: 7,
			})
			const interval = ms
			got := drive(t, l, tc.n, interval, 64)

			loss := 1 - float64(len(got))/float64(tc.n)
			if loss < 0.095 || loss > 0.105 {
				t.Errorf("measured loss %.4f, want 0.10 ± 0.005", loss)
			}
			if s := l.Stats(); s.Dropped.Loss != uint64(tc.n-len(got)) || s.Sent != uint64(tc.n) {
				t.Errorf("Stats %+v disagree with %d sent, %d delivered", s, tc.n, len(got))
			}
			var sum, lo, hi time.Duration = 0, math.MaxInt64, 0
			reordered := 0
			var maxID uint64
			for k, d := range got {
				delay := d.at - time.Duration(d.id)*interval
				sum += delay
				lo, hi = min(lo, delay), max(hi, delay)
				if k > 0 && d.id < maxID {
					reordered++
				}
				maxID = max(maxID, d.id)
			}
			mean := sum / time.Duration(len(got))
			if mean < tc.meanLo || mean > tc.meanHi {
				t.Errorf("mean delay %v, want in [%v, %v]", mean, tc.meanLo, tc.meanHi)
			}
			if lo < 80*ms || hi > 120*ms {
				t.Errorf("delays span [%v, %v], want within [80ms, 120ms]", lo, hi)
			}
			// Jitter must actually spread the delays over (nearly) the whole window.
			if lo > tc.minAtMost || hi < 119*ms {
				t.Errorf("delays span only [%v, %v]; jitter ±20ms not applied", lo, hi)
			}
			if s := l.Stats(); s.Reordered != uint64(reordered) {
				t.Errorf("Stats.Reordered = %d, observed %d", s.Reordered, reordered)
			}
			if tc.allowReorder && reordered == 0 {
				t.Error("no reordering observed with AllowJitterReorder")
			}
			if !tc.allowReorder && reordered != 0 {
				t.Errorf("%d packets reordered although AllowJitterReorder is false", reordered)
			}
		})
	}
}

// lossRuns sends n packets through a zero-delay link l, one per millisecond from start, and
// returns the lengths of the runs of consecutive lost packets.
func lossRuns(l *Link, start time.Duration, n int) (runs []int, lost int) {
	p := make([]byte, 16)
	run := 0
	for i := range n {
		now := start + time.Duration(i)*ms
		l.Send(now, p)
		if l.Deliver(now, nil) == 0 {
			run++
			lost++
			continue
		}
		if run > 0 {
			runs = append(runs, run)
			run = 0
		}
	}
	if run > 0 {
		runs = append(runs, run)
	}
	return runs, lost
}

func TestGilbertElliottBurstLength(t *testing.T) {
	tests := []struct {
		name string
		ge   GilbertElliott
	}{
		{name: "mean burst 4", ge: GilbertElliott{PGoodToBad: 0.05, PBadToGood: 0.25, LossBad: 1}},
		{name: "mean burst 2", ge: GilbertElliott{PGoodToBad: 0.05, PBadToGood: 0.5, LossBad: 1}},
		{name: "mean burst 10", ge: GilbertElliott{PGoodToBad: 0.05, PBadToGood: 0.1, LossBad: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const n = 100_000
			l := mustLink(t, Config{Loss: 0.9 /* must be ignored */, Burst: &tc.ge, Seed: 3})
			runs, lost := lossRuns(l, 0, n)
			total := 0
			for _, r := range runs {
				total += r
			}
			mean := float64(total) / float64(len(runs))
			if want := tc.ge.MeanBurst(); math.Abs(mean-want) > 0.08*want {
				t.Errorf("mean burst %.3f over %d bursts, want %.3f ± 8%%", mean, len(runs), want)
			}
			rate := float64(lost) / n
			want := tc.ge.PGoodToBad / (tc.ge.PGoodToBad + tc.ge.PBadToGood)
			if math.Abs(rate-want) > 0.10*want {
				t.Errorf("loss rate %.4f, want %.4f ± 10%%", rate, want)
			}
			if got := l.Stats().Dropped.Loss; got != uint64(lost) {
				t.Errorf("Stats.Dropped.Loss = %d, counted %d", got, lost)
			}
		})
	}
}

// With Bernoulli loss the bursts are short (mean 1/(1−p)); Gilbert–Elliott at the same average
// rate must produce visibly longer bursts, or Burst is not in effect.
func TestGilbertElliottVersusBernoulli(t *testing.T) {
	const n = 50_000
	ge := &GilbertElliott{PGoodToBad: 0.025, PBadToGood: 0.2, LossBad: 1} // ≈ 11% loss, bursts of 5
	geRuns, _ := lossRuns(mustLink(t, Config{Burst: ge, Seed: 9}), 0, n)
	beRuns, _ := lossRuns(mustLink(t, Config{Loss: 0.11, Seed: 9}), 0, n)
	mean := func(r []int) float64 {
		s := 0
		for _, v := range r {
			s += v
		}
		return float64(s) / float64(len(r))
	}
	if g, b := mean(geRuns), mean(beRuns); g < 3*b {
		t.Errorf("Gilbert–Elliott mean burst %.2f not clearly longer than Bernoulli %.2f", g, b)
	}
}

func TestDuplicate(t *testing.T) {
	const n = 50_000
	l := mustLink(t, Config{Duplicate: 0.2, Latency: 30 * ms, Jitter: 10 * ms, AllowJitterReorder: true, Seed: 11})
	got := drive(t, l, n, ms, 32)
	s := l.Stats()
	if rate := float64(s.Duplicated) / n; math.Abs(rate-0.2) > 0.01 {
		t.Errorf("duplication rate %.4f, want 0.20 ± 0.01", rate)
	}
	if s.Delivered != n+s.Duplicated || len(got) != int(s.Delivered) {
		t.Errorf("delivered %d (stats %d), want Sent+Duplicated = %d", len(got), s.Delivered, n+s.Duplicated)
	}
	times := make(map[uint64][]time.Duration, n)
	for _, d := range got {
		times[d.id] = append(times[d.id], d.at)
	}
	twice, differ := 0, 0
	for id, ts := range times {
		switch len(ts) {
		case 1:
		case 2:
			twice++
			if ts[0] != ts[1] {
				differ++
			}
		default:
			t.Fatalf("packet %d delivered %d times", id, len(ts))
		}
	}
	if len(times) != n || uint64(twice) != s.Duplicated {
		t.Errorf("%d distinct packets (want %d), %d delivered twice (Duplicated %d)", len(times), n, twice, s.Duplicated)
	}
	// Independent delays: with ±10 ms in nanoseconds, equal delivery times are a fluke.
	if differ < twice*99/100 {
		t.Errorf("only %d of %d duplicates got their own delay", differ, twice)
	}
}

// A duplicate is its own copy: the receiver may scribble over one without touching the other.
func TestDuplicateCopiesIndependent(t *testing.T) {
	l := mustLink(t, Config{Duplicate: 1, Seed: 1})
	l.Send(0, []byte("hello"))
	var seen [][]byte
	l.Deliver(0, func(p []byte) {
		seen = append(seen, bytes.Clone(p))
		for k := range p {
			p[k] = 'X'
		}
	})
	if len(seen) != 2 || string(seen[0]) != "hello" || string(seen[1]) != "hello" {
		t.Fatalf("got %q, want two intact copies of hello", seen)
	}
}

func TestBandwidthThroughput(t *testing.T) {
	const (
		bps   = 1_000_000
		size  = 1000
		every = 4 * ms // offered 2 Mbit/s: twice the bottleneck
		n     = 5000   // 20 s
	)
	l := mustLink(t, Config{BandwidthBps: bps, QueueBytes: 20_000, Latency: 20 * ms, Seed: 1})
	got := drive(t, l, n, every, size)
	s := l.Stats()
	if s.Dropped.Queue == 0 {
		t.Fatal("an overloaded bottleneck dropped nothing")
	}
	if s.Dropped.Queue+uint64(len(got)) != n || s.Dropped.Total() != s.Dropped.Queue {
		t.Errorf("Stats %+v: delivered %d", s, len(got))
	}
	// Measure after the queue has filled: bytes delivered per second of virtual time.
	first, last := got[len(got)/10], got[len(got)-1]
	bits := float64((len(got)-len(got)/10-1)*size*8) / (last.at - first.at).Seconds()
	if math.Abs(bits-bps)/bps > 0.001 {
		t.Errorf("throughput %.0f bit/s, want %d ± 0.1%%", bits, bps)
	}
	// Backlogged, deliveries are spaced by exactly one serialization time.
	for k := len(got) / 10; k < len(got)-1; k++ {
		if gap := got[k+1].at - got[k].at; gap != 8*ms {
			t.Fatalf("delivery %d→%d gap %v, want 8ms (1000 B at 1 Mbit/s)", k, k+1, gap)
		}
	}
	// About half the offered load must have been tail-dropped.
	if frac := float64(s.Dropped.Queue) / n; frac < 0.48 || frac > 0.52 {
		t.Errorf("queue drops %.3f of offered, want ≈ 0.5", frac)
	}
}

func TestBandwidthQueue(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Config
		burst     int // packets sent at t=0
		size      int
		wantDeliv []time.Duration
		wantDrops uint64
	}{
		{
			name:      "idle link adds one serialization delay",
			cfg:       Config{BandwidthBps: 1_000_000, Latency: 5 * ms},
			burst:     1,
			size:      1000,
			wantDeliv: []time.Duration{13 * ms},
		},
		{
			name:      "burst beyond queue is tail-dropped",
			cfg:       Config{BandwidthBps: 1_000_000, QueueBytes: 10_000, MaxPacket: 1000},
			burst:     20,
			size:      1000,
			wantDeliv: []time.Duration{8 * ms, 16 * ms, 24 * ms, 32 * ms, 40 * ms, 48 * ms, 56 * ms, 64 * ms, 72 * ms, 80 * ms},
			wantDrops: 10,
		},
		{
			name:      "default queue is 64 KiB",
			cfg:       Config{BandwidthBps: 8_000_000, MaxPacket: 1024},
			burst:     100,
			size:      1024, // 64 KiB = 64 packets of 1 KiB, 1.024 ms each
			wantDeliv: seq(64, 1024*time.Microsecond),
			wantDrops: 36,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := mustLink(t, tc.cfg)
			p := make([]byte, tc.size)
			for range tc.burst {
				l.Send(0, p)
			}
			var got []time.Duration
			for {
				at, ok := l.NextDelivery()
				if !ok {
					break
				}
				l.Deliver(at, func([]byte) { got = append(got, at) })
			}
			if !slices.Equal(got, tc.wantDeliv) {
				t.Errorf("delivered at %v, want %v", got, tc.wantDeliv)
			}
			if d := l.Stats().Dropped.Queue; d != tc.wantDrops {
				t.Errorf("Dropped.Queue = %d, want %d", d, tc.wantDrops)
			}
		})
	}
}

func seq(n int, step time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for k := range out {
		out[k] = time.Duration(k+1) * step
	}
	return out
}

// A rate that does not divide a nanosecond evenly must not drift: 10,000 back-to-back
// 1200-byte packets at 7 Mbit/s take 96,000,000 bits / 7e6 = 13.714285714… s.
func TestBandwidthNoDrift(t *testing.T) {
	const n = 10_000
	l := mustLink(t, Config{BandwidthBps: 7_000_000, QueueBytes: MaxQueueBytes, MaxInFlight: n})
	p := make([]byte, 1200)
	for range n {
		l.Send(0, p)
	}
	var last time.Duration
	for l.Pending() > 0 {
		at, _ := l.NextDelivery()
		l.Deliver(at, nil)
		last = at
	}
	want := time.Duration(n * 1200 * 8 * int64(time.Second) / 7_000_000)
	if d := last - want; d < -1 || d > 1 {
		t.Errorf("last packet leaves at %v, want %v (±1ns)", last, want)
	}
}

// trace runs a fixed workload with every impairment enabled and returns the delivery trace.
func trace(t *testing.T, seed uint64) []delivery {
	l := mustLink(t, Config{
		Burst:   &GilbertElliott{PGoodToBad: 0.02, PBadToGood: 0.3, LossGood: 0.01, LossBad: 0.8},
		Latency: 40 * ms, Jitter: 15 * ms, AllowJitterReorder: true,
		Reorder: 0.05, Duplicate: 0.05,
		BandwidthBps: 2_000_000, QueueBytes: 8_000,
		Seed: seed,
	})
	return drive(t, l, 5000, 2*ms, 200)
}

func TestDeterminism(t *testing.T) {
	a, b, c := trace(t, 42), trace(t, 42), trace(t, 43)
	if !slices.Equal(a, b) {
		t.Error("same seed gave different delivery traces")
	}
	if slices.Equal(a, c) {
		t.Error("different seeds gave identical delivery traces")
	}
	if len(a) < 4000 {
		t.Errorf("only %d deliveries out of 5000 sends: workload too lossy to compare", len(a))
	}
}

func TestSetConfig(t *testing.T) {
	t.Run("loss 95% then 0%", func(t *testing.T) {
		const n = 10_000
		l := mustLink(t, Config{Loss: 0.95, Seed: 5})
		_, lost1 := lossRuns(l, 0, n)
		if err := l.SetConfig(Config{Seed: 999}); err != nil {
			t.Fatal(err)
		}
		_, lost2 := lossRuns(l, n*ms, n)
		if r := float64(lost1) / n; math.Abs(r-0.95) > 0.01 {
			t.Errorf("loss before SetConfig %.4f, want 0.95 ± 0.01", r)
		}
		if lost2 != 0 {
			t.Errorf("%d packets lost after SetConfig to a perfect link", lost2)
		}
		if l.Config().Seed != 5 {
			t.Errorf("SetConfig replaced the seed: %d", l.Config().Seed)
		}
	})
	t.Run("keeps random stream and state", func(t *testing.T) {
		cfg := Config{Loss: 0.2, Latency: 30 * ms, Jitter: 10 * ms, Duplicate: 0.1,
			Burst: &GilbertElliott{PGoodToBad: 0.1, PBadToGood: 0.3, LossBad: 0.9}, Seed: 8}
		run := func(reset bool) []delivery {
			l := mustLink(t, cfg)
			var out []delivery
			p := make([]byte, 8)
			for i := range 4000 {
				now := time.Duration(i) * ms
				if reset && i == 2000 {
					if err := l.SetConfig(cfg); err != nil {
						t.Fatal(err)
					}
				}
				l.Send(now, payload(p, uint64(i)))
				l.Deliver(now, func(p []byte) { id, _ := checkPayload(p, 8); out = append(out, delivery{id, now}) })
			}
			return out
		}
		if a, b := run(false), run(true); !slices.Equal(a, b) {
			t.Error("SetConfig with the same config changed the delivery trace")
		}
	})
	for _, tc := range []struct {
		name         string
		allowReorder bool
		want         []delivery
	}{
		// Lower latency lets the new packet overtake the old one...
		{name: "pending packets keep their times", allowReorder: true, want: []delivery{{2, 10 * ms}, {1, 100 * ms}}},
		// ...unless FIFO is required: then it waits behind the earlier packet.
		{name: "FIFO survives a latency drop", allowReorder: false, want: []delivery{{1, 100 * ms}, {2, 100 * ms}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := mustLink(t, Config{Latency: 100 * ms, AllowJitterReorder: tc.allowReorder})
			l.Send(0, []byte{1})
			if err := l.SetConfig(Config{AllowJitterReorder: tc.allowReorder}); err != nil {
				t.Fatal(err)
			}
			l.Send(10*ms, []byte{2})
			var got []delivery
			for l.Pending() > 0 {
				at, _ := l.NextDelivery()
				l.Deliver(at, func(p []byte) { got = append(got, delivery{uint64(p[0]), at}) })
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("switch to FIFO orders behind every earlier packet", func(t *testing.T) {
		l := mustLink(t, Config{Latency: 50 * ms, Jitter: 40 * ms, AllowJitterReorder: true, Seed: 3})
		for i := range 200 {
			l.Send(time.Duration(i)*ms/10, []byte{byte(i)})
		}
		if err := l.SetConfig(Config{}); err != nil { // perfect link, FIFO
			t.Fatal(err)
		}
		l.Send(20*ms, []byte{200})
		var order []byte
		for l.Pending() > 0 {
			at, _ := l.NextDelivery()
			l.Deliver(at, func(p []byte) { order = append(order, p[0]) })
		}
		if len(order) != 201 || order[200] != 200 {
			t.Errorf("packet sent after switching to FIFO delivered at position %d of %d, want last",
				slices.Index(order, 200), len(order))
		}
	})
	t.Run("invalid config rejected and old one kept", func(t *testing.T) {
		l := mustLink(t, Config{Latency: 7 * ms})
		if err := l.SetConfig(Config{Loss: 2}); err == nil {
			t.Fatal("SetConfig accepted Loss 2")
		}
		if l.Config().Latency != 7*ms {
			t.Errorf("config changed by a rejected SetConfig: %+v", l.Config())
		}
	})
}

func TestMaxInFlight(t *testing.T) {
	const limit = 100
	l := mustLink(t, Config{MaxInFlight: limit, Latency: time.Second, Jitter: 100 * ms, Duplicate: 0.5, Seed: 2})
	p := make([]byte, 1200)
	sent := 0
	for i := range 30_000 { // 3 s: the link fills, drains and refills several times
		now := time.Duration(i) * 100 * time.Microsecond // 10,000 packets/s against a 1 s delay
		l.Send(now, p)
		sent++
		if i%7 == 0 {
			l.Deliver(now, nil)
		}
		if l.Pending() > limit {
			t.Fatalf("Pending %d exceeds MaxInFlight %d", l.Pending(), limit)
		}
	}
	s := l.Stats()
	if s.Dropped.InFlight == 0 {
		t.Error("no InFlight drops although the link was flooded")
	}
	// Memory: the buffer pool never grows beyond the bound.
	if len(l.slab) > limit {
		t.Errorf("%d payload buffers allocated, want ≤ %d", len(l.slab), limit)
	}
	l.Deliver(time.Hour, nil)
	checkConservation(t, l)
	if l.Pending() != 0 || int(s.Sent) != sent {
		t.Errorf("Pending %d after draining, Sent %d want %d", l.Pending(), s.Sent, sent)
	}
}

// The zero Config is a perfect link: every packet is delivered at its send time, in send order.
func TestZeroConfigIsPerfect(t *testing.T) {
	l := mustLink(t, Config{})
	times := []time.Duration{0, 0, 0, 3 * ms, 3 * ms, 10 * ms, time.Second, time.Second}
	var got []delivery
	for i, now := range times {
		l.Send(now, []byte{byte(i)})
		if at, ok := l.NextDelivery(); !ok || at != now {
			t.Fatalf("NextDelivery = %v, %v after Send at %v", at, ok, now)
		}
		if i+1 < len(times) && times[i+1] == now {
			continue // several packets at one instant: deliver them together
		}
		l.Deliver(now, func(p []byte) { got = append(got, delivery{uint64(p[0]), now}) })
	}
	if len(got) != len(times) {
		t.Fatalf("delivered %d of %d", len(got), len(times))
	}
	for i, d := range got {
		if d.id != uint64(i) || d.at != times[i] {
			t.Errorf("delivery %d = packet %d at %v, want packet %d at %v", i, d.id, d.at, i, times[i])
		}
	}
	if s := l.Stats(); s.Dropped.Total() != 0 || s.Reordered != 0 || s.Duplicated != 0 {
		t.Errorf("perfect link stats %+v", s)
	}
}

// Packets due at the same instant come out in send order, also behind a latency.
func TestTiesInSendOrder(t *testing.T) {
	l := mustLink(t, Config{Latency: 50 * ms})
	for i := range 300 {
		l.Send(0, []byte{byte(i), byte(i >> 8)})
	}
	if l.Deliver(50*ms-1, nil) != 0 {
		t.Fatal("delivered before the latency elapsed")
	}
	next := 0
	n := l.Deliver(50*ms, func(p []byte) {
		if got := int(p[0]) | int(p[1])<<8; got != next {
			t.Fatalf("got packet %d, want %d", got, next)
		}
		next++
	})
	if n != 300 || next != 300 {
		t.Errorf("delivered %d, want 300", n)
	}
}

func TestPayloadIntact(t *testing.T) {
	tests := []struct {
		name string
		size int
	}{
		{name: "empty", size: 0},
		{name: "one byte", size: 1},
		{name: "game datagram", size: 1200},
		{name: "max packet", size: DefaultMaxPacket},
	}
	l := mustLink(t, Config{Latency: 10 * ms, Jitter: 5 * ms, AllowJitterReorder: true, Seed: 4})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := make([]byte, tc.size)
			for k := range p {
				p[k] = byte(k*7 + tc.size)
			}
			want := bytes.Clone(p)
			l.Send(0, p)
			for k := range p { // the caller reuses its buffer at once
				p[k] ^= 0xff
			}
			var got [][]byte
			l.Deliver(time.Second, func(q []byte) { got = append(got, bytes.Clone(q)) })
			if len(got) != 1 || !bytes.Equal(got[0], want) {
				t.Errorf("delivered %d packets, first differs from what was sent", len(got))
			}
		})
	}
	t.Run("too big", func(t *testing.T) {
		before := l.Stats()
		l.Send(0, make([]byte, DefaultMaxPacket+1))
		if l.Pending() != 0 || l.Stats().Dropped.TooBig != before.Dropped.TooBig+1 {
			t.Errorf("oversized packet: Pending %d, Stats %+v", l.Pending(), l.Stats())
		}
	})
}

// Reorder holds back a fraction of packets by ReorderDelay; each of them is overtaken.
func TestReorder(t *testing.T) {
	const n = 20_000
	l := mustLink(t, Config{Latency: 20 * ms, Reorder: 0.1, ReorderDelay: 10 * ms, Seed: 6})
	got := drive(t, l, n, ms, 16)
	held, heldEarly := 0, 0
	for _, d := range got {
		switch delay := d.at - time.Duration(d.id)*ms; delay {
		case 20 * ms:
		case 30 * ms:
			held++
			if d.id < n-10 {
				heldEarly++ // sent at least 10 ms before the end: a later packet overtakes it
			}
		default:
			t.Fatalf("packet %d delayed %v, want 20ms or 30ms", d.id, delay)
		}
	}
	if frac := float64(held) / n; math.Abs(frac-0.1) > 0.01 {
		t.Errorf("held back %.4f of packets, want 0.10 ± 0.01", frac)
	}
	if r := l.Stats().Reordered; r < uint64(heldEarly) || r > uint64(held) {
		t.Errorf("Stats.Reordered = %d, want in [%d, %d] (every held-back packet is overtaken)", r, heldEarly, held)
	}
}

func TestReorderDelayDefault(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want time.Duration
	}{
		{name: "no jitter", cfg: Config{Reorder: 0.1}, want: DefaultReorderDelay},
		{name: "twice the jitter", cfg: Config{Reorder: 0.1, Jitter: 7 * ms}, want: 14 * ms},
		{name: "explicit", cfg: Config{Reorder: 0.1, Jitter: 7 * ms, ReorderDelay: 3 * ms}, want: 3 * ms},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustLink(t, tc.cfg).Config().ReorderDelay; got != tc.want {
				t.Errorf("ReorderDelay = %v, want %v", got, tc.want)
			}
		})
	}
}

// Jitter larger than the latency clamps delays at zero instead of delivering into the past.
func TestJitterClampedAtZero(t *testing.T) {
	l := mustLink(t, Config{Latency: 2 * ms, Jitter: 10 * ms, AllowJitterReorder: true, Seed: 1})
	got := drive(t, l, 5000, ms, 8)
	zero := 0
	for _, d := range got {
		delay := d.at - time.Duration(d.id)*ms
		if delay < 0 || delay > 12*ms {
			t.Fatalf("delay %v outside [0, 12ms]", delay)
		}
		if delay == 0 {
			zero++
		}
	}
	if zero == 0 {
		t.Error("no delay was clamped to zero")
	}
}

func TestSendDeliverAllocs(t *testing.T) {
	l := mustLink(t, Config{Loss: 0.05, Latency: 50 * ms, Jitter: 10 * ms, Reorder: 0.01,
		Duplicate: 0.01, BandwidthBps: 10_000_000, Seed: 1})
	p := make([]byte, 1200)
	var now time.Duration
	step := func() {
		now += ms
		l.Send(now, p)
		l.Deliver(now, func([]byte) {})
	}
	for range 1000 { // fill the pool and the heap to steady state
		step()
	}
	if a := testing.AllocsPerRun(5000, step); a != 0 {
		t.Errorf("Send+Deliver allocates %.2f times per packet in steady state, want 0", a)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{name: "zero", cfg: Config{}, ok: true},
		{name: "default", cfg: DefaultConfig(), ok: true},
		{name: "everything", ok: true, cfg: Config{Loss: 1, Burst: &GilbertElliott{1, 1, 1, 1}, Latency: MaxDelay,
			Jitter: MaxDelay, Reorder: 1, ReorderDelay: MaxDelay, Duplicate: 1, BandwidthBps: MaxBandwidthBps,
			QueueBytes: MaxQueueBytes, MaxInFlight: MaxInFlightCap, MaxPacket: MaxPacketLimit}},
		{name: "loss negative", cfg: Config{Loss: -0.1}},
		{name: "loss above one", cfg: Config{Loss: 1.01}},
		{name: "loss NaN", cfg: Config{Loss: math.NaN()}},
		{name: "burst p good→bad", cfg: Config{Burst: &GilbertElliott{PGoodToBad: 2}}},
		{name: "burst p bad→good", cfg: Config{Burst: &GilbertElliott{PBadToGood: -1}}},
		{name: "burst loss good", cfg: Config{Burst: &GilbertElliott{LossGood: math.Inf(1)}}},
		{name: "burst loss bad", cfg: Config{Burst: &GilbertElliott{LossBad: math.NaN()}}},
		{name: "latency negative", cfg: Config{Latency: -1}},
		{name: "latency too long", cfg: Config{Latency: MaxDelay + 1}},
		{name: "jitter negative", cfg: Config{Jitter: -1}},
		{name: "reorder", cfg: Config{Reorder: 1.5}},
		{name: "reorder delay negative", cfg: Config{ReorderDelay: -ms}},
		{name: "duplicate", cfg: Config{Duplicate: -0.5}},
		{name: "bandwidth negative", cfg: Config{BandwidthBps: -1}},
		{name: "bandwidth huge", cfg: Config{BandwidthBps: MaxBandwidthBps + 1}},
		{name: "queue negative", cfg: Config{QueueBytes: -1}},
		{name: "queue huge", cfg: Config{QueueBytes: MaxQueueBytes + 1}},
		{name: "queue below one packet", cfg: Config{BandwidthBps: 1e6, QueueBytes: 1000}},
		{name: "queue below one packet, default MaxPacket", cfg: Config{BandwidthBps: 1e6, QueueBytes: 1499}},
		{name: "queue of exactly one packet", cfg: Config{BandwidthBps: 1e6, QueueBytes: 1500}, ok: true},
		{name: "in-flight negative", cfg: Config{MaxInFlight: -1}},
		{name: "in-flight huge", cfg: Config{MaxInFlight: MaxInFlightCap + 1}},
		{name: "max packet negative", cfg: Config{MaxPacket: -1}},
		{name: "max packet huge", cfg: Config{MaxPacket: MaxPacketLimit + 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.ok != (err == nil) {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			_, nerr := NewLink(tc.cfg)
			if tc.ok != (nerr == nil) {
				t.Fatalf("NewLink error %v, want ok=%v", nerr, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrConfig) {
				t.Errorf("error %v does not wrap ErrConfig", err)
			}
		})
	}
}

// The link copies Burst: changing the caller's struct afterwards must not change the link.
func TestBurstCopied(t *testing.T) {
	ge := &GilbertElliott{LossGood: 0}
	l := mustLink(t, Config{Burst: ge})
	ge.LossGood = 1
	if _, lost := lossRuns(l, 0, 100); lost != 0 {
		t.Errorf("%d lost after mutating the caller's GilbertElliott", lost)
	}
}

func BenchmarkLinkSendDeliver(b *testing.B) {
	l, err := NewLink(Config{Loss: 0.02, Latency: 50 * ms, Jitter: 10 * ms, AllowJitterReorder: true, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	p := make([]byte, 1200)
	var now time.Duration
	sink := 0
	deliver := func(q []byte) { sink += len(q) }
	for range 200 { // reach steady state (≈ 50 packets in flight) before measuring
		now += ms
		l.Send(now, p)
		l.Deliver(now, deliver)
	}
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		now += ms
		l.Send(now, p)
		l.Deliver(now, deliver)
	}
	if sink == 0 {
		b.Fatal("nothing delivered")
	}
}
