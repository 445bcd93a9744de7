package zone

import (
	"bytes"
	"testing"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/move"
)

// BenchmarkZoneApplyEvents: apply of an owned player's Input with four
// 40-byte echo events, without moves (moves false: the owner is looked
// up for its events) or behind one move (true), through the dev game into
// a pooled Output released after (no actor system).
func BenchmarkZoneApplyEvents(b *testing.B) {
	for _, moves := range []bool{false, true} {
		name := "alone"
		if moves {
			name = "behind-a-move"
		}
		b.Run(name, func(b *testing.B) {
			a, _ := eventBench(b) // player 1 joined, owned
			now := a.p.Now()
			seq := uint64(0)
			pay := bytes.Repeat([]byte{7}, 40)
			b.ReportAllocs()
			for b.Loop() {
				in := msg.NewInput()
				in.Player = 1
				if moves {
					seq++
					in.Moves = append(in.Moves, move.Move{Seq: seq, Dt: 1})
				}
				for i := range 4 {
					in.Add(event.Ordered, EchoLane, uint16(i), pay)
				}
				var c inputCounts
				a.apply(in, now, &c)
				for _, po := range a.outs {
					po.o.Release()
				}
				a.outs = a.outs[:0]
				if moves && seq%64 == 0 {
					a.z.Step(now) // drain the queue
				}
			}
		})
	}
}
