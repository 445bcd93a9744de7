package sim

import "testing"

// BenchmarkTakeEvent1000 (informative): one ordered event of each of a
// zone's 1,000 players through its fence (TakeEvent), then one of a
// player it does not know. One iteration is the 1,001 events; run it
// under callgrind to compare builds.
func BenchmarkTakeEvent1000(b *testing.B) {
	const players = 1000
	z, _ := crowdZone(b, players)
	ids := make([]uint64, 0, players)
	for i := range z.ents {
		if e := &z.ents[i]; e.kind == KindPlayer && e.role == roleOwned {
			ids = append(ids, e.id)
		}
	}
	if len(ids) != players {
		b.Fatalf("%d players owned, want %d", len(ids), players)
	}
	var seq uint64
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		seq++
		for _, id := range ids {
			if !z.TakeEvent(id, 0x9e9, 0, seq) {
				b.Fatal("an owned player's new event refused")
			}
		}
		if z.TakeEvent(1<<40, 0x9e9, 0, seq) {
			b.Fatal("an unknown player's event taken: no fence covers it here")
		}
	}
}
