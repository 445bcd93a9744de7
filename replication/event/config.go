package event

import (
	"fmt"
	"github.com/ghostwire/ghostwire/replication/internal/intern"
	"math/bits"
	"time"
)

// Defaults and limits of Config. Lanes, MaxInFlightPerLane, MaxEventSize,
// MaxFragment, StaggerKeys, MaxPartial and MaxQueuedBytes are part of the wire
// contract: the receiver's values must equal the sender's (lanes, id width,
// key width) or be at least as large (the size and memory bounds). A
// connection handshake agrees on them; the defaults are the protocol constants.
const (
	DefaultLanes = 8  // the floor: eight independent ordered lanes
	MinLanes     = 8  //
	MaxLanes     = 64 // 6-bit lane field at most

	DefaultMaxInFlightPerLane = 1 << 14 // 16,384 units in flight per stream (issue floor)
	MinMaxInFlightPerLane     = 1 << 14
	MaxMaxInFlightPerLane     = 1 << 20

	DefaultMaxQueuedBytes = 1 << 20 // 1 MiB of payload per connection and direction
	MaxMaxQueuedBytes     = 1 << 30

	MaxEventSizeLimit   = 1 << 16 // 64 KiB: the 16-bit "total − 1" field of a fragment
	DefaultMaxEventSize = MaxEventSizeLimit

	DefaultMaxFragment = 1024 // largest unit payload: fits a 1200-byte datagram with headers
	MinMaxFragment     = 64
	MaxMaxFragment     = 8192
	DefaultMinFragment = 128 // never cut a fragment smaller than this (unless it is the tail)

	DefaultRedundancy      = 2    // extra copies of an unacknowledged unit in the following packets (the floor)
	MaxRedundancy          = 8    //
	DefaultRedundancyBytes = 512  // per-packet budget for those copies
	DefaultResidualLoss    = 2e-5 // adaptive redundancy: P(every copy of a unit lost) aimed for
	MaxResidualLoss        = 0.5  //

	DefaultStaggerKeys  = 256
	MaxStaggerKeys      = 1 << 16
	DefaultStaggerBase  = 50 * time.Millisecond  // seed 001: sendStaggerTime = 50
	DefaultStaggerLimit = 200 * time.Millisecond // seed 001: send while sendStaggerTime <= 200

	DefaultMaxPartial = 16 // unordered fragmented events being reassembled at once
	MaxMaxPartial     = 256

	DefaultMaxUnguaranteed = 256 // queued unguaranteed events
	MaxMaxUnguaranteed     = 1 << 16

	maxDuration = time.Minute
)

