package session

import (
	"testing"
	"unsafe"
)

// TestServerSendOnlyLine: what only a send reads (the control state and
// the byte budget) fills the Server's last cache line, from byte 384 on,
// and the Server is exactly the 448-byte class (its objects start on a
// line): a received datagram and the pump after it that sends nothing
// touch six lines, not seven.
func TestServerSendOnlyLine(t *testing.T) {
	var s Server
	if n := unsafe.Sizeof(s); n != 448 {
		t.Errorf("Server is %d bytes, want 448 (7 lines, line-aligned in its size class)", n)
	}
	for _, f := range []struct {
		name string
		off  uintptr
	}{
		{"ctlState", unsafe.Offsetof(s.ctlState)},
		{"credit", unsafe.Offsetof(s.credit)},
		{"creditAt", unsafe.Offsetof(s.creditAt)},
	} {
		if f.off < 6*64 {
			t.Errorf("%s is at byte %d, before the last line (384)", f.name, f.off)
		}
	}
}
