package ghostmgr

import (
	"testing"

	"github.com/ghostwire/ghostwire/replication/ghost"
)

// snapWorld is the registry of the shipped player and NPC classes and a
// snapshot writer of it: the world the reuse, holders and managers' tests
// and benchmarks take their views from.
func snapWorld(tb testing.TB) (reg *ghost.Registry, pc, nc *ghost.Class, sw *ghost.SnapshotWriter) {
	tb.Helper()
	reg, err := ghost.NewRegistry(ghost.DefaultBounds())
	if err != nil {
		tb.Fatal(err)
	}
	pc, nc = ghost.PlayerClass(nil), ghost.NPCClass(nil)
	if err := reg.Register(pc, nc); err != nil {
		tb.Fatal(err)
	}
	if sw, err = ghost.NewSnapshotWriter(reg); err != nil {
		tb.Fatal(err)
	}
	return reg, pc, nc, sw
}
