package conn

import (
	"testing"
	"unsafe"
)

// TestConnLayout: the per-datagram and per-pump fields fit the first three
// cache lines' worth of bytes (a 352-byte object is 32-byte aligned, so
// they touch three or four lines, as the four of the 384-byte class
// before), and a Conn stays in the 352-byte size class (384 with the pool
// pointer, the held inputs' slice and the lookup count in it; 448 before
// the rare fields went to connRare), as the comment on Conn says.
func TestConnLayout(t *testing.T) {
	var c Conn
	if end := unsafe.Offsetof(c.dirty) + unsafe.Sizeof(c.dirty); end > 3*64 {
		t.Errorf("the hot fields end at byte %d, past the third cache line", end)
	}
	if n := unsafe.Sizeof(c); n > 352 {
		t.Errorf("Conn is %d bytes, over the 352-byte size class", n)
	}
	if unsafe.Offsetof(c.views) < 4*64 {
		t.Errorf("the view slot (a zone's goroutine writes it) shares the hot lines")
	}
}
