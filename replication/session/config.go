package session

import (
	"fmt"
	"time"

	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// Defaults of ServerConfig and ClientConfig (docs/protocol.md §7.18
// § Timers explains each).
const (
	// DefaultServerSendRate is the server's data packets per second: the zone
	// tick (DESIGN §4), so every view update can reach the client at once.
	DefaultServerSendRate = 20
	// DefaultClientSendRate is the client's packets per second: the move input
	// rate, so every move leaves as soon as it is sampled.
	DefaultClientSendRate = move.DefaultInputRate
	// DefaultBandwidth is the server's per-connection byte budget per second
	// (128 kbit/s): 800 bytes per packet at 20 packets/s on average; a quiet
	// connection saves up to one full packet of credit.
	DefaultBandwidth = 16000
	// DefaultMinPacketSize is the least budget a data packet gets even when the
	// credit is spent, so control acks and events never stall behind ghosts.
	DefaultMinPacketSize = 200
	// DefaultKeepAlive: an endpoint that sent nothing for this long sends an
	// ack-only packet. A tenth of the default timeout: an idle connection
	// survives nine lost keepalives in a row (checklist CL-6 asks for ≤ 4 per
	// timeout period only when they are reliable; ours are 19 bytes).
	DefaultKeepAlive = time.Second
	// DefaultTimeout closes a connection that heard nothing authenticated for
	// this long, when the connect token carries no timeout of its own.
	DefaultTimeout = 10 * time.Second
	// DefaultDisconnectCopies and DefaultDisconnectInterval: a graceful close
	// sends the Disconnect this many times, this far apart (each copy is its
	// own packet: at 20 % loss all five are lost with probability 0.03 %).
	DefaultDisconnectCopies   = 5
	DefaultDisconnectInterval = 25 * time.Millisecond
	// DefaultRedirectInterval and DefaultRedirectTimeout: a redirecting
	// server resends its Redirect this often until the client's Disconnect
	// acknowledges it, for at most this long, then falls back to a
	// Disconnect(ServerShutdown) — which is also all an older client, that
	// drops the unknown packet, ever sees. Twenty copies: at 50 % loss all
	// are lost with probability 1e-6; 671 bytes each, 13 KB/s while it lasts.
	DefaultRedirectInterval = 50 * time.Millisecond
	DefaultRedirectTimeout  = time.Second
	// DefaultRetryInterval, DefaultRetryBackoff and DefaultMaxRetryInterval
	// pace the client's connect requests: 100 ms, then ×1.5 per retry up to
	// 1 s, so a lossy path connects fast and a dead one is not hammered.
	DefaultRetryInterval    = 100 * time.Millisecond
	DefaultRetryBackoff     = 1.5
	DefaultMaxRetryInterval = time.Second
	// DefaultConnectTimeout gives up connecting (ErrConnectTimeout); the
	// token's expiry may end it sooner.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultLongFormAfter: a client that heard nothing authenticated for this
	// long sends the long form (connection id in the clear), so a server that
	// lost its address mapping (NAT rebinding) can still route it.
	DefaultLongFormAfter = time.Second
	// DefaultForgottenAfter: NoConnection hints naming the connection, and
	// nothing authenticated heard, for this long → the server no longer
	// knows the connection (it restarted, or dropped the session).
	DefaultForgottenAfter = 2 * time.Second

	// MaxPacketSize bounds every datagram (handshake.MaxPacketSize).
	MaxPacketSize = handshake.MaxPacketSize
	// MinPacketSizeLimit is the smallest MaxPacketSize a config may set.
	MinPacketSizeLimit = 256
	// RoutedPrefixSize is the long-form prefix: kind byte and connection id.
	RoutedPrefixSize = 1 + handshake.ConnIDSize
)

// ServerConfig tunes one connection's server end. The zero ServerConfig is
// invalid; start from DefaultServerConfig.
type ServerConfig struct {
	// Notify, Events: both ends of a connection must use the same values (wire
	// contract; the defaults are the protocol constants).
	Notify notify.Config
	Events event.Config
	// Control tunes the control-object corrections (move.ControlWriter).
	Control move.ControlConfig
	// SendRate is the data packets per second, [1, 1000]: the send slot.
	// Ack-only packets (keepalives) are not counted. A zone tick's state
	// (Server.SetControl) opens the slot at once, no sooner than half a slot
	// after the previous tick's packet, so with ticks at SendRate the server
	// sends one data packet per tick (and one between two ticks only when
	// the second is more than half a slot late).
	SendRate int
	// Bandwidth is the byte budget per second, a token bucket holding at most
	// one MaxPacketSize of credit, [MinPacketSize, 1<<30]. Ghosts fill what the
	// control object and events leave of each packet's share.
	Bandwidth int
	// MaxPacketSize caps every datagram, [MinPacketSizeLimit, MaxPacketSize].
	MaxPacketSize int
	// MinPacketSize is the budget floor of a data packet when the credit is
	// spent, [64, MaxPacketSize].
	MinPacketSize int
	// KeepAlive: nothing sent for this long → an ack-only packet. (0, Timeout).
	KeepAlive time.Duration
	// Timeout: nothing authenticated received for this long → close with
	// ReasonTimeout. The gateway sets it to the token's timeout
	// (Grant.Claims.Timeout). (0, handshake.MaxTimeout].
	Timeout time.Duration
	// DisconnectCopies, DisconnectInterval: the redundant Disconnect of a
	// graceful close. Copies [1, 32], interval [0, 1 s].
	DisconnectCopies   int
	DisconnectInterval time.Duration
	// RedirectInterval, RedirectTimeout: how often Redirect copies go and
	// how long the server waits for the client to acknowledge one before it
	// disconnects it instead (Server.Redirect). Zero means the default;
	// interval [0, 1 s], timeout [0, 1 min].
	RedirectInterval time.Duration
	RedirectTimeout  time.Duration
}

// DefaultServerConfig returns the defaults above.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{
		Notify:             notify.DefaultConfig(),
		Events:             event.DefaultConfig(),
		Control:            move.DefaultControlConfig(),
		SendRate:           DefaultServerSendRate,
		Bandwidth:          DefaultBandwidth,
		MaxPacketSize:      MaxPacketSize,
		MinPacketSize:      DefaultMinPacketSize,
		KeepAlive:          DefaultKeepAlive,
		Timeout:            DefaultTimeout,
		DisconnectCopies:   DefaultDisconnectCopies,
		DisconnectInterval: DefaultDisconnectInterval,
		RedirectInterval:   DefaultRedirectInterval,
		RedirectTimeout:    DefaultRedirectTimeout,
	}
}

