package ghost

import "testing"

// BenchmarkTables1000Fate1 is BenchmarkTables1000 with each packet's fate
// one packet later, as on a server whose clients ack within a view (the
// loopback load tests): at most one position of a ghost in flight when
// the next is written, so one or two prediction pairs a record, not seven.
func BenchmarkTables1000Fate1(b *testing.B) { benchTables(b, 1) }
