// Package impair turns botswarm's impairment flags into per-bot
// replication/netsim link configurations: one global profile (--loss,
// --latency, …) or a weighted mix of profiles spread over the bots
// (--impair-mix), so one run can hold mostly good links and a tail of bad
// ones, as a real player population does.
package impair

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/ghostwire/ghostwire/replication/netsim"
)

// Profile is one kind of network path. It applies to both directions of a
// bot's link, each direction drawing its own random stream.
type Profile struct {
	Name      string        `json:"name"`
	Weight    float64       `json:"weight"`     // share of the bots, normalised over the mix
	Loss      float64       `json:"loss"`       // long-run drop probability per packet, 0..1
	Burst     float64       `json:"burst"`      // mean loss-burst length in packets; ≤ 1 means independent loss
	Latency   time.Duration `json:"latency_ns"` // one-way delay added in each direction
	Jitter    time.Duration `json:"jitter_ns"`  // ± uniform spread of that delay
	Reorder   float64       `json:"reorder"`    // probability a packet is held back so later ones overtake it
	Duplicate float64       `json:"duplicate"`  // probability a packet arrives twice
}

// ErrSpec is wrapped by every error about a profile or a mix.
var ErrSpec = errors.New("impair: bad impairment")

// Perfect reports whether p leaves packets alone, so a bot can skip netsim.
func (p Profile) Perfect() bool {
	return p.Loss == 0 && p.Latency == 0 && p.Jitter == 0 && p.Reorder == 0 && p.Duplicate == 0
}

// Validate reports the first field out of range.
func (p Profile) Validate() error {
	prob := func(name string, v float64) error {
		if !(v >= 0 && v <= 1) {
			return fmt.Errorf("%w: %s %v is not a probability in [0, 1]", ErrSpec, name, v)
		}
		return nil
	}
	for _, c := range []struct {
		n string
		v float64
	}{{"loss", p.Loss}, {"reorder", p.Reorder}, {"duplicate", p.Duplicate}} {
		if err := prob(c.n, c.v); err != nil {
			return err
		}
	}
	if p.Latency < 0 || p.Jitter < 0 || p.Latency > netsim.MaxDelay || p.Jitter > netsim.MaxDelay {
		return fmt.Errorf("%w: latency and jitter must be in [0, %v]", ErrSpec, netsim.MaxDelay)
	}
	if math.IsNaN(p.Burst) || p.Burst < 0 || p.Burst > 1e6 {
		return fmt.Errorf("%w: burst %v must be a mean length in packets, 0..1e6", ErrSpec, p.Burst)
	}
	if p.Burst > 1 && p.Loss > 0 {
		if p.Loss >= 1 {
			return fmt.Errorf("%w: burst loss needs loss < 100%%", ErrSpec)
		}
		if g := gilbert(p.Loss, p.Burst); g.PGoodToBad > 1 {
			return fmt.Errorf("%w: loss %v%% is too high for bursts of %v packets (at most %.3g%%)",
				ErrSpec, p.Loss*100, p.Burst, 100*p.Burst/(1+p.Burst))
		}
	}
	if math.IsNaN(p.Weight) || p.Weight < 0 || math.IsInf(p.Weight, 0) {
		return fmt.Errorf("%w: weight %v", ErrSpec, p.Weight)
	}
	return nil
}

// gilbert is the classic two-state Gilbert model (no loss while good, all
// lost while bad) with long-run loss rate and mean burst length burst:
// mean bad run = 1/PBadToGood, loss = g2b/(g2b+b2g).
func gilbert(loss, burst float64) netsim.GilbertElliott {
	b2g := 1 / burst
	return netsim.GilbertElliott{PGoodToBad: loss * b2g / (1 - loss), PBadToGood: b2g, LossGood: 0, LossBad: 1}
}

// Link returns the netsim configuration of one direction of a bot's link.
func (p Profile) Link(seed uint64) netsim.Config {
	c := netsim.Config{
		Loss: p.Loss, Latency: p.Latency, Jitter: p.Jitter,
		Reorder: p.Reorder, Duplicate: p.Duplicate, Seed: seed,
		// A bot holds at most a few seconds of traffic in flight; the
		// default 4096 packets per link times thousands of bots would be
		// memory for nothing.
		MaxInFlight: 512,
	}
	if p.Burst > 1 && p.Loss > 0 {
		g := gilbert(p.Loss, p.Burst)
		c.Burst = &g
	}
	return c
}

