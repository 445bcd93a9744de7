package ghost

import (
	"testing"
	"unsafe"
)

// TestTableFateLines pins the Table's fields a fate reads (OnFate:
// findPacket, sampleFateDelay, the record walks, releaseResolved, trim) on
// the object's first three cache lines (type Table's comment): a Table is
// a 512-byte object, the largest size class without a malloc header, so
// it starts on a line and its bytes 0–63, 64–127 and 128–191 are lines 0,
// 1 and 2.
// On a server a connection's table is cold when its fate comes, and each
// line more is a miss a fate; they were six (0, 1, 4, 6, 7, 8).
func TestTableFateLines(t *testing.T) {
	const header = 0 // a 512-byte object has no malloc header (its span's bitmap says where its pointers are)
	var tab Table
	fields := []struct {
		name      string
		off, size uintptr
	}{
		{"reg", unsafe.Offsetof(tab.reg), unsafe.Sizeof(tab.reg)},
		{"slots", unsafe.Offsetof(tab.slots), unsafe.Sizeof(tab.slots)},
		{"pos", unsafe.Offsetof(tab.pos), unsafe.Sizeof(tab.pos)},
		{"cfg", unsafe.Offsetof(tab.cfg), unsafe.Sizeof(tab.cfg)},
		{"pkts", unsafe.Offsetof(tab.pkts), unsafe.Sizeof(tab.pkts)},
		{"pktHead", unsafe.Offsetof(tab.pktHead), unsafe.Sizeof(tab.pktHead)},
		{"pktLen", unsafe.Offsetof(tab.pktLen), unsafe.Sizeof(tab.pktLen)},
		{"entHead", unsafe.Offsetof(tab.entHead), unsafe.Sizeof(tab.entHead)},
		{"entLen", unsafe.Offsetof(tab.entLen), unsafe.Sizeof(tab.entLen)},
		{"lastSeq", unsafe.Offsetof(tab.lastSeq), unsafe.Sizeof(tab.lastSeq)},
		{"viewMS", unsafe.Offsetof(tab.viewMS), unsafe.Sizeof(tab.viewMS)},
		{"ents", unsafe.Offsetof(tab.ents), unsafe.Sizeof(tab.ents)},
		{"lastNow", unsafe.Offsetof(tab.lastNow), unsafe.Sizeof(tab.lastNow)},
		{"epoch", unsafe.Offsetof(tab.epoch), unsafe.Sizeof(tab.epoch)},
		{"fateDelay", unsafe.Offsetof(tab.fateDelay), unsafe.Sizeof(tab.fateDelay)},
		{"trimAt", unsafe.Offsetof(tab.trimAt), unsafe.Sizeof(tab.trimAt)},
		{"fateSeen", unsafe.Offsetof(tab.fateSeen), unsafe.Sizeof(tab.fateSeen)},
		{"wrote", unsafe.Offsetof(tab.wrote), unsafe.Sizeof(tab.wrote)},
	}
	for _, f := range fields {
		if first, last := (header+f.off)/64, (header+f.off+f.size-1)/64; last > 2 {
			t.Errorf("Table.%s in bytes %d–%d: lines %d–%d of the object, want within 0–2 (a fate's lines)", f.name, f.off, f.off+f.size-1, first, last)
		}
	}
	// The Table stays in the 512-byte size class: a byte more takes the
	// 576-byte class, with a malloc header, 64 bytes a connection more
	// (and the lines above move 8 bytes).
	if got := unsafe.Sizeof(tab) + header; got > 512 {
		t.Errorf("Table is %d bytes with its header, want at most 512 (its size class)", got)
	}
	// Where the runtime puts a Table: on a line, as the offsets above
	// assume.
	reg, _, _ := newTestRegistry(t)
	var keep []*Table
	for range 16 {
		tb, err := NewTable(reg, DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		keep = append(keep, tb)
		if p := uintptr(unsafe.Pointer(tb)); p%64 != header {
			t.Fatalf("a Table starts %d bytes into a line, want %d (its lines are not the ones this test pins)", p%64, header)
		}
	}
	_ = keep
}

// TestRegistrySlowFates checks the registry's slowFates, which sends every
// fate of its tables by fateRecords (OnFate), against what it stands for:
// a class past entMaskBits groups (Table.wide) or positions packed past 64
// bits (posPool.wide). Were it clear for either, the delivered walks
// (usualRun, lateRun) would read the in-flight records' and the tracks'
// low words alone.
func TestRegistrySlowFates(t *testing.T) {
	narrow, _, _ := newTestRegistry(t)
	wideGroups, _ := wideRegistry(t)
	widePos, err := NewRegistry(Bounds{Max: [3]float64{2e9, 2e9, 2e9}, Precision: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := widePos.Register(NPCClass(nil)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		reg  *Registry
		want bool
	}{
		{name: "shipped classes, default bounds", reg: narrow, want: false},
		{name: "a class past entMaskBits groups", reg: wideGroups, want: true},
		{name: "31-bit axes", reg: widePos, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := NewTable(tc.reg, DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			if got, wide := tc.reg.slowFates, tab.wide || tab.pp.wide; got != tc.want || got != wide {
				t.Fatalf("slowFates %v, want %v (Table.wide %v, posPool.wide %v)", got, tc.want, tab.wide, tab.pp.wide)
			}
		})
	}
}
