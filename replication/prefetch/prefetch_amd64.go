package prefetch

import "unsafe"

//go:noescape
func lines(p unsafe.Pointer, n uintptr)