// String is the profile in --impair-mix syntax (without the weight).
func (p Profile) String() string {
	var parts []string
	add := func(k, v string) { parts = append(parts, k+"="+v) }
	if p.Loss > 0 {
		add("loss", strconv.FormatFloat(p.Loss*100, 'g', 4, 64)+"%")
	}
	if p.Burst > 1 {
		add("burst", strconv.FormatFloat(p.Burst, 'g', 4, 64))
	}
	if p.Latency > 0 {
		add("latency", p.Latency.String())
	}
	if p.Jitter > 0 {
		add("jitter", p.Jitter.String())
	}
	if p.Reorder > 0 {
		add("reorder", strconv.FormatFloat(p.Reorder*100, 'g', 4, 64)+"%")
	}
	if p.Duplicate > 0 {
		add("duplicate", strconv.FormatFloat(p.Duplicate*100, 'g', 4, 64)+"%")
	}
	if len(parts) == 0 {
		return "perfect"
	}
	return strings.Join(parts, ",")
}

// MaxMixLen bounds a --impair-mix spec.
const MaxMixLen = 4096

// MaxProfiles bounds the profiles of a mix.
const MaxProfiles = 64

// ParseMix reads a weighted mix of profiles:
//
//	70%:latency=20ms,loss=1% ; 25%:latency=80ms,jitter=20ms,loss=5% ; 5%:loss=20%,burst=4
//
// Profiles are separated by ';'. Each starts with a weight (a percentage or
// a plain number; weights are normalised) and a colon, then key=value
// settings separated by ','. Keys: loss, burst, latency, jitter, reorder,
// duplicate. A key a profile leaves out takes its value from base (the
// global flags). An optional name goes before the weight: "bad=5%:loss=20%".
func ParseMix(spec string, base Profile) ([]Profile, error) {
	if len(spec) > MaxMixLen {
		return nil, fmt.Errorf("%w: mix longer than %d bytes", ErrSpec, MaxMixLen)
	}
	var out []Profile
	var total float64
	for raw := range strings.SplitSeq(spec, ";") {
		part := strings.TrimSpace(raw)
		if part == "" {
			continue
		}
		if len(out) == MaxProfiles {
			return nil, fmt.Errorf("%w: more than %d profiles", ErrSpec, MaxProfiles)
		}
		head, body, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("%w: profile %q: want WEIGHT:key=value,…", ErrSpec, part)
		}
		p := base
		p.Name = ""
		if name, w, ok := strings.Cut(head, "="); ok {
			p.Name, head = strings.TrimSpace(name), w
		}
		w, err := parseRatio(strings.TrimSpace(head), true)
		if err != nil || w <= 0 {
			return nil, fmt.Errorf("%w: profile %q: weight %q must be a positive number or percentage", ErrSpec, part, head)
		}
		p.Weight = w
		if err := p.set(body); err != nil {
			return nil, fmt.Errorf("%w: profile %q: %v", ErrSpec, part, err)
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("profile %q: %w", part, err)
		}
		if p.Name == "" {
			p.Name = fmt.Sprintf("p%d", len(out)+1)
		}
		total += w
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty mix", ErrSpec)
	}
	for i := range out {
		out[i].Weight /= total
	}
	return out, nil
}

func (p *Profile) set(body string) error {
	for kv := range strings.SplitSeq(body, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("setting %q: want key=value", kv)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		var err error
		switch k {
		case "loss":
			p.Loss, err = parseRatio(v, false)
		case "reorder":
			p.Reorder, err = parseRatio(v, false)
		case "duplicate":
			p.Duplicate, err = parseRatio(v, false)
		case "burst":
			p.Burst, err = strconv.ParseFloat(v, 64)
		case "latency":
			p.Latency, err = time.ParseDuration(v)
		case "jitter":
			p.Jitter, err = time.ParseDuration(v)
		default:
			return fmt.Errorf("unknown key %q (loss, burst, latency, jitter, reorder, duplicate)", k)
		}
		if err != nil {
			return fmt.Errorf("%s=%s: %v", k, v, err)
		}
	}
	return nil
}

