package prefetch

import (
	"bytes"
	"testing"
	"unsafe"
)

// TestLinesIsAHint: prefetching changes no byte, and reaches any address
// without a fault — unaligned starts and ends, a single byte, whole
// lines, ranges past an allocation's end and a nil pointer (the hint
// must never be what crashes a server: callers pass pointers they read
// from other objects, not always live ones).
func TestLinesIsAHint(t *testing.T) {
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	want := bytes.Clone(buf)
	base := unsafe.Pointer(unsafe.SliceData(buf))
	for _, c := range []struct{ off, n uintptr }{
		{0, 0}, {0, 1}, {1, 1}, {63, 1}, {63, 2}, {0, 64}, {1, 64}, {0, 65},
		{17, 1000}, {0, 4096}, {4000, 4096}, // past the end: a hint, not a read
	} {
		Lines(unsafe.Add(base, c.off), c.n)
	}
	Lines(nil, 64)
	if !bytes.Equal(buf, want) {
		t.Fatal("Lines changed memory")
	}
}

// BenchmarkLines is the cost of the hint itself for a 32-byte object's
// lines (two at most) and a 1 KB array's (16), in cache.
func BenchmarkLines(b *testing.B) {
	buf := make([]byte, 1024)
	p := unsafe.Pointer(unsafe.SliceData(buf))
	b.Run("32B", func(b *testing.B) {
		for b.Loop() {
			Lines(p, 32)
		}
	})
	b.Run("1KB", func(b *testing.B) {
		for b.Loop() {
			Lines(p, 1024)
		}
	})
}
