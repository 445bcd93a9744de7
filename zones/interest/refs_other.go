//go:build !amd64

package interest

import "github.com/ghostwire/ghostwire/replication/ghost"

func bucketRefs4(out *ghost.ViewRef, set *Entry, n int, bySlot *slotPrio, nslots int, x, z, falloff, far, far2 float32, off uint32, buckets *[1 << 11]ghost.ViewRef) (done, nfar int) {
	panic("interest: bucketRefs4 without amd64")
}
