package swarm

import (
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/ghost"
)

// FuzzFastExtra holds fastExtra to ExtraGroup's own decode on any bytes a
// server (or an attacker in its place) sends: the same values, the same
// bits consumed and an error exactly when the group's decode gives one —
// never a panic, never a value the slow path would not read.
func FuzzFastExtra(f *testing.F) {
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
		g := ghost.ExtraGroup(int(n))
		dec := fastExtra(int(n), g.Decode)
		var rs, rf bitstream.Reader
		rs.ResetBits(data, bits)
		rf.ResetBits(data, bits)
		if skip > 0 {
			rs.ReadBits(uint(skip), "junk")
			rf.ReadBits(uint(skip), "junk")
		}
		var ss, sf ghost.State
		es := g.Decode(&rs, &ss)
		ef := dec(&rf, &sf)
		if (es == nil) != (ef == nil) || rs.Pos() != rf.Pos() || (es == nil && sf != ss) {
			t.Fatalf("n %d at bit %d of %d: fast %v to bit %d, err %v; ExtraGroup's %v to bit %d, err %v",
				n, skip, bits, sf.Extra[:n], rf.Pos(), ef, ss.Extra[:n], rs.Pos(), es)
		}
	})
}
