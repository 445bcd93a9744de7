package conn

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// connPIDs resolves a pool's connection PIDs for protoactor in place of
// its process registry. The registry spreads its ids over 1,024 maps (one
// shard each in the node: actors/node registry.go), so at a node's 1,000
// to 2,000 players most of them held a map group for one or two
// connections: 248–302 B a connection with its PID, its id and the proc,
// here 129 (TestConnPIDFootprint; 137 with a proc of its own). A connection's PID carries the
// pool's own address, which protoactor hands to the pool's resolver
// (RegisterAddressResolver) the first time a PID is sent to — it keeps
// the answer in the PID: one resolution per PID, not per message — and
// the pool keeps one map of its connections by number. The ids stay
// "conn$N"; the address is only ever compared (PID.Equal), never dialled.
//
// The zero connPIDs is ready once init ran. Safe for concurrent use:
// Open adds on the gateway's goroutine, a shard removes, any sender
// resolves.
type connPIDs struct {
	addr string
	mu   sync.RWMutex
	byN  map[uint64]*Conn
}

// pidPrefix is a connection PID's id before its number.
const pidPrefix = "conn$"

// poolSeq numbers the pools of the process: each has an address of its
// own, so two pools on one actor system do not answer for each other.
var poolSeq atomic.Uint64

// init registers t's resolver with sys: before any of t's PIDs exists,
// so no resolution reads the system's resolvers while this writes them.
func (t *connPIDs) init(sys *actor.ActorSystem) {
	t.addr = sys.Address() + "/conns" + strconv.FormatUint(poolSeq.Add(1), 10)
	t.byN = make(map[uint64]*Conn)
	sys.ProcessRegistry.RegisterAddressResolver(t.resolve)
}

// add gives c the PID numbered n.
func (t *connPIDs) add(c *Conn, n uint64) *actor.PID {
	t.mu.Lock()
	t.byN[n] = c
	t.mu.Unlock()
	return actor.NewPID(t.addr, pidPrefix+strconv.FormatUint(n, 10))
}

// remove forgets pid: a PID resolved before keeps reaching the
// connection (which drops what it is sent once stopped), as with the
// registry; a copy resolved after reaches the dead letters.
func (t *connPIDs) remove(pid *actor.PID) {
	if n, ok := t.number(pid); ok {
		t.mu.Lock()
		delete(t.byN, n)
		t.mu.Unlock()
	}
}

func (t *connPIDs) resolve(pid *actor.PID) (actor.Process, bool) {
	n, ok := t.number(pid)
	if !ok {
		return nil, false
	}
	t.mu.RLock()
	c, ok := t.byN[n]
	t.mu.RUnlock()
	if !ok {
		return nil, false // a connection gone: the registry's dead letters
	}
	return procOf(c), true
}

// number is the connection number pid names, if it is one of t's.
func (t *connPIDs) number(pid *actor.PID) (uint64, bool) {
	if pid == nil || pid.Address != t.addr || !strings.HasPrefix(pid.Id, pidPrefix) {
		return 0, false
	}
	n, err := strconv.ParseUint(pid.Id[len(pidPrefix):], 10, 64)
	return n, err == nil
}
