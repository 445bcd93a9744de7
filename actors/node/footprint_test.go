package node

import (
	"runtime"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// An actor system costs what its actors cost, not 2.8 MB of empty registry
// maps up front (see registry.go): a size check, not a timing one.
func TestActorSystemFootprint(t *testing.T) {
	const maxSystemBytes = 512 << 10
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	sys := actor.NewActorSystem()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(sys)
	got := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("a new actor system: %d B of heap", got)
	if got > maxSystemBytes {
		t.Fatalf("a new actor system keeps %d B, want ≤ %d (is the registry split 32 ways again?)", got, maxSystemBytes)
	}
}
