package handshake

import (
	"testing"
	"unsafe"
)

// TestSessionLayout: a Session stays in the 128-byte size class (256 with
// a 1,024-sequence replay window, 17 words of bitmap where 128 sequences
// take 3, and a receiving protector whose last and sealed were never used;
// 288 while
// it kept the nonce and associated data of the packet at hand, which the
// caller's Scratch holds now; 352 while each direction kept its own, and
// the Session its own copy of the connection id; 320 while each direction
// kept a pointer to the shared scratch and the scratch had room for
// 32-byte headers).
func TestSessionLayout(t *testing.T) {
	if n := unsafe.Sizeof(Session{}); n > 128 {
		t.Errorf("Session is %d bytes, over the 128-byte size class", n)
	}
}