// Validate reports the first field out of range, wrapped around ErrConfig.
func (c ServerConfig) Validate() error {
	if err := c.Notify.Validate(); err != nil {
		return fmt.Errorf("%w: notify: %w", ErrConfig, err)
	}
	if err := c.Events.Validate(); err != nil {
		return fmt.Errorf("%w: events: %w", ErrConfig, err)
	}
	if err := c.Control.Validate(); err != nil {
		return fmt.Errorf("%w: control: %w", ErrConfig, err)
	}
	switch {
	case c.SendRate < 1 || c.SendRate > 1000:
		return fmt.Errorf("%w: SendRate %d outside [1, 1000]", ErrConfig, c.SendRate)
	case c.MaxPacketSize < MinPacketSizeLimit || c.MaxPacketSize > MaxPacketSize:
		return fmt.Errorf("%w: MaxPacketSize %d outside [%d, %d]", ErrConfig, c.MaxPacketSize, MinPacketSizeLimit, MaxPacketSize)
	case c.MinPacketSize < 64 || c.MinPacketSize > c.MaxPacketSize:
		return fmt.Errorf("%w: MinPacketSize %d outside [64, MaxPacketSize]", ErrConfig, c.MinPacketSize)
	case c.Bandwidth < c.MinPacketSize || c.Bandwidth > 1<<30:
		return fmt.Errorf("%w: Bandwidth %d outside [MinPacketSize, 1<<30]", ErrConfig, c.Bandwidth)
	case c.RedirectInterval < 0 || c.RedirectInterval > time.Second:
		return fmt.Errorf("%w: RedirectInterval %v outside [0, 1s]", ErrConfig, c.RedirectInterval)
	case c.RedirectTimeout < 0 || c.RedirectTimeout > time.Minute:
		return fmt.Errorf("%w: RedirectTimeout %v outside [0, 1m]", ErrConfig, c.RedirectTimeout)
	}
	return validateTimers(c.KeepAlive, c.Timeout, c.DisconnectCopies, c.DisconnectInterval)
}

