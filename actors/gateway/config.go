package gateway

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ghostwire/ghostwire/actors/conn"
	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// Defaults of Config.
const (
	DefaultListen       = ":7777"
	DefaultMaxConns     = 10000
	DefaultReadBatch    = 64
	DefaultReadQueue    = 8    // batches between the reader and the gateway actor
	DefaultWriteQueue   = 8192 // datagrams waiting for the writer
	DefaultWriteBatch   = 64
	DefaultSocketBuffer = 4 << 20
	DefaultDrainTimeout = 2 * time.Second
)

// ZoneFunc picks the zone actor a newly verified player joins (nil: none;
// the connection then drops the player's input and counts it).
type ZoneFunc func(player uint64, userData []byte) *actor.PID

// Config configures a Gateway. The zero Config is invalid; start from
// DefaultConfig and set Key.
type Config struct {
	// Listen is the UDP address to bind (":7777", "127.0.0.1:0").
	Listen string
	// PublicAddr is this server's address as token backends list it. Zero: the
	// bound address, which then must not be a wildcard.
	PublicAddr netip.AddrPort
	// ProtocolID must match the tokens' (default tokenkey.DefaultProtocolID).
	ProtocolID uint64
	// Key is the connect-token key (actors/tokenkey): tokens are opened
	// under it and redirect tokens sealed with it. Required.
	Key tokenkey.Key
	// OtherKeys are opened tokens under too, during a key rotation
	// (handshake.ServerConfig.OtherKeys): at most tokenkey.MaxKeys-1.
	OtherKeys []tokenkey.Key

	// MaxConns caps connections, pending handshakes included; beyond it new
	// clients are refused with Denied(ServerFull). Default 10000.
	MaxConns int
	// ChallengeAt is the connection count from which every new client must
	// answer a stateless cookie challenge (two round trips instead of one).
	// Default MaxConns/2; 0 challenges always.
	ChallengeAt int

	// ReadBatch is the most datagrams one recvmmsg moves (default 64);
	// ReadQueue the batches that may wait for the gateway actor (default 8):
	// when all wait, the reader stops reading and the kernel buffer absorbs or
	// drops the excess (policy: backpressure to the kernel).
	ReadBatch, ReadQueue int
	// WriteQueue bounds datagrams waiting to be sent (default 8192; full: drop
	// and count); WriteBatch is the most one sendmmsg moves (default 64).
	WriteQueue, WriteBatch int
	// SocketBuffer sizes the kernel's receive and send buffers in bytes
	// (default 4 MiB; 0 keeps the system default).
	SocketBuffer int

	// Handshake configures cookies and the replay guard (ProtocolID and Addr
	// are filled from this Config).
	Handshake handshake.ServerConfig
	// RateLimit bounds replies to unproven sources (Challenge, Denied,
	// NoConnection) and the handshake work they cost, per /24 (/48) prefix.
	// Loopback tests with many clients on 127.0.0.1 need a larger Burst.
	RateLimit handshake.RateLimitConfig
	// Conn configures every connection (session timers, ghosts, inbound
	// queue bound).
	Conn conn.Config
	// Shards is the number of goroutines the connections are spread over
	// (0: GOMAXPROCS); Quantum the shortest time between two timer-driven
	// rounds of one (0: conn.DefaultQuantum, 1 ms): deadlines within a
	// quantum are served together and their datagrams share a sendmmsg.
	Shards  int
	Quantum time.Duration
	// DrainTimeout bounds how long Close waits for connections to send their
	// Disconnect copies (default 2 s).
	DrainTimeout time.Duration

	Zone       ZoneFunc
	Logger     *slog.Logger          // nil: discard
	Registerer prometheus.Registerer // nil: no Prometheus metrics
	Rand       io.Reader             // nil: crypto/rand
	Wall       func() time.Time      // nil: time.Now (token expiry, cookies)
}

// DefaultConfig returns the defaults documented on each field; Key must
// still be set.
func DefaultConfig() Config {
	return Config{
		Listen:       DefaultListen,
		ProtocolID:   tokenkey.DefaultProtocolID,
		MaxConns:     DefaultMaxConns,
		ChallengeAt:  DefaultMaxConns / 2,
		ReadBatch:    DefaultReadBatch,
		ReadQueue:    DefaultReadQueue,
		WriteQueue:   DefaultWriteQueue,
		WriteBatch:   DefaultWriteBatch,
		SocketBuffer: DefaultSocketBuffer,
		Handshake:    handshake.DefaultServerConfig(),
		RateLimit:    handshake.DefaultRateLimitConfig(),
		Conn:         conn.DefaultConfig(),
		DrainTimeout: DefaultDrainTimeout,
	}
}

// ErrConfig is wrapped by every Validate error.
var ErrConfig = errors.New("gateway: invalid config")

// Validate reports the first field out of range.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
	}
	switch {
	case c.Listen == "":
		return bad("Listen is empty")
	case c.Key == (tokenkey.Key{}):
		return bad("Key is not set")
	case c.MaxConns < 1:
		return bad("MaxConns %d < 1", c.MaxConns)
	case c.ChallengeAt < 0 || c.ChallengeAt > c.MaxConns:
		return bad("ChallengeAt %d outside [0, MaxConns]", c.ChallengeAt)
	case c.ReadBatch < 1 || c.ReadBatch > 1024:
		return bad("ReadBatch %d outside [1, 1024]", c.ReadBatch)
	case c.ReadQueue < 2 || c.ReadQueue > 1024:
		return bad("ReadQueue %d outside [2, 1024]", c.ReadQueue)
	case c.WriteQueue < 1 || c.WriteQueue > 1<<20:
		return bad("WriteQueue %d outside [1, 1<<20]", c.WriteQueue)
	case c.WriteBatch < 1 || c.WriteBatch > 1024:
		return bad("WriteBatch %d outside [1, 1024]", c.WriteBatch)
	case c.SocketBuffer < 0:
		return bad("SocketBuffer %d < 0", c.SocketBuffer)
	case c.DrainTimeout < 0:
		return bad("DrainTimeout %v < 0", c.DrainTimeout)
	case c.Shards < 0 || c.Shards > 1024:
		return bad("Shards %d outside [0, 1024]", c.Shards)
	case c.Quantum < 0 || c.Quantum > 100*time.Millisecond:
		return bad("Quantum %v outside [0, 100ms]", c.Quantum)
	}
	if err := c.RateLimit.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := c.Conn.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	hs := c.Handshake
	hs.Addr = netip.MustParseAddrPort("127.0.0.1:1") // checked once bound
	hs.ProtocolID = c.ProtocolID
	if err := hs.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}
