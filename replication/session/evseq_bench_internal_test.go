package session

import (
	"testing"

	"github.com/ghostwire/ghostwire/replication/event"
)

// BenchmarkKeptEvent is a client's per-player numbering of one ordered
// event of 40 bytes: numbered and kept for resending, then reported
// applied by the server a few events later (as a bot's echoes are).
func BenchmarkKeptEvent(b *testing.B) {
	var n clientNumbering
	n.init(event.DefaultLanes)
	p := make([]byte, 40)
	b.ReportAllocs()
	for b.Loop() {
		n.sent(0, p)
		if s := n.next[0]; s > 3 {
			n.report(0, s-3)
		}
	}
}
