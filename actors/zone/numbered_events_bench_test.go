package zone

import (
	"bytes"
	"testing"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
)

// BenchmarkZoneApplyNumberedEvents: apply of an owned player's Input
// with four 40-byte echo events numbered as a connection numbers them
// (each through the player's fence, sim.Zone.TakeEvent), without moves,
// through the dev game into a pooled Output released after.
func BenchmarkZoneApplyNumberedEvents(b *testing.B) {
	a, _ := eventBench(b) // player 1 joined, owned
	now := a.p.Now()
	pay := bytes.Repeat([]byte{7}, 40)
	seq := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		in := msg.NewInput()
		in.Player, in.EventGen = 1, 0x5e9
		for range 4 {
			seq++
			in.AddSeq(event.Ordered, EchoLane, 0, pay, seq)
		}
		var c inputCounts
		a.apply(in, now, &c)
		for _, po := range a.outs {
			po.o.Release()
		}
		a.outs = a.outs[:0]
	}
}