// parseRatio reads "5%" or "0.05". With weight set, "70" means 70 (weights
// are normalised), not 7000 %.
func parseRatio(s string, weight bool) (float64, error) {
	pct := strings.HasSuffix(s, "%")
	f, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, "%")), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not finite", s)
	}
	if pct && !weight {
		f /= 100
	}
	return f, nil
}

// ParseRatio reads a probability flag value: "5%" or "0.05".
func ParseRatio(s string) (float64, error) {
	f, err := parseRatio(s, false)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrSpec, err)
	}
	if f < 0 || f > 1 {
		return 0, fmt.Errorf("%w: %q is not in [0, 100%%]", ErrSpec, s)
	}
	return f, nil
}

// Assign gives each of n bots a profile index: exact shares by largest
// remainder (so 5 % of 100 bots is 5 bots, not "about 5"), placed by a
// permutation drawn from seed (so the bad links are not all the first bots
// to connect).
func Assign(mix []Profile, n int, seed uint64) []int {
	out := make([]int, 0, n)
	counts := make([]int, len(mix))
	type rem struct {
		i int
		r float64
	}
	rems := make([]rem, len(mix))
	left := n
	for i, p := range mix {
		exact := p.Weight * float64(n)
		counts[i] = int(math.Floor(exact))
		left -= counts[i]
		rems[i] = rem{i, exact - float64(counts[i])}
	}
	// Largest remainders first; ties to the earlier profile.
	for k := 0; k < left; k++ {
		best := -1
		for j := range rems {
			if best < 0 || rems[j].r > rems[best].r {
				best = j
			}
		}
		counts[rems[best].i]++
		rems[best].r = -1
	}
	for i, c := range counts {
		for range c {
			out = append(out, i)
		}
	}
	r := rand.New(rand.NewPCG(seed, 0x696d70616972)) // "impair"
	r.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out
}

// HitchSlack is how much longer than normal the longest gap between a
// bot's control updates may be, in 99 % of hitch windows, from this
// profile's network alone: the longest run of lost server ticks (either
// direction losing a tick's packet; bursts follow the Gilbert model) plus
// the spread of the jitter. window is the hitch window, tick the server's
// period. The handoff-hitch invariant adds it to its limit, so a lossy
// link is not mistaken for a stalled handoff (and a stall still is not).
func (p Profile) HitchSlack(tick, window time.Duration) time.Duration {
	if tick <= 0 || window <= 0 {
		return 0
	}
	slack := 2 * p.Jitter
	if p.Loss <= 0 {
		return slack
	}
	if p.Loss >= 1 {
		return slack + window
	}
	n := math.Max(1, float64(window)/float64(tick)) // ticks per window
	const tail = 0.01                               // 99 % of windows
	k := 0.0
	if p.Burst <= 1 {
		// A tick is missed when either direction loses its packet; k
		// missed in a row somewhere in the window: ≈ n·q^k.
		q := 1 - (1-p.Loss)*(1-p.Loss)
		k = math.Ceil(math.Log(tail/n) / math.Log(q))
	} else {
		// Bursts start ≈ n·loss/burst times per window and direction and
		// last ≥ k packets with probability (1 − 1/burst)^(k−1).
		starts := 2 * n * p.Loss / p.Burst
		stay := 1 - 1/p.Burst
		k = 1 + math.Ceil(math.Log(tail/starts)/math.Log(stay))
	}
	k = math.Max(0, math.Min(k, n))
	return slack + time.Duration(k)*tick
}

// MixHitchSlack is the largest HitchSlack of the profiles that hold at
// least 1 % of the bots (a smaller share cannot move the p99 on its own).
func MixHitchSlack(mix []Profile, tick, window time.Duration) time.Duration {
	var total float64
	for _, p := range mix {
		total += p.Weight
	}
	var s time.Duration
	for _, p := range mix {
		if total > 0 && p.Weight/total < 0.01 {
			continue
		}
		s = max(s, p.HitchSlack(tick, window))
	}
	return s
}
