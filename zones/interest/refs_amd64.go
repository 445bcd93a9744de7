package interest

import "github.com/ghostwire/ghostwire/replication/ghost"

// bucketRefs4 is BucketRefsFolded's loop over set[:n] (n a multiple of 4),
// four members at a time (refs_amd64.s): it writes out[:done] and returns
// done and how many of those members lie beyond far2 (each added off). It
// stops at the first group with a slot at or past nslots (done is that
// group's first member), for the Go loop to meet it as before. Its
// callers ask haveScan4 first (SSE2 and POPCNT are all it needs).
//
//go:noescape
func bucketRefs4(out *ghost.ViewRef, set *Entry, n int, bySlot *slotPrio, nslots int, x, z, falloff, far, far2 float32, off uint32, buckets *[1 << 11]ghost.ViewRef) (done, nfar int)
