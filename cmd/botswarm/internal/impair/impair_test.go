package impair

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/netsim"
)

func TestParseMixOverridesBase(t *testing.T) {
	base := Profile{Loss: 0.01, Latency: 10 * time.Millisecond}
	mix, err := ParseMix("70%:latency=20ms ; bad=30%:loss=20%,burst=4,jitter=5ms,reorder=1%,duplicate=0.5%", base)
	if err != nil {
		t.Fatal(err)
	}
	if len(mix) != 2 {
		t.Fatalf("got %d profiles", len(mix))
	}
	a, b := mix[0], mix[1]
	if a.Name != "p1" || math.Abs(a.Weight-0.7) > 1e-12 || a.Latency != 20*time.Millisecond || a.Loss != 0.01 {
		t.Errorf("first profile = %+v", a)
	}
	if b.Name != "bad" || math.Abs(b.Weight-0.3) > 1e-12 || b.Loss != 0.2 || b.Burst != 4 ||
		b.Jitter != 5*time.Millisecond || b.Latency != 10*time.Millisecond || b.Reorder != 0.01 || b.Duplicate != 0.005 {
		t.Errorf("second profile = %+v", b)
	}
}

func TestParseMixPlainWeightsNormalise(t *testing.T) {
	mix, err := ParseMix("3:loss=1%;1:loss=2%", Profile{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(mix[0].Weight-0.75) > 1e-12 || math.Abs(mix[1].Weight-0.25) > 1e-12 {
		t.Fatalf("weights %v %v", mix[0].Weight, mix[1].Weight)
	}
}

func TestParseMixErrors(t *testing.T) {
	tests := []struct{ name, spec, want string }{
		{"empty", " ; ", "empty mix"},
		{"no colon", "70% loss=1%", "WEIGHT:key=value"},
		{"zero weight", "0:loss=1%", "positive"},
		{"unknown key", "1:lag=5ms", "unknown key"},
		{"bad duration", "1:latency=5", "latency=5"},
		{"loss above one", "1:loss=150%", "probability"},
		{"burst too lossy", "1:loss=90%,burst=2", "too high for bursts"},
		{"no equals", "1:loss", "key=value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseMix(tc.spec, Profile{})
			if !errors.Is(err, ErrSpec) {
				t.Fatalf("err = %v, want ErrSpec", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestGilbertMatchesLossAndBurst(t *testing.T) {
	p := Profile{Loss: 0.05, Burst: 4}
	c := p.Link(1)
	if c.Burst == nil {
		t.Fatal("no burst model")
	}
	g := *c.Burst
	if got := g.PGoodToBad / (g.PGoodToBad + g.PBadToGood); math.Abs(got-0.05) > 1e-12 {
		t.Errorf("long-run loss %v", got)
	}
	if got := g.MeanBurst(); math.Abs(got-4) > 1e-12 {
		t.Errorf("mean burst %v", got)
	}
	// And netsim agrees over many packets.
	l, err := netsim.NewLink(c)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200000
	for i := range n {
		now := time.Duration(i) * time.Millisecond
		l.Send(now, []byte{1})
		l.Deliver(now, nil)
	}
	if loss := float64(l.Stats().Dropped.Loss) / n; math.Abs(loss-0.05) > 0.005 {
		t.Errorf("simulated loss %v", loss)
	}
}

func TestLinkPlainLossHasNoBurst(t *testing.T) {
	c := Profile{Loss: 0.1, Burst: 1}.Link(3)
	if c.Burst != nil || c.Loss != 0.1 || c.Seed != 3 {
		t.Fatalf("config %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestAssignExactShares(t *testing.T) {
	mix := []Profile{{Weight: 0.7}, {Weight: 0.25}, {Weight: 0.05}}
	for _, n := range []int{0, 1, 7, 100, 1001} {
		got := Assign(mix, n, 42)
		if len(got) != n {
			t.Fatalf("n=%d: %d assignments", n, len(got))
		}
		counts := make([]int, len(mix))
		for _, i := range got {
			counts[i]++
		}
		for i, p := range mix {
			if d := math.Abs(float64(counts[i]) - p.Weight*float64(n)); d >= 1 {
				t.Errorf("n=%d profile %d: %d bots, want ≈ %v", n, i, counts[i], p.Weight*float64(n))
			}
		}
	}
	a, b := Assign(mix, 100, 1), Assign(mix, 100, 2)
	same := true
	for i := range a {
		same = same && a[i] == b[i]
	}
	if same {
		t.Error("different seeds gave the same placement")
	}
	c := Assign(mix, 100, 1)
	for i := range a {
		if a[i] != c[i] {
			t.Fatal("same seed gave a different placement")
		}
	}
}

func TestParseRatio(t *testing.T) {
	for s, want := range map[string]float64{"5%": 0.05, "0.05": 0.05, "0": 0, "100%": 1} {
		got, err := ParseRatio(s)
		if err != nil || math.Abs(got-want) > 1e-12 {
			t.Errorf("ParseRatio(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"2", "-1%", "x", "NaN"} {
		if _, err := ParseRatio(s); !errors.Is(err, ErrSpec) {
			t.Errorf("ParseRatio(%q) err = %v", s, err)
		}
	}
}

func TestProfileString(t *testing.T) {
	p := Profile{Loss: 0.1, Burst: 3, Latency: 20 * time.Millisecond, Jitter: time.Millisecond, Reorder: 0.02, Duplicate: 0.01}
	s := p.String()
	again, err := ParseMix("1:"+s, Profile{})
	if err != nil {
		t.Fatal(err)
	}
	again[0].Weight, again[0].Name = 0, ""
	if again[0] != p {
		t.Fatalf("%q re-parsed to %+v", s, again[0])
	}
	if (Profile{}).String() != "perfect" || !(Profile{}).Perfect() {
		t.Error("zero profile is perfect")
	}
}

func FuzzParseMix(f *testing.F) {
	for _, s := range []string{"70%:latency=20ms,loss=1%;30%:loss=20%,burst=4", "bad=1:jitter=5ms", ";", "1:loss=99%,burst=200"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		mix, err := ParseMix(spec, Profile{})
		if err != nil {
			if !errors.Is(err, ErrSpec) {
				t.Fatalf("error %v does not wrap ErrSpec", err)
			}
			return
		}
		var sum float64
		for _, p := range mix {
			if err := p.Validate(); err != nil {
				t.Fatalf("accepted invalid profile %+v: %v", p, err)
			}
			if err := p.Link(1).Validate(); err != nil {
				t.Fatalf("profile %+v gives invalid netsim config: %v", p, err)
			}
			sum += p.Weight
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("weights sum to %v", sum)
		}
		if got := Assign(mix, 37, 1); len(got) != 37 {
			t.Fatalf("Assign gave %d", len(got))
		}
	})
}

func TestHitchSlack(t *testing.T) {
	tick, win := 50*time.Millisecond, 2*time.Second
	if s := (Profile{}).HitchSlack(tick, win); s != 0 {
		t.Fatalf("perfect link: slack %v", s)
	}
	if s := (Profile{Jitter: 10 * time.Millisecond}).HitchSlack(tick, win); s != 20*time.Millisecond {
		t.Fatalf("jitter only: slack %v", s)
	}
	var prev time.Duration
	for _, loss := range []float64{0.001, 0.02, 0.05, 0.2, 0.5} {
		s := Profile{Loss: loss}.HitchSlack(tick, win)
		if s < prev || s%tick != 0 || s > win {
			t.Fatalf("loss %v: slack %v (previous %v)", loss, s, prev)
		}
		prev = s
	}
	// 5 % each way: a tick is missed with q ≈ 9.75 %; four in a row happen
	// in fewer than 1 % of 40-tick windows, three in more.
	if s := (Profile{Loss: 0.05}).HitchSlack(tick, win); s != 4*tick {
		t.Fatalf("5%% loss: slack %v, want 4 ticks", s)
	}
	if b, i := (Profile{Loss: 0.05, Burst: 4}).HitchSlack(tick, win), (Profile{Loss: 0.05}).HitchSlack(tick, win); b <= i {
		t.Fatalf("bursts of 4 (%v) must allow longer gaps than independent loss (%v)", b, i)
	}
	if s := (Profile{Loss: 1}).HitchSlack(tick, win); s != win {
		t.Fatalf("total loss: slack %v", s)
	}
	mix := []Profile{{Name: "good", Weight: 0.995}, {Name: "tiny bad tail", Weight: 0.005, Loss: 0.5}}
	if s := MixHitchSlack(mix, tick, win); s != 0 {
		t.Fatalf("a 0.5 %% tail cannot move the p99: slack %v", s)
	}
	mix[1].Weight = 0.3
	if s := MixHitchSlack(mix, tick, win); s != (Profile{Loss: 0.5}).HitchSlack(tick, win) {
		t.Fatalf("a 30 %% bad share sets the slack: %v", s)
	}
}