// Config tunes one connection's event layer (both directions use the same
// values). The zero Config is invalid; start from DefaultConfig.
type Config struct {
	// Lanes is the number of independent guaranteed-ordered lanes, [MinLanes,
	// MaxLanes]. A loss on one lane never delays another (checklist RL-2, RL-14).
	Lanes int
	// MaxInFlightPerLane bounds, per ordered lane and for the unordered stream,
	// both the events a sender holds (queued or unacknowledged; SendOrdered and
	// SendUnordered fail with ErrLaneFull beyond it) and the span of event ids
	// in flight. A power of two in [MinMaxInFlightPerLane,
	// MaxMaxInFlightPerLane]; ids travel in log2(MaxInFlightPerLane)+1 bits.
	MaxInFlightPerLane int
	// MaxQueuedBytes bounds the payload bytes a Sender holds (every class;
	// Send* fails with ErrQueueFull beyond it) and the bytes a Receiver
	// buffers for reordering and reassembly. [MaxEventSize, MaxMaxQueuedBytes].
	MaxQueuedBytes int
	// MaxEventSize is the largest guaranteed event payload, [MaxFragment,
	// MaxEventSizeLimit]. Larger events are fragmented (checklist G-10).
	MaxEventSize int
	// MaxFragment is the largest payload of one record on the wire: the largest
	// unguaranteed or staggered event, and the fragment size of guaranteed
	// ones. [MinMaxFragment, MaxMaxFragment].
	MaxFragment int
	// MinFragment: a guaranteed event that does not fit whole is cut only when
	// at least min(MinFragment, rest of the event) bytes fit; otherwise it waits
	// for the next packet. [1, MaxFragment].
	MinFragment int
	// Redundancy is how many extra copies of a guaranteed unit the sender writes
	// into the packets that follow its transmission, while its fate is unknown
	// and the RedundancyBytes budget allows: a loss is then repaired one packet
	// interval later instead of one loss-detection delay later. 0 disables it.
	// [0, MaxRedundancy].
	Redundancy int
	// RedundancyBytes caps the bytes of redundant copies per packet, so they
	// never crowd out ghost updates. Copies use it only while units are
	// unacknowledged (about 140 bytes a packet at 10 % loss and 20 events
	// a second); the default 512 holds the bursts after consecutive losses,
	// which 256 did not. [0, 65536].
	RedundancyBytes int
	// ResidualLoss makes the redundancy adaptive: the sender estimates the
	// packet loss rate p from the fates and writes r extra copies, the
	// smallest r ≥ Redundancy (at most MaxRedundancy) with p^(r+1) ≤
	// ResidualLoss, so that a unit's whole first round is lost — and the unit
	// waits for a loss verdict, an ack's trip and a resend — with about that
	// probability whatever the loss rate: 4 copies at 10 % loss, 6 at 20 %
	// with the default 2e-5. Copies end at the unit's first ack, so r only
	// bounds how long a unit rides while its acks are late. A lost round
	// costs the unit 200–300 ms and holds up its lane: at 10⁻³ that was
	// enough to lift the p99 of ordered events above what the packet rate
	// allows (docs/benchmarks.md, replication/event). 0 keeps Redundancy
	// fixed. [0, MaxResidualLoss].
	// Sender policy only: the receiver does not depend on it.
	ResidualLoss float64
	// StaggerKeys is the number of staggered keys, [1, MaxStaggerKeys]; keys
	// travel in ceil(log2(StaggerKeys)) bits.
	StaggerKeys int
	// StaggerBase and StaggerLimit are the seed-001 schedule (sendStaggerTime
	// starts at StaggerBase on every action and doubles after each send; a send
	// happens while it is ≤ StaggerLimit): the first repeat follows the first
	// send by 2·StaggerBase, each later gap doubles, and repeats stop once the
	// gap would exceed StaggerLimit. Defaults 50 ms and 200 ms: sends at 0, 100
	// and 300 ms.
	StaggerBase, StaggerLimit time.Duration
	// MaxPartial bounds the fragmented unordered events a sender has in flight
	// and a receiver reassembles at once, [1, MaxMaxPartial].
	MaxPartial int
	// MaxUnguaranteed bounds the queued unguaranteed events; SendUnguaranteed
	// fails with ErrQueueFull beyond it. [1, MaxMaxUnguaranteed].
	MaxUnguaranteed int

	// senderTrim is the Sender's idle-release period (0: trimEvery); tests
	// change it. Here, in the interned Config, not in every Sender: its
	// 8 bytes put the Sender at 152, the 160-byte size class (now 144).
	senderTrim time.Duration
	// receiverTrim is the Receiver's idle-release period in sections,
	// trimSections unless a test changed it (interned fills it in). Here
	// for the same reason: its 4 bytes put the Receiver at 112 bytes (now
	// 96).
	receiverTrim int32
}

// trimPeriod is the Sender's idle-release period.
func (c *Config) trimPeriod() time.Duration {
	if c.senderTrim > 0 {
		return c.senderTrim
	}
	return trimEvery
}

// DefaultConfig returns the defaults (docs/protocol.md explains each).
func DefaultConfig() Config {
	return Config{
		Lanes:              DefaultLanes,
		MaxInFlightPerLane: DefaultMaxInFlightPerLane,
		MaxQueuedBytes:     DefaultMaxQueuedBytes,
		MaxEventSize:       DefaultMaxEventSize,
		MaxFragment:        DefaultMaxFragment,
		MinFragment:        DefaultMinFragment,
		Redundancy:         DefaultRedundancy,
		RedundancyBytes:    DefaultRedundancyBytes,
		ResidualLoss:       DefaultResidualLoss,
		StaggerKeys:        DefaultStaggerKeys,
		StaggerBase:        DefaultStaggerBase,
		StaggerLimit:       DefaultStaggerLimit,
		MaxPartial:         DefaultMaxPartial,
		MaxUnguaranteed:    DefaultMaxUnguaranteed,
	}
}

