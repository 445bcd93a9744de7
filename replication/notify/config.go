package notify

import (
	"fmt"
	"time"
)

// Defaults and limits of Config. AckWindow and ReorderThreshold are part of
// the wire contract (the ack encoding depends on them): both ends of a
// connection must use the same values.
const (
	DefaultAckWindow        = 256
	MinAckWindow            = 256  // the floor: a 256-packet notify window
	MaxAckWindow            = 1024 // bounds Header's bitmap (16 words) and per-packet work
	DefaultReorderThreshold = 4    // K: tolerates displacement by up to 3 packets
	MaxReorderThreshold     = 32
	DefaultMinReorderTime   = 25 * time.Millisecond
	DefaultInitialRTT       = 100 * time.Millisecond
	DefaultMaxInFlight      = 1024
	MinMaxInFlight          = 16
	MaxMaxInFlight          = 1 << 16
	maxDuration             = time.Minute // upper bound for the time settings
)

// Config tunes one connection's notify state. The zero Config is invalid; start
// from DefaultConfig.
type Config struct {
	// AckWindow is the span of the receive bitmap and of every ack report, in
	// packets: [MinAckWindow, MaxAckWindow]. A packet more than AckWindow ahead of
	// the newest accepted one is rejected as forged (ErrTooFar), so it is also the
	// longest run of consecutive losses the connection survives, unless
	// AcceptFar.
	AckWindow int
	// ReorderThreshold (K) is the packet threshold of the receiver's abandonment:
	// a missing sequence s is given up once a packet ≥ s+K was accepted, as in
	// QUIC's kPacketThreshold (RFC 9002 §6.1.1). [1, MaxReorderThreshold].
	ReorderThreshold int
	// MinReorderTime is the floor of the receiver's time threshold: a missing s
	// below the newest accepted packet is abandoned once the first packet after it
	// arrived max(MinReorderTime, 1.25·K·inter-arrival, srtt/8) ago.
	MinReorderTime time.Duration
	// InitialRTT is the RTT estimate before the first sample (RFC 9002 uses 333ms;
	// game paths are shorter).
	InitialRTT time.Duration
	// AcceptFar takes a packet any distance ahead of the newest accepted
	// instead of rejecting it (ErrTooFar): the receive window jumps to it
	// and every sequence it skipped is given up. Set it only when every
	// packet is authenticated between ReadHeader and Accept, as the session
	// does (the AEAD, nonce = sequence), so a forged far sequence never
	// commits. Then a blackout longer than AckWindow (a host paused for
	// seconds while its peer kept sending) no longer wedges the direction.
	// The receiver's own policy: a peer with the other setting
	// interoperates.
	AcceptFar bool
	// MaxInFlight bounds the sender's records (unresolved plus resolved but not yet
	// popped). When a send fills the last slot while the oldest record is still
	// unresolved, that record is force-dropped (Stats.ForcedDrops); when the oldest
	// record is resolved but the caller has not called PopFates, WriteHeader
	// refuses with ErrFatesPending. [MinMaxInFlight, MaxMaxInFlight].
	MaxInFlight int
}

// DefaultConfig returns the tuned defaults (docs/protocol.md explains each).
func DefaultConfig() Config {
	return Config{
		AckWindow:        DefaultAckWindow,
		ReorderThreshold: DefaultReorderThreshold,
		MinReorderTime:   DefaultMinReorderTime,
		InitialRTT:       DefaultInitialRTT,
		MaxInFlight:      DefaultMaxInFlight,
	}
}

// Validate reports the first field out of range, wrapped around ErrConfig.
func (c Config) Validate() error {
	switch {
	case c.AckWindow < MinAckWindow || c.AckWindow > MaxAckWindow:
		return fmt.Errorf("%w: AckWindow %d outside [%d, %d]", ErrConfig, c.AckWindow, MinAckWindow, MaxAckWindow)
	case c.ReorderThreshold < 1 || c.ReorderThreshold > MaxReorderThreshold:
		return fmt.Errorf("%w: ReorderThreshold %d outside [1, %d]", ErrConfig, c.ReorderThreshold, MaxReorderThreshold)
	case c.MinReorderTime < 0 || c.MinReorderTime > maxDuration:
		return fmt.Errorf("%w: MinReorderTime %v outside [0, %v]", ErrConfig, c.MinReorderTime, maxDuration)
	case c.InitialRTT <= 0 || c.InitialRTT > maxDuration:
		return fmt.Errorf("%w: InitialRTT %v outside (0, %v]", ErrConfig, c.InitialRTT, maxDuration)
	case c.MaxInFlight < MinMaxInFlight || c.MaxInFlight > MaxMaxInFlight:
		return fmt.Errorf("%w: MaxInFlight %d outside [%d, %d]", ErrConfig, c.MaxInFlight, MinMaxInFlight, MaxMaxInFlight)
	}
	return nil
}
