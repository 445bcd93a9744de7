package swarm

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Echo events: each bot sends a guaranteed ordered event on lane 0 every
// EchoInterval; the zone sends each back to its sender on lane 0. The bot
// checks every echo is intact (CRC), its own (bot and session), and the next
// counter in order.
//
//	magic "GWe1" | bot u32 | session u64 | counter u64 | sent ns i64 | pad | CRC-32 of all before
const (
	echoMagic  = "GWe1"
	echoLen    = 40 // 4+4+8+8+8+4 pad+4 crc
	echoCRCOff = echoLen - 4
)

// Teleport requests (teleport scenario), lane 1: "GWtp" | x f32 | z f32.
const (
	teleportMagic = "GWtp"
	teleportLen   = 12
	teleportLane  = 1
	echoLane      = 0
)

var (
	errEchoSize  = errors.New("echo: wrong size")
	errEchoMagic = errors.New("echo: not an echo")
	errEchoCRC   = errors.New("echo: corrupt")
)

type echoMsg struct {
	bot     uint32
	session uint64
	counter uint64
	sent    time.Duration
}

// appendEcho encodes m into dst[:0] (dst must hold echoLen bytes).
func appendEcho(dst []byte, m echoMsg) []byte {
	b := dst[:echoLen]
	copy(b, echoMagic)
	binary.LittleEndian.PutUint32(b[4:], m.bot)
	binary.LittleEndian.PutUint64(b[8:], m.session)
	binary.LittleEndian.PutUint64(b[16:], m.counter)
	binary.LittleEndian.PutUint64(b[24:], uint64(m.sent))
	binary.LittleEndian.PutUint32(b[32:], 0x5a5a5a5a)
	binary.LittleEndian.PutUint32(b[echoCRCOff:], crc32.ChecksumIEEE(b[:echoCRCOff]))
	return b
}

// parseEcho decodes an echo; errEchoMagic when p is not one at all
// (a foreign event), errEchoSize/errEchoCRC when it is damaged.
func parseEcho(p []byte) (echoMsg, error) {
	if len(p) < 4 || string(p[:4]) != echoMagic {
		return echoMsg{}, errEchoMagic
	}
	if len(p) != echoLen {
		return echoMsg{}, errEchoSize
	}
	if crc32.ChecksumIEEE(p[:echoCRCOff]) != binary.LittleEndian.Uint32(p[echoCRCOff:]) {
		return echoMsg{}, errEchoCRC
	}
	return echoMsg{
		bot:     binary.LittleEndian.Uint32(p[4:]),
		session: binary.LittleEndian.Uint64(p[8:]),
		counter: binary.LittleEndian.Uint64(p[16:]),
		sent:    time.Duration(binary.LittleEndian.Uint64(p[24:])),
	}, nil
}

func appendTeleport(dst []byte, x, z float32) []byte {
	b := dst[:teleportLen]
	copy(b, teleportMagic)
	binary.LittleEndian.PutUint32(b[4:], math.Float32bits(x))
	binary.LittleEndian.PutUint32(b[8:], math.Float32bits(z))
	return b
}

// serverClock puts every bot's idea of the server's clock on one epoch.
// A ghost.Mirror reconstructs 16-bit millisecond stamps relative to the
// first one it saw, so two bots' server times differ by a multiple of
// 65.536 s (plus their delay difference). Bots of one swarm talk to one
// server clock, so the multiple is recovered by rounding the difference of
// their offsets to the nearest epoch.
type serverClock struct {
	mu  sync.Mutex   // taken once, by the first bot to learn the server's clock
	ref atomic.Int64 // first offset seen (server − local), ns
	set atomic.Bool
}

const stampEpoch = 65536 * time.Millisecond

// shift returns what to add to a bot's server time (whose offset is
// server − local = off) to express it on the swarm's common epoch.
func (c *serverClock) shift(off time.Duration) time.Duration {
	if !c.set.Load() {
		c.mu.Lock()
		if !c.set.Load() {
			c.ref.Store(int64(off))
			c.set.Store(true)
		}
		c.mu.Unlock()
	}
	d := time.Duration(c.ref.Load()) - off
	return time.Duration(math.Round(float64(d)/float64(stampEpoch))) * stampEpoch
}
