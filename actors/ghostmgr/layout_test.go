package ghostmgr

import (
	"testing"
	"unsafe"
)

// TestManagerLayout: one Manager per connection stays in the 96-byte size
// class. It was 256 bytes while it kept a copy of the table's Stats (152
// bytes) that Stats overwrote from the table anyway, then 104 (the 112
// class) with a flag its counts already said. What a pump that sends
// nothing reads (pending, pend) is in the first 32 bytes, one line
// wherever a 96-byte object starts (on a line or half-way into one).
func TestManagerLayout(t *testing.T) {
	var m Manager
	if n := unsafe.Sizeof(m); n > 96 {
		t.Errorf("Manager is %d bytes, over the 96-byte size class", n)
	}
	for _, f := range []struct {
		name string
		end  uintptr
	}{
		{"pending", unsafe.Offsetof(m.pending) + unsafe.Sizeof(m.pending)},
		{"pend", unsafe.Offsetof(m.pend) + unsafe.Sizeof(m.pend)},
	} {
		if f.end > 32 {
			t.Errorf("%s ends at byte %d, past the first 32", f.name, f.end)
		}
	}
}
