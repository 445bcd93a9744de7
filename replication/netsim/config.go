package netsim

import (
	"errors"
	"fmt"
	"time"
)

// ErrConfig is wrapped by every error Validate returns.
var ErrConfig = errors.New("netsim: invalid config")

// Defaults applied when the corresponding Config field is zero.
const (
	DefaultMaxInFlight  = 4096     // packets held by one Link
	DefaultMaxPacket    = 1500     // bytes; Ethernet MTU, the seed's packetMem[1500]
	DefaultQueueBytes   = 64 << 10 // bytes of bottleneck queue when BandwidthBps > 0
	DefaultReorderDelay = 10 * time.Millisecond
)

// Upper bounds Validate enforces. They keep every time and byte computation inside int64 and
// keep a misconfigured link from reserving absurd memory.
const (
	MaxDelay        = time.Hour // Latency, Jitter and ReorderDelay each
	MaxBandwidthBps = 1 << 40   // about 1.1 Tbit/s
	MaxQueueBytes   = 1 << 24   // 16 MiB
	MaxPacketLimit  = 65535     // largest allowed MaxPacket: the IPv4 total-length limit
	MaxInFlightCap  = 1 << 20   // largest allowed MaxInFlight
)

// GilbertElliott is a two-state (good/bad) Markov loss model. Before each packet the link is in
// one state; the packet is lost with that state's loss probability, then the state moves on:
// good→bad with PGoodToBad, bad→good with PBadToGood.
//
// The mean time spent in the bad state is 1/PBadToGood packets, and the mean time in the good
// state is 1/PGoodToBad packets. With LossGood = 0 and LossBad = 1 (the classic Gilbert model)
// the mean loss-burst length is exactly 1/PBadToGood and the long-run loss rate is
// PGoodToBad/(PGoodToBad+PBadToGood). Example: PGoodToBad 0.01, PBadToGood 0.25 → bursts of 4
// packets on average, 3.8% loss.
//
// Seed: 000_7c9fbcaaab74b117.txt § Simulating Real-World Conditions, Tip — "packets are usually
// dropped or delayed in groups of sequential packets".
type GilbertElliott struct {
	PGoodToBad float64 // per-packet probability of entering the bad state, 0..1
	PBadToGood float64 // per-packet probability of leaving the bad state, 0..1
	LossGood   float64 // loss probability while good, 0..1
	LossBad    float64 // loss probability while bad, 0..1
}

// MeanBurst returns the mean number of consecutive packets spent in the bad state,
// 1/PBadToGood (+Inf when PBadToGood is 0).
func (g GilbertElliott) MeanBurst() float64 {
	return 1 / g.PBadToGood
}

// Config describes one direction of a simulated link. All impairments are applied per packet
// in this order: MaxPacket (TooBig) → MaxInFlight (InFlight) → bottleneck queue (Queue) →
// Loss or Burst (Loss) → Latency ± Jitter, Reorder → Duplicate.
//
// The zero Config is a perfect link: every packet is delivered at the time it was sent, in
// order. Zero-valued limits take the Default* values above.
type Config struct {
	// Loss is the Bernoulli drop probability, 0..1. Ignored when Burst is set.
	Loss float64
	// Burst, if non-nil, replaces Loss with Gilbert–Elliott burst loss.
	Burst *GilbertElliott
	// Latency is the base one-way delay.
	Latency time.Duration
	// Jitter spreads each packet's delay uniformly over [Latency−Jitter, Latency+Jitter],
	// clamped at 0.
	Jitter time.Duration
	// Reorder is the probability, 0..1, that a packet is held back by ReorderDelay on top of
	// its normal delay, so that later packets overtake it.
	Reorder float64
	// ReorderDelay is the extra delay of a held-back packet. 0 with Reorder > 0 means 2×Jitter,
	// or DefaultReorderDelay when Jitter is 0.
	ReorderDelay time.Duration
	// AllowJitterReorder false keeps FIFO order despite jitter: a packet is never delivered
	// before an earlier one (delivery = max(own time, previous delivery)). This biases the mean
	// delay upwards when packets are sent closer together than 2×Jitter. true gives each packet
	// its own independent delay, so jitter reorders packets (seed Figure 7.2).
	AllowJitterReorder bool
	// Duplicate is the probability, 0..1, that a delivered packet is delivered twice. The copy
	// gets its own, independently drawn delay.
	Duplicate float64
	// BandwidthBps is the bottleneck rate in bits per second; 0 means unlimited. Each packet
	// takes len×8/BandwidthBps to serialize, queued behind earlier packets.
	BandwidthBps int64
	// QueueBytes bounds the bottleneck queue (including the packet being serialized); a packet
	// that does not fit is tail-dropped. 0 with BandwidthBps > 0 means DefaultQueueBytes.
	QueueBytes int
	// MaxInFlight bounds the packets a Link holds; further packets are dropped and counted.
	// 0 means DefaultMaxInFlight.
	MaxInFlight int
	// MaxPacket is the largest packet in bytes; larger ones are rejected and counted. 0 means
	// DefaultMaxPacket.
	MaxPacket int
	// Seed seeds the link's own random generator (PCG), so the simulator never touches the
	// game's random numbers (SIM-1; 003_28a462e3d9fd091c.txt ch6).
	Seed uint64
}

