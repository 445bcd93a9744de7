package swarm

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/impair"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/metrics"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/scenario"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/world"
)

// Config is one swarm run. Build it with DefaultConfig and fill in Servers
// and Key; cmd/botswarm maps its flags onto it.
type Config struct {
	// Servers are the gateways' public addresses, as tokens list them; bot
	// i plays on Servers[i % len(Servers)] (round-robin).
	Servers []netip.AddrPort
	Bots    int // how many bots
	// Duration is the measured run from the first bot's start; the bots then
	// stop moving and drain (Drain) before they disconnect.
	Duration time.Duration
	// Ramp starts this many bots per second (0: all at once).
	Ramp float64
	Seed uint64

	// Key and ProtocolID mint the connect tokens (one per session).
	Key          [handshake.KeySize]byte
	ProtocolID   uint64
	TokenTimeout time.Duration // the connection idle timeout tokens carry
	// PlayerBase is the swarm's first player id: bot i's n-th session
	// plays as PlayerBase + i<<20 + n, so a swarm of N bots uses the ids
	// [PlayerBase, PlayerBase + N<<20). Two swarms playing at once on one
	// server need ranges that do not overlap: a connect with a player id
	// already playing supersedes that session (Disconnect Duplicate). A
	// swarm after another with the same ids finds their players' records
	// and resumes them where the earlier one left them.
	PlayerBase uint64

	InputRate int // moves per second (must divide 960)
	SendRate  int // client packets per second

	Scenario scenario.Params

	// Mix is the impairment of each bot's link (both directions); one
	// profile for all, or several with weights.
	Mix []impair.Profile

	// EchoInterval: each bot sends one guaranteed event on lane 0 this often
	// and expects it echoed. 0 disables the echo check.
	EchoInterval time.Duration
	// EchoExpected: report a run without any echo as a violation.
	EchoExpected bool
	// ViewPeers is how many peer ghosts a bot compares per sample.
	ViewPeers int
	// Observers is the fraction of the bots (spread evenly) that decode the
	// ghost section and check their view; the others skip it
	// (session.ClientConfig.SkipGhosts) — the invariants on moves, events,
	// handoffs and sessions still hold for every bot. 1: all.
	Observers float64
	// SampleInterval: each bot folds its stats into the metrics and samples
	// RTT and its view this often.
	SampleInterval time.Duration
	// HitchWindow: after a zone-border crossing, the longest gap between
	// control updates within this window is the handoff hitch.
	HitchWindow time.Duration
	// Drain bounds how long bots wait at the end for their last moves to be
	// acknowledged and their events echoed.
	Drain time.Duration
	// Reconnect is the pause before a bot whose session failed tries again.
	Reconnect time.Duration

	// Workers is the number of worker goroutines (each owns a share of the
	// bots, their sockets and a timer heap). 0: one per CPU, at most one
	// per 250 bots.
	Workers int
	// Transport: "auto", "shared" (Linux: one socket per worker, long form,
	// recvmmsg/sendmmsg), "epoll" (Linux) or "goroutines" (a socket per bot).
	Transport string
	// Quantum: a worker's turns begin at least this far apart, so that
	// datagrams and the bots' send slots are taken in batches; 0 wakes per
	// datagram (most precise timing, most CPU). Adds up to Quantum to every
	// measured latency. Default DefaultQuantum.
	Quantum time.Duration

	// OnSample, if set, gets every one-second sample (progress line).
	OnSample func(p metrics.Point, c metrics.Counters)
	Log      *slog.Logger
}

