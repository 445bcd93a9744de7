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

// TestSpansAreTheServersMemory: HotSpan is the Server's first six lines,
// and PartSpans name the objects a received datagram reads, each whole (a
// span that named the wrong object or a part of it would prefetch lines
// the datagram never reads).
func TestSpansAreTheServersMemory(t *testing.T) {
	_, grant, _ := fzGrant(t)
	sess, _ := grant.Session()
	srv, err := NewServer(sess, DefaultServerConfig(), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p, n := srv.HotSpan(); p != uintptr(unsafe.Pointer(srv)) || n != unsafe.Offsetof(srv.ctlState) {
		t.Errorf("HotSpan is %d bytes at %#x, want the %d before ctlState at %p", n, p, unsafe.Offsetof(srv.ctlState), srv)
	}
	e := &srv.e
	want := []Span{
		{uintptr(unsafe.Pointer(e.sess)), unsafe.Sizeof(*e.sess)},
		{uintptr(unsafe.Pointer(e.nc)), unsafe.Sizeof(*e.nc)},
		{uintptr(unsafe.Pointer(e.evs)), unsafe.Sizeof(*e.evs)},
		{uintptr(unsafe.Pointer(e.evr)), 32},
		{uintptr(unsafe.Pointer(srv.cw)), unsafe.Sizeof(*srv.cw)},
	}
	for i, sp := range srv.PartSpans() {
		if sp != want[i] || sp.P == 0 {
			t.Errorf("span %d is %d bytes at %#x, want %d at %#x", i, sp.N, sp.P, want[i].N, want[i].P)
		}
	}
}
