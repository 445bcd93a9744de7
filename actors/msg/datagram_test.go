package msg

import (
	"bytes"
	"net/netip"
	"sync"
	"testing"
	"unsafe"

	"github.com/ghostwire/ghostwire/actors/udp"
)

func TestCompactCopiesSmallDatagramsOnly(t *testing.T) {
	addr := netip.MustParseAddrPort("192.0.2.1:4000")
	for _, tc := range []struct {
		name  string
		n     int
		small bool
		buf   int // the copy's buffer
	}{
		{"empty", 0, true, TinyDatagram},
		{"moves and acks", 50, true, TinyDatagram},
		{"exactly TinyDatagram", TinyDatagram, true, TinyDatagram},
		{"a move and an ack", 36, true, TinyDatagram},
		{"one byte more than tiny", TinyDatagram + 1, true, ShortDatagram},
		{"exactly ShortDatagram", ShortDatagram, true, ShortDatagram},
		{"one byte more than short", ShortDatagram + 1, true, MidDatagram},
		{"exactly MidDatagram", MidDatagram, true, MidDatagram},
		{"a client packet with an event", MidDatagram + 1, true, SmallDatagram},
		{"exactly SmallDatagram", SmallDatagram, true, SmallDatagram},
		{"a client repeating its move window", SmallDatagram + 1, true, LargeDatagram},
		{"exactly LargeDatagram", LargeDatagram, true, LargeDatagram},
		{"one byte more", LargeDatagram + 1, false, 0},
		{"full size", udp.MaxDatagram, false, 0},
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
			if len(c.Buf) != tc.buf || !bytes.Equal(c.Bytes(), d.Bytes()) || c.Addr != addr || c.At != 42 {
				t.Fatalf("copy: %d-byte buffer, %d bytes, %v, %v", len(c.Buf), c.N, c.Addr, c.At)
			}
			c.Release()
			d.Release()
			// Each goes back to its own pool: a full-size datagram is
			// never handed out with a small buffer, nor a copy with
			// less room than it needs.
			for range 4 {
				if x := NewDatagram(); len(x.Buf) != udp.MaxDatagram {
					t.Fatalf("NewDatagram after a small Release: %d-byte buffer", len(x.Buf))
				}
				d.N = SmallDatagram
				if x := d.Compact(); len(x.Buf) != SmallDatagram {
					t.Fatalf("Compact of %d bytes after a tiny Release: %d-byte buffer", d.N, len(x.Buf))
				}
			}
		})
	}
}

// TestTinyDatagramIsOneSmallObject: a tiny, short, mid or large copy and
// its buffer are one object of the 128-, 160-, 256- or 512-byte size
// class, where a SmallDatagram copy is two (a 72-byte Datagram and a
// 256-byte buffer). A tiny copy is two cache lines: its class's objects
// start on one.
func TestTinyDatagramIsOneSmallObject(t *testing.T) {
	if n := unsafe.Sizeof(tinyDatagram{}); n != 128 {
		t.Fatalf("tinyDatagram is %d bytes, want 128 (a size class, two lines)", n)
	}
	if n := unsafe.Sizeof(shortDatagram{}); n != 160 {
		t.Fatalf("shortDatagram is %d bytes, want 160 (a size class)", n)
	}
	if n := unsafe.Sizeof(midDatagram{}); n != 256 {
		t.Fatalf("midDatagram is %d bytes, want 256 (a size class)", n)
	}
	if n := unsafe.Sizeof(largeDatagram{}); n != 512 {
		t.Fatalf("largeDatagram is %d bytes, want 512 (a size class)", n)
	}
	for _, p := range []struct {
		pool *sync.Pool
		n    int
	}{{&tinyPool, TinyDatagram}, {&shortPool, ShortDatagram}, {&midPool, MidDatagram}, {&largePool, LargeDatagram}} {
		d := p.pool.Get().(*Datagram)
		if len(d.Buf) != p.n || cap(d.Buf) != p.n {
			t.Fatalf("a %d-byte datagram's buffer: len %d, cap %d", p.n, len(d.Buf), cap(d.Buf))
		}
		d.Release()
	}
}
