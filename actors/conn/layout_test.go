package conn

import (
	"testing"
	"unsafe"
)

// TestConnLayout: the per-datagram and per-pump fields fit the first 128
// bytes (160 while the player and the unacked moves' capacity were in the
// third line), what a pump reads the first 64, and a Conn stays in the 256-byte
// size class (320 before the zone's epoch went to connRare, the resend
// time into waitFrom, the held input and kept events behind one pointer,
// the user data into a string and four bools into flags), whose objects
// start on a cache line: a datagram touches two lines, a Control three, the fourth is the view
// slot's and ctlPost's, which other goroutines write (in the 320-byte
// class, five lines, the same three; in the
// 352-byte class, 32-byte aligned in its span, 160 bytes were three lines
// wherever it started; 384 with the pool pointer, the held inputs' slice
// and the lookup count in it; 448 before the rare fields went to
// connRare), as the comment on Conn says. The input a datagram collects
// is the shard's (shard.in) and a held Control's deadline follows from
// its arrival (Conn.heldUntil): 16 bytes fewer, the 320-byte class.
func TestConnLayout(t *testing.T) {
	var c Conn
	// What a datagram reads (shard.handleOne, Conn.onDatagram, Move,
	// checkZone, flushInput) is the first two lines: joinAt and applied,
	// which a Control reads, are in the third.
	for _, f := range []struct {
		name      string
		off, size uintptr
	}{
		{"stopped", unsafe.Offsetof(c.stopped), unsafe.Sizeof(c.stopped)},
		{"inflight", unsafe.Offsetof(c.inflight), unsafe.Sizeof(c.inflight)},
		{"zone", unsafe.Offsetof(c.zone), unsafe.Sizeof(c.zone)},
		{"ctlAt", unsafe.Offsetof(c.ctlAt), unsafe.Sizeof(c.ctlAt)},
		{"lastMove", unsafe.Offsetof(c.lastMove), unsafe.Sizeof(c.lastMove)},
		{"waitFrom", unsafe.Offsetof(c.waitFrom), unsafe.Sizeof(c.waitFrom)},
		{"unacked", unsafe.Offsetof(c.unacked), unsafe.Sizeof(c.unacked)},
		{"player", unsafe.Offsetof(c.player), unsafe.Sizeof(c.player)},
	} {
		if f.off+f.size > 128 {
			t.Errorf("%s (a datagram reads it) ends at byte %d, past the first two lines", f.name, f.off+f.size)
		}
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
		{"foldSec", unsafe.Offsetof(c.foldSec), unsafe.Sizeof(c.foldSec)},
		{"hidx", unsafe.Offsetof(c.hidx), unsafe.Sizeof(c.hidx)},
		{"closed", unsafe.Offsetof(c.closed), unsafe.Sizeof(c.closed)},
		{"stopped", unsafe.Offsetof(c.stopped), unsafe.Sizeof(c.stopped)},
		{"dirty", unsafe.Offsetof(c.dirty), unsafe.Sizeof(c.dirty)},
		{"gst", unsafe.Offsetof(c.gst), unsafe.Sizeof(c.gst)},
	} {
		if f.off+f.size > 64 {
			t.Errorf("%s (a pump reads it) is at byte %d, out of the first line", f.name, f.off)
		}
	}
	// The round's events ask for a Conn's first connHotBytes, and a
	// stage later read the crypto session's address from them
	// (prefetchEvents).
	if end := unsafe.Offsetof(c.hs) + unsafe.Sizeof(c.hs); end > connHotBytes {
		t.Errorf("hs ends at byte %d, past the %d bytes prefetchEvents asks for", end, connHotBytes)
	}
	if n := unsafe.Sizeof(c); n > 256 {
		t.Errorf("Conn is %d bytes, over the 256-byte size class", n)
	}
	if unsafe.Offsetof(c.views) < 3*64 || unsafe.Offsetof(c.ctlPost) < 3*64 {
		t.Errorf("the view slot (at %d) or ctlPost (at %d), which other goroutines write, shares the hot lines",
			unsafe.Offsetof(c.views), unsafe.Offsetof(c.ctlPost))
	}
}
