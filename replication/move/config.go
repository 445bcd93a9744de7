package move

import (
	"fmt"
	"time"
)

// Defaults and limits of Config.
const (
	// DefaultInputRate is the client's move rate in Hz. Seed: Tribes captured
	// input at 30 FPS (003_28a462e3d9fd091c.txt ch1, checklist CTL-1).
	DefaultInputRate = 30
	// DefaultWindow is how many unacknowledged moves a Stream keeps (and
	// resends in every packet): the most a section carries. At 30 Hz that
	// is 2.1 s of input: a move is lost for good only if it is still
	// unacknowledged 64 samples after it was taken, and only by a caller
	// that Adds past a full window: sampling through Due holds input
	// instead (a zone failing over to another node takes 3–5 s with the
	// default lease; the player stands still for what exceeds the window).
	// In steady state only one round trip's moves are unacknowledged
	// (docs/protocol.md §5).
	DefaultWindow = 64
	// MaxWindow is the largest window and the most moves one section carries.
	// It is a wire constant: the count field is 6 bits (count − 1).
	MaxWindow = 64
)

// Config tunes the client side of a move stream. The zero Config means
// DefaultConfig. Only the server's Applier is independent of it: the wire
// format does not depend on these values.
type Config struct {
	// InputRate is the sampling rate of moves in Hz (Stream.Due). It must
	// divide DtHz = 960 so every move's duration is a whole number of
	// 1/960 s units, and be at least 4 (Dt is at most 255 units): one of 4,
	// 5, 6, 8, 10, 12, 15, 16, 20, 24, 30, 32, 40, 48, 60, 64, 80, 96, 120,
	// 160, 192, 240, 320, 480, 960. Default 30.
	InputRate int
	// Window is how many unacknowledged moves the Stream keeps, 1..MaxWindow;
	// while it is full Due holds input (Stats.Held); a move Added anyway
	// drops the oldest (Stats.Dropped): the server will see a gap there.
	// Default 64.
	Window int
}

// DefaultConfig returns 30 Hz input and a 64-move window.
func DefaultConfig() Config {
	return Config{InputRate: DefaultInputRate, Window: DefaultWindow}
}

// Validate reports the first field out of range, wrapped around ErrConfig.
// Zero fields are valid: they mean the default.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.InputRate < 4 || c.InputRate > DtHz || DtHz%c.InputRate != 0 {
		return fmt.Errorf("%w: InputRate %d Hz must divide %d and be at least 4", ErrConfig, c.InputRate, DtHz)
	}
	if c.Window < 1 || c.Window > MaxWindow {
		return fmt.Errorf("%w: Window %d outside 1..%d", ErrConfig, c.Window, MaxWindow)
	}
	return nil
}

// withDefaults fills zero fields, so a zero Stream behaves as DefaultConfig.
func (c Config) withDefaults() Config {
	if c.InputRate == 0 {
		c.InputRate = DefaultInputRate
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	return c
}

// Dt is the duration of one move at this input rate, in 1/DtHz s units
// (32 at 30 Hz). It is exact: the move durations add up to wall time.
func (c Config) Dt() uint8 {
	return uint8(DtHz / c.withDefaults().InputRate)
}

// Defaults and limits of ControlConfig.
const (
	// DefaultPeriod is the interval of the unconditional full-state refresh.
	// Seed 004 sends full state only on a CRC mismatch; a slow refresh bounds
	// how long any divergence the CRC could miss (a collision of CRC-32, or a
	// client that sends no moves) can last.
	DefaultPeriod = time.Second
	// DefaultHoldTimeout bounds how long mismatch reports are ignored after a
	// full state was sent when no fate for that packet arrives.
	DefaultHoldTimeout = time.Second
	maxControlTime     = time.Hour
)

// ControlConfig tunes the server's ControlWriter. The zero ControlConfig is
// valid: no periodic refresh, no hold timeout (a correction is held until its
// fate is known).
type ControlConfig struct {
	// Period sends the full control state at least this often, whatever the
	// CRCs say. 0 disables the refresh. [0, 1 h]. Default 1 s.
	Period time.Duration
	// HoldTimeout: after a full state is sent, mismatch reports are held (the
	// client predicted them before it could have seen that state) until the
	// notify fate of that packet arrives (OnFate) or HoldTimeout passes,
	// whichever is first. 0 means wait for the fate only. [0, 1 h].
	// Default 1 s.
	HoldTimeout time.Duration
}

// DefaultControlConfig returns a 1 s refresh and a 1 s hold timeout.
func DefaultControlConfig() ControlConfig {
	return ControlConfig{Period: DefaultPeriod, HoldTimeout: DefaultHoldTimeout}
}

// Validate reports the first field out of range, wrapped around ErrConfig.
func (c ControlConfig) Validate() error {
	if c.Period < 0 || c.Period > maxControlTime {
		return fmt.Errorf("%w: Period %v outside [0, %v]", ErrConfig, c.Period, maxControlTime)
	}
	if c.HoldTimeout < 0 || c.HoldTimeout > maxControlTime {
		return fmt.Errorf("%w: HoldTimeout %v outside [0, %v]", ErrConfig, c.HoldTimeout, maxControlTime)
	}
	return nil
}