func validateTimers(keepAlive, timeout time.Duration, copies int, interval time.Duration) error {
	switch {
	case timeout <= 0 || timeout > handshake.MaxTimeout:
		return fmt.Errorf("%w: Timeout %v outside (0, %v]", ErrConfig, timeout, handshake.MaxTimeout)
	case keepAlive <= 0 || keepAlive >= timeout:
		return fmt.Errorf("%w: KeepAlive %v outside (0, Timeout)", ErrConfig, keepAlive)
	case copies < 1 || copies > 32:
		return fmt.Errorf("%w: DisconnectCopies %d outside [1, 32]", ErrConfig, copies)
	case interval < 0 || interval > time.Second:
		return fmt.Errorf("%w: DisconnectInterval %v outside [0, 1s]", ErrConfig, interval)
	}
	return nil
}

// ClientConfig tunes the client end. The zero ClientConfig is invalid; start
// from DefaultClientConfig.
type ClientConfig struct {
	// Notify, Events: must equal the server's (wire contract).
	Notify notify.Config
	Events event.Config
	// Moves: input rate (InputDue) and window of unacknowledged moves.
	Moves move.Config
	// Step is the control object's movement code, the same function the server
	// runs (bit-deterministic, see move.StepFunc). nil means move.Walk.
	Step move.StepFunc
	// Registry holds the ghost classes; it must match the server's registry
	// class for class. nil means DefaultRegistry().
	Registry *ghost.Registry
	// Mirror tunes the ghost mirror and its interpolation (100 ms behind).
	Mirror ghost.MirrorConfig
	// SendRate is the most data packets per second once connected, [1, 1000].
	SendRate int
	// MaxPacketSize caps every datagram after the handshake (connect requests
	// are always handshake.RequestSize), [MinPacketSizeLimit, MaxPacketSize].
	MaxPacketSize int
	// RetryInterval is the first resend interval of the connect request,
	// growing by RetryBackoff per resend up to MaxRetryInterval.
	RetryInterval    time.Duration
	RetryBackoff     float64
	MaxRetryInterval time.Duration
	// ConnectTimeout gives up connecting; the token's expiry may end it sooner.
	ConnectTimeout time.Duration
	// KeepAlive: nothing sent for this long → an ack-only packet.
	KeepAlive time.Duration
	// Timeout: nothing authenticated for this long → closed (ErrTimeout).
	// 0 means the token's timeout.
	Timeout time.Duration
	// LongFormAfter: nothing authenticated for this long → send the long form.
	LongFormAfter time.Duration
	// ForgottenAfter: NoConnection hints naming this connection's id (the
	// answer to its long form) since the server was last heard, the first
	// this long ago, with nothing authenticated arriving meanwhile → closed
	// with ErrForgotten (an ErrTimeout), not Timeout after the last packet:
	// the server restarted, or dropped the session, and will not answer.
	// A hint is unauthenticated, but naming the id it takes someone who
	// sees the client's packets, who could as well drop them all (and so
	// end the session at its Timeout). 0 leaves the hints as hints (the
	// long form only); [0, 1 min].
	ForgottenAfter time.Duration
	// AlwaysLongForm sends every packet in the long form (connection id in
	// the clear, 9 bytes more), and the server then answers in the long form
	// too. For many clients sharing one socket (a bot swarm): the server
	// cannot tell them apart by address, and they sort the server's packets
	// by connection id (docs/protocol.md §7.18, Many clients on one
	// socket).
	AlwaysLongForm bool
	// SkipGhosts leaves the ghost section of the server's packets undecoded
	// (it is last in a packet): the Mirror stays empty. For load generators
	// whose bots need not all look at the world — decoding ghosts is most of
	// a receiving client's CPU. Acknowledgement is per packet, so the server
	// cannot tell.
	SkipGhosts bool
	// DisconnectCopies, DisconnectInterval: the redundant Disconnect of Close.
	DisconnectCopies   int
	DisconnectInterval time.Duration
	// InitialControl is what the client predicts from until the server's
	// first control state arrives (the zero state by default, §5.2). A
	// client following a Redirect passes its last predicted state, so its
	// own player does not jump to the origin while it reconnects; the
	// server's state then corrects it like any other (ControlOffset).
	InitialControl move.ControlState
}

