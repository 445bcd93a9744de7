//go:build !amd64

package interest

import "github.com/ghostwire/ghostwire/zones/grid"

// haveScan4: only amd64 has scan4.
const haveScan4 = false

func scan4(out *Entry, bx, bz *float32, bkey *uint32, marks *uint8, runs *grid.Run, nruns int, x, z, enter2, leave2 float32, tok uint32) (o, kept int) {
	panic("interest: scan4 without amd64")
}
