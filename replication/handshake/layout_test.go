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

// TestSessionSealLine: what SealWith reads — the state, the sending
// protector, the connection id — lies in the Session's first 64 bytes,
// one cache line (a 128-byte object starts on one), so a sealed packet
// reads one line of a cold Session, not two (the id sat in the second).
func TestSessionSealLine(t *testing.T) {
	var s Session
	for _, f := range []struct {
		name     string
		off, len uintptr
	}{
		{"state", unsafe.Offsetof(s.state), unsafe.Sizeof(s.state)},
		{"send", unsafe.Offsetof(s.send), unsafe.Sizeof(s.send)},
		{"id", unsafe.Offsetof(s.id), unsafe.Sizeof(s.id)},
	} {
		if f.off+f.len > 64 {
			t.Errorf("Session.%s at bytes %d–%d, past the first line", f.name, f.off, f.off+f.len)
		}
	}
}
