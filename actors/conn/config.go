package conn

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/session"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// Defaults of Config.
const (
	// DefaultMaxInbound is how many datagrams may wait for one connection
	// on its shard before the gateway drops newer ones (counted,
	// gateway.Stats.InboundDropped): 8 is a quarter second of a 30 Hz
	// client. A shard that far behind is overloaded, and what it has not
	// read yet only grows stale: the client sends each move in several
	// datagrams (its move window) and notify takes a dropped datagram as
	// loss, so a short queue loses nothing a long one would keep, while a
	// long one holds memory for every connection of an overloaded node
	// (at 64, a node falling behind at 2,000 players held 1.4 KB of
	// queued datagrams per player, and up to 19 KB a connection).
	DefaultMaxInbound = 8
	// MaxMaxInbound bounds MaxInbound (each waiting datagram holds 0.3 to
	// 1.3 KB: msg.Datagram.Compact).
	MaxMaxInbound = 4096
)

// Config tunes every connection of a gateway. The zero Config is
// invalid; start from DefaultConfig.
type Config struct {
	// Session configures the protocol end (send rate, bandwidth, keepalive 1 s,
	// timeout 10 s, disconnect copies 5 × 25 ms: session.DefaultServerConfig).
	// The token's timeout, when set, replaces Session.Timeout per connection.
	Session session.ServerConfig
	// Registry is the ghost classes both ends know. Default:
	// session.DefaultRegistry() (players and NPCs).
	Registry *ghost.Registry
	// Ghosts configures each connection's ghost table.
	Ghosts ghost.Config
	// MaxInbound bounds the datagrams queued per connection, [1, MaxMaxInbound].
	MaxInbound int
	// Resume, when set, is asked for a player's saved state before its
	// first Join: it calls done (from any goroutine, once, within about a
	// second) with the zone to join (nil: the gateway's choice) and the
	// checkpoint to restore (nil: a fresh spawn). Input waits meanwhile.
	Resume func(player uint64, done func(zone *actor.PID, cp *handoff.Checkpoint))
}

// DefaultConfig returns the defaults documented on each field.
func DefaultConfig() Config {
	return Config{
		Session:    session.DefaultServerConfig(),
		Registry:   session.DefaultRegistry(),
		Ghosts:     ghost.DefaultConfig(),
		MaxInbound: DefaultMaxInbound,
	}
}

// ErrConfig is wrapped by every Validate error.
var ErrConfig = errors.New("conn: invalid config")

// Validate reports the first field out of range.
func (c Config) Validate() error {
	if err := c.Session.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.Registry == nil {
		return fmt.Errorf("%w: Registry is nil", ErrConfig)
	}
	if err := c.Ghosts.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.MaxInbound < 1 || c.MaxInbound > MaxMaxInbound {
		return fmt.Errorf("%w: MaxInbound %d outside [1, %d]", ErrConfig, c.MaxInbound, MaxMaxInbound)
	}
	return nil
}

// sessionConfig is the session config of one connection: the token's
// timeout wins (both ends apply the same one), and a keepalive that would
// not fit inside a short timeout shrinks to a third of it, so a token with a
// 2 s timeout still gets a working connection instead of a refused config.
func (c Config) sessionConfig(timeout time.Duration) session.ServerConfig {
	s := c.Session
	if timeout > 0 {
		s.Timeout = timeout
	}
	if s.KeepAlive >= s.Timeout {
		s.KeepAlive = max(s.Timeout/3, time.Millisecond/3)
	}
	return s
}
