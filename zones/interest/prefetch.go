package interest

import (
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/prefetch"
)

// setPrefetchBytes bounds what Prefetch asks for: the header and the
// first members, the lines Tracker.Update reads first (its marking pass
// reads them all in order, and the CPU's own prefetcher follows from
// there).
const setPrefetchBytes = 256

// Prefetch asks the CPU for the set's header and first members, which a
// loaded node's next Update of it finds in memory: the set is touched
// once a tick. A hint: it changes nothing.
func (s *Set) Prefetch() {
	if n := uintptr(len(s.buf)) * unsafe.Sizeof(Entry{}); n > 0 {
		prefetch.Lines(unsafe.Pointer(unsafe.SliceData(s.buf)), min(n, setPrefetchBytes))
	}
}
