package handshake

import (
	"testing"
	"unsafe"
)

// TestSessionLayout: a Session stays in the 320-byte size class (352
// while each direction kept its own nonce and associated data, and the
// Session its own copy of the connection id); a 320-byte object is also
// 64-byte aligned in its span, so it takes five cache lines, not six.
func TestSessionLayout(t *testing.T) {
	if n := unsafe.Sizeof(Session{}); n > 320 {
		t.Errorf("Session is %d bytes, over the 320-byte size class", n)
	}
}
