package session

import (
	"reflect"
	"testing"
	"unsafe"
)

// TestServerSendOnlyLine: what only a send reads (the control state and
// the byte budget) fills the Server's last cache line, from byte 384 on,
// and the Server is exactly the 448-byte class (its objects start on a
// line): a received datagram and the pump after it that sends nothing
// do not touch it.
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

// TestServerDatagramLines: the Server's line 2 (bytes 128–191) holds only
// what a received datagram without events and the pump after it that
// sends nothing never read — the endpoint's send and rare counters, its
// probe timer's send time, the event numbering's lanes — so such a
// datagram touches five of the Server's seven lines, not six (the comment
// on Server). Every field is checked down to the endpoint's, the
// counters' and the numbering's own: a field moved into the line, or one
// of these moved out of it (which lets another in), fails it.
func TestServerDatagramLines(t *testing.T) {
	cold := map[string]bool{
		"e.c.BytesOut": true, "e.c.DataOut": true, "e.c.AckOut": true, "e.c.HeaderBytesOut": true,
		"e.c.rare": true, "e.lastDataSent": true, "ev.lanes": true,
	}
	const lo, hi = 2 * 64, 3 * 64
	seen := 0
	var walk func(t reflect.Type, base uintptr, prefix string)
	walk = func(ty reflect.Type, base uintptr, prefix string) {
		for i := range ty.NumField() {
			f := ty.Field(i)
			name, off := prefix+f.Name, base+f.Offset
			switch name {
			case "e", "e.c", "ev":
				walk(f.Type, off, name+".")
				continue
			}
			in := off < hi && off+f.Type.Size() > lo
			switch {
			case in && !cold[name]:
				t.Errorf("%s (bytes %d–%d) is in line 2, which a datagram must not read", name, off, off+f.Type.Size()-1)
			case cold[name] && (off < lo || off+f.Type.Size() > hi):
				t.Errorf("%s (bytes %d–%d) is out of line 2 (%d–%d)", name, off, off+f.Type.Size()-1, lo, hi-1)
			case cold[name]:
				seen++
			}
		}
	}
	walk(reflect.TypeOf(Server{}), 0, "")
	if seen != len(cold) {
		t.Errorf("found %d of the %d fields line 2 is for", seen, len(cold))
	}
}
