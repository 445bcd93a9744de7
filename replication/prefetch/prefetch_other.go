//go:build !amd64

package prefetch

import "unsafe"

func lines(p unsafe.Pointer, n uintptr) {}