// Validate reports the first field out of range, wrapped around ErrConfig.
func (c Config) Validate() error {
	switch {
	case c.Lanes < MinLanes || c.Lanes > MaxLanes:
		return fmt.Errorf("%w: Lanes %d outside [%d, %d]", ErrConfig, c.Lanes, MinLanes, MaxLanes)
	case c.MaxInFlightPerLane < MinMaxInFlightPerLane || c.MaxInFlightPerLane > MaxMaxInFlightPerLane ||
		bits.OnesCount(uint(c.MaxInFlightPerLane)) != 1:
		return fmt.Errorf("%w: MaxInFlightPerLane %d not a power of two in [%d, %d]",
			ErrConfig, c.MaxInFlightPerLane, MinMaxInFlightPerLane, MaxMaxInFlightPerLane)
	case c.MaxFragment < MinMaxFragment || c.MaxFragment > MaxMaxFragment:
		return fmt.Errorf("%w: MaxFragment %d outside [%d, %d]", ErrConfig, c.MaxFragment, MinMaxFragment, MaxMaxFragment)
	case c.MaxEventSize < c.MaxFragment || c.MaxEventSize > MaxEventSizeLimit:
		return fmt.Errorf("%w: MaxEventSize %d outside [MaxFragment %d, %d]", ErrConfig, c.MaxEventSize, c.MaxFragment, MaxEventSizeLimit)
	case c.MaxQueuedBytes < c.MaxEventSize || c.MaxQueuedBytes > MaxMaxQueuedBytes:
		return fmt.Errorf("%w: MaxQueuedBytes %d outside [MaxEventSize %d, %d]", ErrConfig, c.MaxQueuedBytes, c.MaxEventSize, MaxMaxQueuedBytes)
	case c.MinFragment < 1 || c.MinFragment > c.MaxFragment:
		return fmt.Errorf("%w: MinFragment %d outside [1, MaxFragment %d]", ErrConfig, c.MinFragment, c.MaxFragment)
	case c.Redundancy < 0 || c.Redundancy > MaxRedundancy:
		return fmt.Errorf("%w: Redundancy %d outside [0, %d]", ErrConfig, c.Redundancy, MaxRedundancy)
	case c.RedundancyBytes < 0 || c.RedundancyBytes > 1<<16:
		return fmt.Errorf("%w: RedundancyBytes %d outside [0, 65536]", ErrConfig, c.RedundancyBytes)
	case !(c.ResidualLoss >= 0 && c.ResidualLoss <= MaxResidualLoss):
		return fmt.Errorf("%w: ResidualLoss %v outside [0, %v]", ErrConfig, c.ResidualLoss, MaxResidualLoss)
	case c.StaggerKeys < 1 || c.StaggerKeys > MaxStaggerKeys:
		return fmt.Errorf("%w: StaggerKeys %d outside [1, %d]", ErrConfig, c.StaggerKeys, MaxStaggerKeys)
	case c.StaggerBase <= 0 || c.StaggerBase > maxDuration:
		return fmt.Errorf("%w: StaggerBase %v outside (0, %v]", ErrConfig, c.StaggerBase, maxDuration)
	case c.StaggerLimit < c.StaggerBase || c.StaggerLimit > maxDuration:
		return fmt.Errorf("%w: StaggerLimit %v outside [StaggerBase %v, %v]", ErrConfig, c.StaggerLimit, c.StaggerBase, maxDuration)
	case c.MaxPartial < 1 || c.MaxPartial > MaxMaxPartial:
		return fmt.Errorf("%w: MaxPartial %d outside [1, %d]", ErrConfig, c.MaxPartial, MaxMaxPartial)
	case c.MaxUnguaranteed < 1 || c.MaxUnguaranteed > MaxMaxUnguaranteed:
		return fmt.Errorf("%w: MaxUnguaranteed %d outside [1, %d]", ErrConfig, c.MaxUnguaranteed, MaxMaxUnguaranteed)
	}
	return nil
}

// configs interns the Configs of Senders and Receivers: both ends of a
// connection and every connection of a server share one read-only copy
// instead of 112 bytes each. Bounded: past intern.Max distinct values (a
// server has a handful) a Config gets its own copy.
var configs intern.Table[Config]

// interned is cfg's shared copy, with the Receiver's trim period filled in
// (the Sender's and the Receiver's are the same copy).
func interned(cfg Config) *Config {
	if cfg.receiverTrim == 0 {
		cfg.receiverTrim = trimSections
	}
	return configs.Get(cfg)
}
