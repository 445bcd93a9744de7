package client

import (
	"context"
	"log/slog"
	"net"

	"github.com/ghostwire/ghostwire/replication/session"
)

// Option tunes Dial.
type Option func(*options)

type options struct {
	cfg         session.ClientConfig
	local       string
	wrap        func(net.PacketConn) net.PacketConn
	eventBuffer int
	manual      bool
	log         *slog.Logger
	onRedirect  func(Redirected)
	failover    func(ctx context.Context) ([]byte, error)
}

func defaultOptions() options {
	return options{
		cfg:         session.DefaultClientConfig(),
		local:       ":0",
		eventBuffer: DefaultEventBuffer,
		log:         slog.New(slog.DiscardHandler),
	}
}

// DefaultEventBuffer is the capacity of the Events channel.
const DefaultEventBuffer = 1024

// MaxPendingEvents bounds the events held for a reader that does not keep
// up, beyond the channel's buffer; older ones are dropped first and counted
// in Stats.EventsDropped.
const MaxPendingEvents = 16384

// WithConfig replaces the protocol configuration (send rate, input rate,
// timeouts, the ghost class registry, interpolation delay, ...). Start from
// session.DefaultClientConfig().
func WithConfig(cfg session.ClientConfig) Option { return func(o *options) { o.cfg = cfg } }

// WithLocalAddr binds the UDP socket to addr (default ":0": any port).
func WithLocalAddr(addr string) Option { return func(o *options) { o.local = addr } }

// WithPacketConn wraps the UDP socket before use: tests put a network
// simulator (loss, latency) between client and server this way, tools a
// packet logger. The wrapper's Close must close the socket it wraps, and its
// ReadFrom must honour SetReadDeadline (the session wakes its goroutine with
// it).
func WithPacketConn(wrap func(net.PacketConn) net.PacketConn) Option {
	return func(o *options) { o.wrap = wrap }
}

// WithEventBuffer sets the capacity of the Events channel (default 1024).
func WithEventBuffer(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.eventBuffer = n
		}
	}
}

// WithManualInput turns off input sampling: the game calls SendMove once per
// tick of its own fixed-rate loop instead of SetInput.
func WithManualInput() Option { return func(o *options) { o.manual = true } }

// WithLogger logs connects and disconnects (default: silent).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// OnRedirect calls f each time the session follows a server's Redirect to
// another gateway (Stats.Redirects counts them too). f runs on the
// session's goroutine with its lock held: it must not block or call the
// Session; hand the value on (a counter, a buffered channel).
func OnRedirect(f func(Redirected)) Option { return func(o *options) { o.onRedirect = f } }

// WithFailover makes the session survive the loss of its server: when the
// server goes silent (the session times out: its node crashed or was cut
// off), the session asks tokens for a fresh connect token (the login
// backend's, listing the cluster's gateways) and connects to the first
// gateway it lists other than the dead one, then the next, up to
// MaxFailovers times in a row. The Session stays the same: the player
// resumes from its record on the new node (a new session numbers its moves
// afresh; what the dead node never acknowledged is counted in
// Stats.Moves, not resent). tokens is called from the session's goroutine
// without its lock and must return within a few seconds (ctx says how
// long). Stats().Failovers counts the switches.
func WithFailover(tokens func(ctx context.Context) ([]byte, error)) Option {
	return func(o *options) { o.failover = tokens }
}

// MaxFailovers bounds the failovers a session tries in a row without
// getting connected again.
const MaxFailovers = 3
