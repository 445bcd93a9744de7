package msg

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// Tray is a zone's intake for what connection shards send it (its
// Joins, Leaves and Inputs), taken by the zone when its tick runs rather
// than one actor message a shard round: at 1,000 players each round's
// message woke the zone's goroutine, ≈ 1,800 wake-ups a second.
type Tray interface {
	// Put appends ms, in order, for the zone to take: from is the caller's
	// identity (a shard), whose messages the zone got through its mailbox
	// before this tray, if any, are handled before ms. Urgent asks the
	// zone to take them now rather than at its tick (a Join, a Leave, an
	// input that carries events). Inputs beyond the zone's bound that
	// carry no event are dropped and counted, as its mailbox drops them.
	// False: the tray is closed (its zone stopped or restarted) and took
	// nothing; send ms as messages.
	Put(from any, ms []any, urgent bool) bool
	// Close takes the tray out of use: Put returns false from now on.
	Close()
}

type trayKey struct {
	sys *actor.ActorSystem
	id  string
}

// trays are the local zones' trays by actor system and process id.
var trays struct {
	sync.RWMutex
	m map[trayKey]Tray
}

// RegisterTray makes t the tray of sys's process id, closing the one it
// replaces (a restarted zone's).
func RegisterTray(sys *actor.ActorSystem, id string, t Tray) {
	trays.Lock()
	if trays.m == nil {
		trays.m = map[trayKey]Tray{}
	}
	old := trays.m[trayKey{sys, id}]
	trays.m[trayKey{sys, id}] = t
	trays.Unlock()
	if old != nil && old != t {
		old.Close()
	}
}

// UnregisterTray forgets t as the tray of sys's process id, unless another
// replaced it.
func UnregisterTray(sys *actor.ActorSystem, id string, t Tray) {
	trays.Lock()
	if trays.m[trayKey{sys, id}] == t {
		delete(trays.m, trayKey{sys, id})
	}
	trays.Unlock()
}

// TrayOf is the tray of pid in sys, or nil (no tray: a zone elsewhere, or
// any other actor).
func TrayOf(sys *actor.ActorSystem, pid *actor.PID) Tray {
	if pid.Address != sys.Address() {
		return nil
	}
	trays.RLock()
	t := trays.m[trayKey{sys, pid.Id}]
	trays.RUnlock()
	return t
}
