package ghost

import (
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// FuzzExtraRead holds ExtraGroup's Decode (the one-window read with its
// fallback) to the codes read one ReadGamma at a time on any bytes a server
// (or an attacker in its place) sends: the same values, the same bits
// consumed and an error exactly when the plain read gives one — never a
// panic, never a value the plain read would not give.
func FuzzExtraRead(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint8(0), uint16(64), uint8(4))
	f.Add([]byte{0x02, 0x00, 0xe0, 0x01}, uint8(3), uint16(30), uint8(4))
	f.Add([]byte{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, uint8(1), uint16(72), uint8(2))
	f.Add([]byte{0x55}, uint8(0), uint16(5), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, off uint8, nbits uint16, n uint8) {
		if len(data) > 64 {
			data = data[:64]
		}
		n = n%4 + 1
		bits := min(int(nbits), 8*len(data))
		skip := min(int(off%64), bits)
		g := ExtraGroup(int(n))
		var rs, rf bitstream.Reader
		rs.ResetBits(data, bits)
		rf.ResetBits(data, bits)
		if skip > 0 {
			rs.ReadBits(uint(skip), "junk")
			rf.ReadBits(uint(skip), "junk")
		}
		var ss, sf State
		es := readExtrasPlain(&rs, &ss, int(n))
		ef := g.Decode(&rf, &sf)
		if (es == nil) != (ef == nil) || rs.Pos() != rf.Pos() || (es == nil && sf != ss) {
			t.Fatalf("n %d at bit %d of %d: Decode %v to bit %d, err %v; the gammas %v to bit %d, err %v",
				n, skip, bits, sf.Extra[:n], rf.Pos(), ef, ss.Extra[:n], rs.Pos(), es)
		}
	})
}
