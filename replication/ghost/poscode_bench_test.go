package ghost

import "testing"

// BenchmarkTables1000Fate1 is BenchmarkTables1000 with each packet's fate
// one packet later: at most one position of a ghost in flight when the
// next is written, so one or two prediction pairs a record, not seven (a
// server whose fates come after its next write; one whose clients ack
// within a view applies them before it, with nothing in flight:
// BenchmarkTables1000Server).
func BenchmarkTables1000Fate1(b *testing.B) { benchTables(b, 1) }
