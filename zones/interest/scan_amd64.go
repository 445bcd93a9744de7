package interest

import (
	"golang.org/x/sys/cpu"

	"github.com/ghostwire/ghostwire/zones/grid"
)

// haveScan4 reports whether Update may scan its candidates four at a time
// (scan4: SSE2, SSSE3's PSHUFB and POPCNT, which every amd64 CPU since
// 2008 has; x86-64-v1 promises neither, so they are asked for).
var haveScan4 = cpu.X86.HasSSSE3 && cpu.X86.HasPOPCNT

// scan4 is scan.run over every run of runs[:nruns] (base indices), four
// candidates at a time (scan_amd64.s): it writes the kept entries to
// out[:o] and returns o and how many of them were marked. It reads up to
// 3 candidates and marks past each run's end and writes up to 3 entries
// past o: bx, bz, bkey and marks must have 3 past the last run's end,
// out room for every candidate and 3.
//
//go:noescape
func scan4(out *Entry, bx, bz *float32, bkey *uint32, marks *uint8, runs *grid.Run, nruns int, x, z, enter2, leave2 float32, tok uint32) (o, kept int)
