package ghost

import (
	"fmt"
	"time"
)

// Limits and defaults of Config and MirrorConfig.
const (
	DefaultMaxGhosts          = 1 << 16 // the floor: 65,536 ghosts per connection
	MaxMaxGhosts              = 1 << 20 // id width ≤ 20 bits (a 5-bit field)
	MaxPacketBytes            = 1200    // DESIGN §3: datagrams ≤ 1200 bytes
	DefaultMaxPacketsInFlight = 256
	DefaultMaxRecordsInFlight = 8192
	DefaultStaleUnit          = 100 * time.Millisecond
	DefaultMaxStaleness       = 500 * time.Millisecond
	DefaultMaxMisses          = 16
	DefaultResendInterval     = 100 * time.Millisecond
	DefaultConfirmDeadline    = 500 * time.Millisecond
	DefaultInterpDelay        = 100 * time.Millisecond
	DefaultMaxExtrapolation   = 250 * time.Millisecond
	// MaxInterval bounds MaxStaleness, ResendInterval, ConfirmDeadline
	// and a class's MinInterval (Class.MinInterval): a Table keeps a
	// ghost's times in 16 bits of ms, a time older than ≈ 57 s pinned
	// there (msWindow), so every duration it compares them against must be
	// shorter. 60 times the defaults.
	MaxInterval = 30 * time.Second
)

// Config tunes one connection's ghost Table. The zero Config is invalid;
// start from DefaultConfig.
type Config struct {
	// MaxGhosts bounds the ghost ids of one connection: ids lie in
	// [0, MaxGhosts). [1, MaxMaxGhosts]; NewTable takes at most 2^16
	// (DefaultMaxGhosts: its records and ids are 16-bit). The client's
	// MirrorConfig.MaxGhosts must be at least this.
	MaxGhosts int
	// MaxPacketBytes caps the packet whatever buffer the caller hands Write:
	// the ghost section never extends a packet beyond it. [1, MaxPacketBytes].
	MaxPacketBytes int
	// MaxPacketsInFlight bounds the transmission records (packets whose fate is
	// unknown and that carried ghost records); when full, Write sends an empty
	// section until fates arrive. A power of two in [16, 1<<16].
	MaxPacketsInFlight int
	// MaxRecordsInFlight bounds the records those packets hold in total
	// (16 bytes each). [256, 1<<15]: a table's positions in flight, at
	// most one a record, are named by 16-bit indices.
	MaxRecordsInFlight int
	// StaleUnit sets how fast waiting raises priority: a dirty ghost not sent
	// for StaleUnit counts twice its base priority, for 2·StaleUnit three
	// times, … (seed 004 § Ghosts: "we also include time since the last
	// update, so that eventually everything gets updated"). > 0.
	StaleUnit time.Duration
	// MaxStaleness is the starvation bound: a dirty ghost not sent for this
	// long goes ahead of every ordinary update (not of creates and kills),
	// oldest first (those waiting more than ≈ 57 s as if they had waited
	// that long: msWindow). (0, MaxInterval].
	MaxStaleness time.Duration
	// MaxMisses is how many records in a row may fail to fit before Write gives
	// up filling the packet: a large record that does not fit must not stop
	// smaller ones behind it, but scanning every candidate of a full packet
	// would cost more than the bits are worth. [1, 1<<16].
	MaxMisses int
	// ResendInterval enables speculative resends: when a packet has room left
	// after every create, kill and dirty ghost, ghosts whose newest state is
	// not yet known delivered are sent again, each at most once per
	// ResendInterval. Spare bandwidth then shortens recovery from loss
	// (20% loss: a value missing after n resends has probability 0.2^n)
	// instead of waiting for the drop to be reported. It costs nothing when
	// the budget is full. 0 disables it; otherwise in [1ms, MaxInterval].
	ResendInterval time.Duration
	// ConfirmDeadline bounds how long the client may lack a change without
	// the table pressing: once the first change not yet known delivered is
	// this old, and the ghost's last copy has gone unconfirmed for the usual
	// fate delay (learned from the fates), the ghost goes ahead of ordinary
	// updates — again every max(ResendInterval, fate delay) — until a
	// delivery is confirmed. A copy lost then costs about a fate delay
	// instead of notify's drop detection plus a wait for the next regular
	// update. Pressing copies may fill at most 1/8 of a packet, so a short
	// budget cannot snowball into resends. 0 disables it. [0,
	// MaxInterval]. A fate delay learned past ≈ 57 s (msWindow) counts as
	// that.
	ConfirmDeadline time.Duration
}

