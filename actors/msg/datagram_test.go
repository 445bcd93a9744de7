package msg

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/ghostwire/ghostwire/actors/udp"
)

func TestCompactCopiesSmallDatagramsOnly(t *testing.T) {
	addr := netip.MustParseAddrPort("192.0.2.1:4000")
	for _, tc := range []struct {
		name  string
		n     int
		small bool
	}{
		{"empty", 0, true},
		{"a client packet", 90, true},
		{"exactly SmallDatagram", SmallDatagram, true},
		{"one byte more", SmallDatagram + 1, false},
		{"full size", udp.MaxDatagram, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDatagram()
			if len(d.Buf) != udp.MaxDatagram {
				t.Fatalf("NewDatagram: %d-byte buffer", len(d.Buf))
			}
			for i := range tc.n {
				d.Buf[i] = byte(i*7 + 1)
			}
			d.N, d.Addr, d.At = tc.n, addr, 42
			c := d.Compact()
			if (c != nil) != tc.small {
				t.Fatalf("Compact of %d bytes: %v, want a copy: %v", tc.n, c != nil, tc.small)
			}
			if c == nil {
				d.Release()
				return
			}
			if len(c.Buf) != SmallDatagram || !bytes.Equal(c.Bytes(), d.Bytes()) || c.Addr != addr || c.At != 42 {
				t.Fatalf("copy: %d-byte buffer, %d bytes, %v, %v", len(c.Buf), c.N, c.Addr, c.At)
			}
			c.Release()
			d.Release()
			// Each goes back to its own pool: a full-size datagram is
			// never handed out with a small buffer.
			for range 4 {
				if x := NewDatagram(); len(x.Buf) != udp.MaxDatagram {
					t.Fatalf("NewDatagram after a small Release: %d-byte buffer", len(x.Buf))
				}
			}
		})
	}
}
