package prefetch

import "unsafe"

// Lines prefetches the n bytes at p into every level of the cache, a line
// (64 bytes) at a time. n of 0 prefetches nothing.
func Lines(p unsafe.Pointer, n uintptr) {
	if n != 0 {
		lines(p, n)
	}
}