// DefaultConfig returns the defaults above.
func DefaultConfig() Config {
	return Config{
		MaxGhosts:          DefaultMaxGhosts,
		MaxPacketBytes:     MaxPacketBytes,
		MaxPacketsInFlight: DefaultMaxPacketsInFlight,
		MaxRecordsInFlight: DefaultMaxRecordsInFlight,
		StaleUnit:          DefaultStaleUnit,
		MaxStaleness:       DefaultMaxStaleness,
		MaxMisses:          DefaultMaxMisses,
		ResendInterval:     DefaultResendInterval,
		ConfirmDeadline:    DefaultConfirmDeadline,
	}
}

// Validate reports the first field out of range, wrapped around ErrConfig.
func (c Config) Validate() error {
	switch {
	case c.MaxGhosts < 1 || c.MaxGhosts > MaxMaxGhosts:
		return fmt.Errorf("%w: MaxGhosts %d not in [1, %d]", ErrConfig, c.MaxGhosts, MaxMaxGhosts)
	case c.MaxPacketBytes < 1 || c.MaxPacketBytes > MaxPacketBytes:
		return fmt.Errorf("%w: MaxPacketBytes %d not in [1, %d]", ErrConfig, c.MaxPacketBytes, MaxPacketBytes)
	case c.MaxPacketsInFlight < 16 || c.MaxPacketsInFlight > 1<<16 || c.MaxPacketsInFlight&(c.MaxPacketsInFlight-1) != 0:
		return fmt.Errorf("%w: MaxPacketsInFlight %d not a power of two in [16, 65536]", ErrConfig, c.MaxPacketsInFlight)
	case c.MaxRecordsInFlight < 256 || c.MaxRecordsInFlight > maxPoolNodes:
		return fmt.Errorf("%w: MaxRecordsInFlight %d not in [256, 1<<15]", ErrConfig, c.MaxRecordsInFlight)
	case c.StaleUnit <= 0:
		return fmt.Errorf("%w: StaleUnit %v must be positive", ErrConfig, c.StaleUnit)
	case c.MaxStaleness <= 0 || c.MaxStaleness > MaxInterval:
		return fmt.Errorf("%w: MaxStaleness %v not in (0, MaxInterval %v]", ErrConfig, c.MaxStaleness, MaxInterval)
	case c.MaxMisses < 1 || c.MaxMisses > 1<<16:
		return fmt.Errorf("%w: MaxMisses %d not in [1, 65536]", ErrConfig, c.MaxMisses)
	case c.ConfirmDeadline < 0 || c.ConfirmDeadline > MaxInterval:
		return fmt.Errorf("%w: ConfirmDeadline %v not in [0, MaxInterval %v]", ErrConfig, c.ConfirmDeadline, MaxInterval)
	case c.ResendInterval != 0 && (c.ResendInterval < time.Millisecond || c.ResendInterval > MaxInterval):
		return fmt.Errorf("%w: ResendInterval %v: 0 or in [1ms, MaxInterval %v]", ErrConfig, c.ResendInterval, MaxInterval)
	}
	return nil
}

// MirrorConfig tunes a client Mirror. The zero MirrorConfig is invalid;
// start from DefaultMirrorConfig.
type MirrorConfig struct {
	// MaxGhosts bounds the ghost ids the mirror accepts (and so its memory):
	// a section whose id width could name an id ≥ MaxGhosts is rejected.
	// Must be at least the server's Config.MaxGhosts. [1, MaxMaxGhosts].
	MaxGhosts int
	// Interp renders remote entities (Mirror.Pose).
	Interp Interpolator
}

// DefaultMirrorConfig returns MaxGhosts = DefaultMaxGhosts and
// DefaultInterpolator().
func DefaultMirrorConfig() MirrorConfig {
	return MirrorConfig{MaxGhosts: DefaultMaxGhosts, Interp: DefaultInterpolator()}
}

// Validate reports the first field out of range, wrapped around ErrConfig.
func (c MirrorConfig) Validate() error {
	if c.MaxGhosts < 1 || c.MaxGhosts > MaxMaxGhosts {
		return fmt.Errorf("%w: mirror MaxGhosts %d not in [1, %d]", ErrConfig, c.MaxGhosts, MaxMaxGhosts)
	}
	return c.Interp.Validate()
}
