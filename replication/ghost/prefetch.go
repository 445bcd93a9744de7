package ghost

import (
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/prefetch"
)

// PrefetchHeader asks the CPU for the Table's own lines, ahead of a use a
// while later (PrefetchRecords after it, then the table's fates, view and
// write): a hint, it waits for nothing.
func (t *Table) PrefetchHeader() {
	prefetch.Lines(unsafe.Pointer(t), unsafe.Sizeof(*t))
}

// PrefetchRecords asks for the per-record arrays every fate, view and
// write of the table walks: the slots and the position tracks of the
// records in use, the view order and the wire ids, and the fates' own:
// the records of the packets in flight and the oldest packet's line of
// the ring (the fate's first reads: findPacket's, then each record's
// before its slot; a miss each on a loaded node, ≈ 3 % of its samples at
// 2,000 players, taken by the first slot read of usualNewest). It reads the Table's header
// (PrefetchHeader first, a while ahead).
func (t *Table) PrefetchRecords() {
	n := uintptr(min(max(int(t.live), 0), len(t.slots), len(t.pos)))
	prefetch.Lines(unsafe.Pointer(unsafe.SliceData(t.slots)), n*unsafe.Sizeof(slot{}))
	prefetch.Lines(unsafe.Pointer(unsafe.SliceData(t.pos)), n*unsafe.Sizeof(posTrack{}))
	// The previous view's order, which a snapshot view walks in lockstep
	// with the new one, and the records' wire ids, which a write reads
	// (each first read a miss otherwise).
	prefetch.Lines(unsafe.Pointer(unsafe.SliceData(t.order)), uintptr(min(len(t.order), maxPrefetchEnts))*unsafe.Sizeof(uint16(0)))
	prefetch.Lines(unsafe.Pointer(unsafe.SliceData(t.idm)), min(n, uintptr(len(t.idm)))*unsafe.Sizeof(uint16(0)))
	if h := int(t.pktHead); t.pktLen > 0 && uint(h) < uint(len(t.pkts)) {
		prefetch.Lines(unsafe.Pointer(&t.pkts[h]), unsafe.Sizeof(pktRec{}))
	}
	// Within ents' bounds (a hint reads nothing, but its address is
	// worked out from the header alone), and at most 1 KB: four packets'
	// records at 2,000 players are ≈ 400 bytes.
	if lo, k := int(t.entHead), int(t.entLen); lo >= 0 && k > 0 && lo < len(t.ents) {
		k = min(k, len(t.ents)-lo, maxPrefetchEnts)
		prefetch.Lines(unsafe.Pointer(&t.ents[lo]), uintptr(k)*unsafe.Sizeof(entry(0)))
	}
}

// maxPrefetchEnts bounds PrefetchRecords' records in flight (1 KB).
const maxPrefetchEnts = 256
