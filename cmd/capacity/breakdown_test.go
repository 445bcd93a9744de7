package main

import (
	"runtime"
	"strings"
	"testing"
)

func TestClassifyNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		fns  []string
		want string
	}{
		{"per-id arrays through the generic resize", []string{"runtime.makeslice", "github.com/ghostwire/ghostwire/replication/ghost.resize[...]", "github.com/ghostwire/ghostwire/replication/ghost.(*Table).grow"}, parts[0].name},
		{"the record store is in flight, not per id", []string{"runtime.makeslice", "github.com/ghostwire/ghostwire/replication/ghost.newRecordStore", "github.com/ghostwire/ghostwire/replication/ghost.(*Table).entRoom", "github.com/ghostwire/ghostwire/replication/ghost.(*Table).Write"}, parts[1].name},
		{"per-id arrays grown in place", []string{"runtime.makeslice", "github.com/ghostwire/ghostwire/replication/ghost.(*Table).grow", "github.com/ghostwire/ghostwire/replication/ghost.(*Table).alloc"}, parts[0].name},
		{"in-flight positions", []string{"runtime.growslice", "github.com/ghostwire/ghostwire/replication/ghost.(*posPool).get", "github.com/ghostwire/ghostwire/replication/ghost.(*Table).Write"}, parts[1].name},
		{"the record store trimmed", []string{"runtime.makeslice", "github.com/ghostwire/ghostwire/replication/ghost.newRecordStore", "github.com/ghostwire/ghostwire/replication/ghost.(*Table).trim"}, parts[1].name},
		{"in-flight positions compacted on a trim", []string{"runtime.makeslice", "github.com/ghostwire/ghostwire/replication/ghost.(*Table).compactPositions", "github.com/ghostwire/ghostwire/replication/ghost.(*Table).trim"}, parts[1].name},
		{"an event ring reached from the session", []string{"github.com/ghostwire/ghostwire/replication/event.(*sendStream).room", "github.com/ghostwire/ghostwire/replication/session.(*Server).Poll"}, parts[4].name},
		{"a pooled message", []string{"runtime.newobject", "github.com/ghostwire/ghostwire/actors/msg.init.func1", "sync.(*Pool).Get", "github.com/ghostwire/ghostwire/actors/msg.NewDatagram"}, parts[5].name},
		{"the allocation site wins over its callers", []string{"github.com/ghostwire/ghostwire/zones/sim.(*Zone).AppendView", "github.com/ghostwire/ghostwire/actors/zone.(*zoneActor).onTick"}, parts[2].name},
		{"a zone's snapshot, made in replication/ghost", []string{"github.com/ghostwire/ghostwire/replication/ghost.(*SnapshotWriter).Next", "github.com/ghostwire/ghostwire/zones/sim.(*Zone).Snapshot"}, parts[2].name},
		{"references into it", []string{"runtime.growslice", "github.com/ghostwire/ghostwire/zones/sim.(*Zone).AppendViewRefs"}, parts[2].name},
		{"references made for a pooled view", []string{"runtime.makeslice", "github.com/ghostwire/ghostwire/actors/msg.NewViewRefs", "github.com/ghostwire/ghostwire/actors/zone.(*zoneActor).onTick"}, parts[2].name},
		{"unknown", []string{"runtime.malg", "github.com/nats-io/nats-server/v2/server.init"}, otherPart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classifyNames(tc.fns); got != tc.want {
				t.Errorf("classifyNames = %q, want %q", got, tc.want)
			}
		})
	}
}

// NATS's share of "other" is the stacks no part claims that pass through
// NATS or the record writers; a part's bytes stay the part's.
func TestNATSShareOfOther(t *testing.T) {
	for _, tc := range []struct {
		name string
		fns  []string
		want bool
	}{
		{"the block cache", []string{"github.com/nats-io/nats-server/v2/server.init.func8", "sync.(*Pool).Get", "github.com/nats-io/nats-server/v2/server.getMsgBlockBuf", "github.com/nats-io/nats-server/v2/server.(*stream).internalLoop"}, true},
		{"the revision cache", []string{"runtime.mapassign", "github.com/ghostwire/ghostwire/actors/cluster.(*Players).rememberAt"}, true},
		{"a client's publish", []string{"runtime.makeslice", "github.com/nats-io/nats.go/jetstream.(*jetStream).PublishMsgAsync"}, true},
		{"the handshake", []string{"runtime.newobject", "github.com/ghostwire/ghostwire/replication/handshake.NewRateLimiter"}, false},
		{"a zone's checkpoint, queued from the zone actor", []string{"runtime.newobject", "github.com/ghostwire/ghostwire/actors/cluster.newCheckpointJob", "github.com/ghostwire/ghostwire/actors/zone.(*zoneActor).onTick"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := classifyNames(tc.fns)
			if got := name == otherPart && natsNames(tc.fns); got != tc.want {
				t.Errorf("NATS's share: %v, want %v (part %q)", got, tc.want, name)
			}
		})
	}
	// The share is a line of its own, not added to the sum.
	var b strings.Builder
	writeBreakdown(&b, []Step{{Players: 1, HeapParts: map[string]float64{otherPart: 3072, otherNATS: 2048, parts[0].name: 1024}}})
	for _, want := range []string{"| " + otherPart + " | 3.0 KB |", "| " + otherNATS + " | 2.0 KB |", " | 4.0 KB |\n"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("breakdown table without %q:\n%s", want, b.String())
		}
	}
}

// sink keeps the test's allocation live until the profile is read.
var sink [][]byte

// heapParts sees a live allocation made here under "other" and scales the
// sample up to about its real size.
func TestHeapPartsCountsLiveBytes(t *testing.T) {
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	runtime.GC()
	before := heapParts()[otherPart]
	for range 64 {
		sink = append(sink, make([]byte, 16<<10))
	}
	runtime.GC()
	runtime.GC()
	got := heapParts()[otherPart] - before
	sink = nil
	const live = 64 * 16 << 10
	// Within [¾, 2]×: garbage of earlier runs may be freed between the reads.
	if got < live*3/4 || got > 2*live {
		t.Fatalf("heapParts counted %.0f B of 1 MiB live", got)
	}
	var b strings.Builder
	writeBreakdown(&b, []Step{{Players: 1, HeapParts: map[string]float64{otherPart: 2048}}})
	if !strings.Contains(b.String(), "| "+otherPart+" | 2.0 KB |") {
		t.Fatalf("breakdown table:\n%s", b.String())
	}
}