// DefaultClientConfig returns the defaults above.
func DefaultClientConfig() ClientConfig {
	return ClientConfig{
		Notify:             notify.DefaultConfig(),
		Events:             event.DefaultConfig(),
		Moves:              move.DefaultConfig(),
		Mirror:             ghost.DefaultMirrorConfig(),
		SendRate:           DefaultClientSendRate,
		MaxPacketSize:      MaxPacketSize,
		RetryInterval:      DefaultRetryInterval,
		RetryBackoff:       DefaultRetryBackoff,
		MaxRetryInterval:   DefaultMaxRetryInterval,
		ConnectTimeout:     DefaultConnectTimeout,
		KeepAlive:          DefaultKeepAlive,
		LongFormAfter:      DefaultLongFormAfter,
		ForgottenAfter:     DefaultForgottenAfter,
		DisconnectCopies:   DefaultDisconnectCopies,
		DisconnectInterval: DefaultDisconnectInterval,
	}
}

// Validate reports the first field out of range, wrapped around ErrConfig.
func (c ClientConfig) Validate() error {
	if err := c.Notify.Validate(); err != nil {
		return fmt.Errorf("%w: notify: %w", ErrConfig, err)
	}
	if err := c.Events.Validate(); err != nil {
		return fmt.Errorf("%w: events: %w", ErrConfig, err)
	}
	if err := c.Moves.Validate(); err != nil {
		return fmt.Errorf("%w: moves: %w", ErrConfig, err)
	}
	if err := c.Mirror.Validate(); err != nil {
		return fmt.Errorf("%w: mirror: %w", ErrConfig, err)
	}
	switch {
	case c.SendRate < 1 || c.SendRate > 1000:
		return fmt.Errorf("%w: SendRate %d outside [1, 1000]", ErrConfig, c.SendRate)
	case c.MaxPacketSize < MinPacketSizeLimit || c.MaxPacketSize > MaxPacketSize:
		return fmt.Errorf("%w: MaxPacketSize %d outside [%d, %d]", ErrConfig, c.MaxPacketSize, MinPacketSizeLimit, MaxPacketSize)
	case c.RetryInterval <= 0 || c.MaxRetryInterval < c.RetryInterval || c.MaxRetryInterval > time.Minute:
		return fmt.Errorf("%w: RetryInterval %v / MaxRetryInterval %v: want 0 < RetryInterval ≤ MaxRetryInterval ≤ 1m", ErrConfig, c.RetryInterval, c.MaxRetryInterval)
	case !(c.RetryBackoff >= 1 && c.RetryBackoff <= 10):
		return fmt.Errorf("%w: RetryBackoff %v outside [1, 10]", ErrConfig, c.RetryBackoff)
	case c.ConnectTimeout <= 0 || c.ConnectTimeout > handshake.MaxTokenLifetime:
		return fmt.Errorf("%w: ConnectTimeout %v outside (0, %v]", ErrConfig, c.ConnectTimeout, handshake.MaxTokenLifetime)
	case c.LongFormAfter <= 0:
		return fmt.Errorf("%w: LongFormAfter %v must be positive", ErrConfig, c.LongFormAfter)
	case c.ForgottenAfter < 0 || c.ForgottenAfter > time.Minute:
		return fmt.Errorf("%w: ForgottenAfter %v outside [0, 1m]", ErrConfig, c.ForgottenAfter)
	case c.Timeout < 0:
		return fmt.Errorf("%w: Timeout %v negative", ErrConfig, c.Timeout)
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = handshake.MaxTimeout // the token's, checked when it is known
	}
	return validateTimers(c.KeepAlive, timeout, c.DisconnectCopies, c.DisconnectInterval)
}

// DefaultRegistry returns a registry of the shipped classes (ghost.PlayerClass
// and ghost.NPCClass without name tables) over ghost.DefaultBounds: what a
// server that registers nothing else replicates.
func DefaultRegistry() *ghost.Registry {
	reg, err := ghost.NewRegistry(ghost.DefaultBounds())
	if err != nil {
		panic(err) // the default bounds are valid
	}
	if err := reg.Register(ghost.PlayerClass(nil), ghost.NPCClass(nil)); err != nil {
		panic(err) // the shipped classes are valid and distinct
	}
	return reg
}
