package conn

import (
	"testing"
	"unsafe"
)

// TestConnLayout: the per-datagram and per-pump fields fit the first four
// cache lines, and a Conn stays in the 384-byte size class (whose objects
// are 64-byte aligned; 448 before the rare fields went to connRare), as the
// comment on Conn says.
func TestConnLayout(t *testing.T) {
	var c Conn
	if end := unsafe.Offsetof(c.dirty) + unsafe.Sizeof(c.dirty); end > 4*64 {
		t.Errorf("the hot fields end at byte %d, past the fourth cache line", end)
	}
	if n := unsafe.Sizeof(c); n > 384 {
		t.Errorf("Conn is %d bytes, over the 384-byte size class", n)
	}
	if unsafe.Offsetof(c.views) < 4*64 {
		t.Errorf("the view slot (a zone's goroutine writes it) shares the hot lines")
	}
}
