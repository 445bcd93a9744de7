package ghostmgr

import (
	"testing"
	"unsafe"
)

// TestManagerLayout: one Manager per connection stays in the 80-byte size
// class. It was 256 bytes while it kept a copy of the table's Stats (152
// bytes) that Stats overwrote from the table anyway, then 104 (the 112
// class) with a flag its counts already said, then 96 with 64-bit views,
// errors, sections and fates counts. What a pump that sends
// nothing reads of it is its State, in the owner's line (New), not in
// the Manager (TestStateFollowsTheManager).
func TestManagerLayout(t *testing.T) {
	if n := unsafe.Sizeof(Manager{}); n > 80 {
		t.Errorf("Manager is %d bytes, over the 80-byte size class", n)
	}
}
