package handshake

import (
	"testing"
	"unsafe"
)

// TestSessionLayout: a Session stays in the 256-byte size class (288 while
// it kept the nonce and associated data of the packet at hand, which the
// caller's Scratch holds now; 352 while each direction kept its own, and
// the Session its own copy of the connection id; 320 while each direction
// kept a pointer to the shared scratch and the scratch had room for
// 32-byte headers).
func TestSessionLayout(t *testing.T) {
	if n := unsafe.Sizeof(Session{}); n > 256 {
		t.Errorf("Session is %d bytes, over the 256-byte size class", n)
	}
}
