package handshake

import (
	"testing"
	"unsafe"
)

// TestSessionLayout: a Session stays in the 288-byte size class (352
// while each direction kept its own nonce and associated data, and the
// Session its own copy of the connection id; 320 while each direction
// kept a pointer to the shared scratch and the scratch had room for
// 32-byte headers).
func TestSessionLayout(t *testing.T) {
	if n := unsafe.Sizeof(Session{}); n > 288 {
		t.Errorf("Session is %d bytes, over the 288-byte size class", n)
	}
}