// Defaults.
const (
	DefaultPlayerBase     = 0x4757_0000_0000 // "GW" in the high bytes: far from NPC ids
	DefaultTokenTimeout   = 10 * time.Second
	DefaultEchoInterval   = time.Second
	DefaultViewPeers      = 8
	DefaultSampleInterval = time.Second
	DefaultHitchWindow    = 2 * time.Second
	DefaultDrain          = 3 * time.Second
	DefaultReconnect      = time.Second
	DefaultRamp           = 500
	// DefaultQuantum: 1 ms cut botswarm's CPU per datagram by ≈ 10 %
	// against waking per datagram (docs/benchmarks.md, botswarm) and adds
	// at most 1 ms to a measured latency — below what the SLOs judge.
	DefaultQuantum = time.Millisecond
)

// DefaultConfig returns a 100-bot, 30 s wander run on the default world.
func DefaultConfig() Config {
	return Config{
		Bots: 100, Duration: 30 * time.Second, Ramp: DefaultRamp, Seed: 1,
		ProtocolID: 0, TokenTimeout: DefaultTokenTimeout, PlayerBase: DefaultPlayerBase,
		InputRate: move.DefaultInputRate, SendRate: move.DefaultInputRate,
		Scenario:     scenario.Params{Kind: scenario.Wander, World: world.Default()},
		Mix:          []impair.Profile{{Name: "all", Weight: 1}},
		EchoInterval: DefaultEchoInterval, EchoExpected: true, ViewPeers: DefaultViewPeers, Observers: 1,
		SampleInterval: DefaultSampleInterval, HitchWindow: DefaultHitchWindow,
		Drain: DefaultDrain, Reconnect: DefaultReconnect, Transport: "auto",
		Quantum: DefaultQuantum,
	}
}

// maxPlayerID bounds player ids: the server's NPC ids have the top bit set
// (zones/sim ErrBadID), so a token naming one is kicked.
const maxPlayerID = 1 << 63

// ErrConfig is wrapped by every Validate error.
var ErrConfig = errors.New("swarm: invalid config")

// Validate reports the first unusable setting.
func (c *Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
	}
	switch {
	case len(c.Servers) == 0:
		return bad("no server address")
	case c.Bots < 1 || c.Bots > 1<<20:
		return bad("bots %d not in [1, %d]", c.Bots, 1<<20)
	case c.Duration <= 0:
		return bad("duration %v must be positive", c.Duration)
	case c.Ramp < 0:
		return bad("ramp %v bots/s must not be negative", c.Ramp)
	case c.InputRate < 4 || move.DtHz%c.InputRate != 0:
		return bad("input rate %d Hz must divide %d and be ≥ 4", c.InputRate, move.DtHz)
	case c.SendRate < 1 || c.SendRate > 1000:
		return bad("send rate %d not in [1, 1000]", c.SendRate)
	case c.TokenTimeout < time.Millisecond:
		return bad("token timeout %v", c.TokenTimeout)
	case len(c.Mix) == 0:
		return bad("no impairment profile")
	case c.EchoInterval < 0 || c.SampleInterval <= 0 || c.HitchWindow <= 0 || c.Drain < 0 || c.Reconnect < 0:
		return bad("intervals must be positive")
	case c.ViewPeers < 0:
		return bad("view peers %d", c.ViewPeers)
	case !(c.Observers >= 0 && c.Observers <= 1):
		return bad("observers %v not a fraction in [0, 1]", c.Observers)
	case c.Workers < 0:
		return bad("workers %d", c.Workers)
	case c.Quantum < 0 || c.Quantum > 100*time.Millisecond:
		return bad("quantum %v not in [0, 100ms]", c.Quantum)
	case c.PlayerBase >= maxPlayerID || c.PlayerBase+uint64(c.Bots)<<pidSessionBits > maxPlayerID:
		// Bots ≤ 2^20 (above), so the sum cannot wrap.
		return bad("player ids %#x + %d bots × 2^%d reach the NPC id range (≥ 2^63)", c.PlayerBase, c.Bots, pidSessionBits)
	}
	for _, a := range c.Servers {
		if !a.IsValid() || a.Port() == 0 {
			return bad("server address %v", a)
		}
	}
	for _, p := range c.Mix {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if err := c.Scenario.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}
