package conn

import (
	"testing"
	"unsafe"
)

// TestConnLayout: the per-datagram and per-pump fields fit the first 160
// bytes, what a pump reads the first 64, and a Conn stays in the 320-byte size class, whose objects start
// on a cache line (320 is five lines): they touch three lines (in the
// 352-byte class, 32-byte aligned in its span, 160 bytes were three lines
// wherever it started; 384 with the pool pointer, the held inputs' slice
// and the lookup count in it; 448 before the rare fields went to
// connRare), as the comment on Conn says. The input a datagram collects
// is the shard's (shard.in) and a held Control's deadline follows from
// its arrival (Conn.heldUntil): 16 bytes fewer, the 320-byte class.
func TestConnLayout(t *testing.T) {
	var c Conn
	if end := unsafe.Offsetof(c.unacked) + unsafe.Sizeof(c.unacked); end > 160 {
		t.Errorf("the hot fields end at byte %d, past 160 (a fourth cache line when the Conn starts half-way into one)", end)
	}
	// What a pump reads (shard.pumpFrom, Conn.pump, the heap's move) is
	// the first line alone: the round's other events have pushed the rest
	// out by then.
	for _, f := range []struct {
		name      string
		off, size uintptr
	}{
		{"srv", unsafe.Offsetof(c.srv), unsafe.Sizeof(c.srv)},
		{"gm", unsafe.Offsetof(c.gm), unsafe.Sizeof(c.gm)},
		{"heldCtl", unsafe.Offsetof(c.heldCtl), unsafe.Sizeof(c.heldCtl)},
		{"rare", unsafe.Offsetof(c.rare), unsafe.Sizeof(c.rare)},
		{"foldAt", unsafe.Offsetof(c.foldAt), unsafe.Sizeof(c.foldAt)},
		{"hidx", unsafe.Offsetof(c.hidx), unsafe.Sizeof(c.hidx)},
		{"closed", unsafe.Offsetof(c.closed), unsafe.Sizeof(c.closed)},
		{"stopped", unsafe.Offsetof(c.stopped), unsafe.Sizeof(c.stopped)},
		{"dirty", unsafe.Offsetof(c.dirty), unsafe.Sizeof(c.dirty)},
	} {
		if f.off+f.size > 64 {
			t.Errorf("%s (a pump reads it) is at byte %d, out of the first line", f.name, f.off)
		}
	}
	for _, f := range []struct {
		name string
		off  uintptr
	}{
		{"stopped", unsafe.Offsetof(c.stopped)},
		{"inflight", unsafe.Offsetof(c.inflight)},
		{"unacked", unsafe.Offsetof(c.unacked)},
		{"foldAt", unsafe.Offsetof(c.foldAt)},
		{"hidx", unsafe.Offsetof(c.hidx)},
	} {
		if f.off >= 160 {
			t.Errorf("%s is at byte %d, out of the hot lines", f.name, f.off)
		}
	}
	if n := unsafe.Sizeof(c); n > 320 {
		t.Errorf("Conn is %d bytes, over the 320-byte size class", n)
	}
	if unsafe.Offsetof(c.views) < 4*64 {
		t.Errorf("the view slot (a zone's goroutine writes it) shares the hot lines")
	}
}
