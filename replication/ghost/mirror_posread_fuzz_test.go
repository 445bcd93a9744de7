package ghost

import "testing"

// FuzzPosUpdateWindow holds readPosUpdate's one-window read to the field by
// field read on any bytes: the same value, ok and rest, bits consumed,
// error and unreferenced count (checkPosRead).
func FuzzPosUpdateWindow(f *testing.F) {
	f.Add([]byte{0x35, 0x12, 0xf0, 0x0f, 0xaa, 0x55, 0x01, 0x80}, uint8(2), false, uint8(3), uint16(64), uint64(1))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint8(1), true, uint8(0), uint16(72), uint64(2))
	f.Add([]byte{0x0f, 0x00}, uint8(0), false, uint8(0), uint16(16), uint64(3))
	f.Fuzz(func(t *testing.T, data []byte, refs uint8, edge bool, off uint8, nbits uint16, seed uint64) {
		if len(data) > 32 {
			data = data[:32]
		}
		reg, _, _ := newTestRegistry(t)
		c := posReadCase{refs: int(refs % 4), edge: edge, ms: 5000, data: data, seed: seed}
		c.nbits = min(int(nbits), 8*len(data))
		c.off = min(int(off%32), c.nbits)
		if _, diff := checkPosRead(t, reg, c); diff != "" {
			t.Fatal(diff)
		}
	})
}