// DefaultConfig returns a perfect link with the default limits spelled out.
func DefaultConfig() Config {
	return Config{MaxInFlight: DefaultMaxInFlight, MaxPacket: DefaultMaxPacket, Seed: 1}
}

// Validate reports the first field that is out of range, wrapped around ErrConfig.
func (c Config) Validate() error {
	if err := checkProb("Loss", c.Loss); err != nil {
		return err
	}
	if c.Burst != nil {
		for _, f := range []struct {
			name string
			v    float64
		}{
			{"Burst.PGoodToBad", c.Burst.PGoodToBad},
			{"Burst.PBadToGood", c.Burst.PBadToGood},
			{"Burst.LossGood", c.Burst.LossGood},
			{"Burst.LossBad", c.Burst.LossBad},
		} {
			if err := checkProb(f.name, f.v); err != nil {
				return err
			}
		}
	}
	if err := checkProb("Reorder", c.Reorder); err != nil {
		return err
	}
	if err := checkProb("Duplicate", c.Duplicate); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"Latency", c.Latency},
		{"Jitter", c.Jitter},
		{"ReorderDelay", c.ReorderDelay},
	} {
		if f.v < 0 || f.v > MaxDelay {
			return fmt.Errorf("%w: %s %v outside [0, %v]", ErrConfig, f.name, f.v, MaxDelay)
		}
	}
	if c.BandwidthBps < 0 || c.BandwidthBps > MaxBandwidthBps {
		return fmt.Errorf("%w: BandwidthBps %d outside [0, %d] (0 = unlimited)", ErrConfig, c.BandwidthBps, int64(MaxBandwidthBps))
	}
	if c.QueueBytes < 0 || c.QueueBytes > MaxQueueBytes {
		return fmt.Errorf("%w: QueueBytes %d outside [0, %d]", ErrConfig, c.QueueBytes, MaxQueueBytes)
	}
	if c.MaxInFlight < 0 || c.MaxInFlight > MaxInFlightCap {
		return fmt.Errorf("%w: MaxInFlight %d outside [0, %d]", ErrConfig, c.MaxInFlight, MaxInFlightCap)
	}
	if c.MaxPacket < 0 || c.MaxPacket > MaxPacketLimit {
		return fmt.Errorf("%w: MaxPacket %d outside [0, %d]", ErrConfig, c.MaxPacket, MaxPacketLimit)
	}
	d := c.withDefaults()
	if d.BandwidthBps > 0 && d.QueueBytes < d.MaxPacket {
		// A queue smaller than one packet would silently drop every full-size packet.
		return fmt.Errorf("%w: QueueBytes %d smaller than MaxPacket %d", ErrConfig, d.QueueBytes, d.MaxPacket)
	}
	return nil
}

func checkProb(name string, p float64) error {
	if !(p >= 0 && p <= 1) { // also rejects NaN
		return fmt.Errorf("%w: %s %v outside [0, 1]", ErrConfig, name, p)
	}
	return nil
}

// withDefaults fills zero-valued limits. The Burst pointer is copied by value so that a caller
// mutating its GilbertElliott after NewLink/SetConfig does not change a running link.
func (c Config) withDefaults() Config {
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxPacket == 0 {
		c.MaxPacket = DefaultMaxPacket
	}
	if c.BandwidthBps > 0 && c.QueueBytes == 0 {
		c.QueueBytes = DefaultQueueBytes
	}
	if c.Reorder > 0 && c.ReorderDelay == 0 {
		c.ReorderDelay = DefaultReorderDelay
		if c.Jitter > 0 {
			c.ReorderDelay = 2 * c.Jitter
		}
	}
	if c.Burst != nil {
		g := *c.Burst
		c.Burst = &g
	}
	return c
}
