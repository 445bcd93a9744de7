package handshake

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func testProtectors(t testing.TB) (send, recv *Protector) {
	t.Helper()
	key := [KeySize]byte{9, 9, 9}
	id := ConnID{1, 2, 3, 4, 5, 6, 7, 8}
	send, err := NewProtector(key, id, ClientToServer)
	if err != nil {
		t.Fatal(err)
	}
	recv, err = NewProtector(key, id, ClientToServer)
	if err != nil {
		t.Fatal(err)
	}
	return send, recv
}

func TestSealOpenRoundTrip(t *testing.T) {
	tests := []struct {
		name      string
		hdr, body int
		seq       uint64
	}{
		{"ack-only: 3-byte header, no payload", 3, 0, 0},
		{"small packet", 3, 37, 1},
		{"full-size packet", 3, MaxPacketSize - 3 - TagSize, 2},
		{"large header", 200, 100, 1 << 40},
		{"header filling the inline associated data", adInline, 20, 5},
		{"header one byte past it", adInline + 1, 20, 6},
		{"last sequence number", 3, 10, math.MaxUint64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			send, recv := testProtectors(t)
			hdr, body := bytes.Repeat([]byte{0x42}, tc.hdr), bytes.Repeat([]byte{0x17}, tc.body)
			ct, err := send.Seal(nil, hdr, body, tc.seq)
			if err != nil {
				t.Fatal(err)
			}
			if len(ct) != tc.body+TagSize {
				t.Fatalf("ciphertext %d bytes, want %d", len(ct), tc.body+TagSize)
			}
			if tc.body > 8 && bytes.Contains(ct, body[:8]) {
				t.Error("payload visible in the ciphertext")
			}
			pt, err := recv.Open(nil, hdr, ct, tc.seq)
			if err != nil || !bytes.Equal(pt, body) {
				t.Fatalf("Open: %v", err)
			}
			// In place: the payload's storage becomes the ciphertext and back.
			buf := append(append([]byte(nil), body...), make([]byte, TagSize)...)
			_, err = send.Seal(buf[:0], hdr, buf[:tc.body], tc.seq)
			if tc.seq == math.MaxUint64 {
				if !errors.Is(err, ErrSeqReuse) {
					t.Fatalf("sealed after MaxUint64: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("sealed the same sequence twice")
			}
			ct2, err := send.Seal(buf[:0], hdr, buf[:tc.body], tc.seq+1)
			if err != nil {
				t.Fatal(err)
			}
			pt2, err := recv.Open(ct2[:0], hdr, ct2, tc.seq+1)
			if err != nil || !bytes.Equal(pt2, body) {
				t.Fatalf("in-place Open: %v", err)
			}
		})
	}
}

// TestSealNeverReusesNonce: across random seal attempts the sequence numbers
// Seal accepts are strictly increasing, and every refusal writes nothing.
func TestSealNeverReusesNonce(t *testing.T) {
	send, _ := testProtectors(t)
	rng := rand.New(rand.NewPCG(5, 6))
	var last uint64
	sealed := false
	for i := range 20000 {
		var seq uint64
		switch rng.IntN(4) {
		case 0:
			seq = last // reuse
		case 1:
			seq = last - uint64(rng.IntN(5)) // older
		default:
			seq = last + uint64(rng.IntN(3)) // next, a gap, or reuse
		}
		dst := []byte("prefix")
		out, err := send.Seal(dst, []byte{1}, []byte{2, 3}, seq)
		ok := !sealed || seq > last
		if ok != (err == nil) {
			t.Fatalf("op %d: seal %d after %d: err %v", i, seq, last, err)
		}
		if err != nil {
			if !errors.Is(err, ErrSeqReuse) || string(out) != "prefix" {
				t.Fatalf("op %d: refusal %v wrote %q", i, err, out)
			}
			continue
		}
		last, sealed = seq, true
		if send.NextSeq() != seq+1 {
			t.Fatalf("NextSeq %d after sealing %d", send.NextSeq(), seq)
		}
	}
}

// TestBitFlipsNeverAccepted flips one random bit of a sealed packet — header,
// ciphertext, tag, sequence number or connection id — 1,000,000 times over
// several packet shapes; not one may open.
func TestBitFlipsNeverAccepted(t *testing.T) {
	const flips = 1_000_000
	shapes := []struct {
		name      string
		hdr, body int
	}{
		{"ack-only", 3, 0},
		{"40-byte packet", 3, 21},
		{"typical 120-byte packet", 4, 100},
		{"disconnect-sized", 9, 1},
		{"header past the inline associated data", adInline + 3, 10},
	}
	rng := rand.New(rand.NewPCG(7, 8))
	send, recv := testProtectors(t)
	accepted := 0
	var dst [MaxPacketSize]byte
	for si, sh := range shapes {
		hdr, body := make([]byte, sh.hdr), make([]byte, sh.body)
		for i := range hdr {
			hdr[i] = byte(rng.Uint32())
		}
		seq := uint64(1000 + si)
		ct, err := send.Seal(nil, hdr, body, seq)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := recv.Open(dst[:0], hdr, ct, seq); err != nil {
			t.Fatalf("%s: unmodified packet refused: %v", sh.name, err)
		}
		// Bits: header, ciphertext+tag, the 64 sequence bits, the 64 connection id bits.
		nbits := 8*len(hdr) + 8*len(ct) + 64 + 64
		for range flips / len(shapes) {
			b := rng.IntN(nbits)
			h, c, s, p := hdr, ct, seq, recv
			switch {
			case b < 8*len(hdr):
				h = flipBit(hdr, b)
			case b < 8*(len(hdr)+len(ct)):
				c = flipBit(ct, b-8*len(hdr))
			case b < 8*(len(hdr)+len(ct))+64:
				s = seq ^ 1<<(b-8*(len(hdr)+len(ct)))
			default:
				id := recv.ID()
				i := b - 8*(len(hdr)+len(ct)) - 64
				id[i/8] ^= 1 << (i % 8)
				p = &Protector{k: protector{aead: recv.k.aead, dir: recv.k.dir}}
				copy(p.sc.ad[:], id[:]) // the id the associated data starts with
			}
			if _, err := p.Open(dst[:0], h, c, s); err == nil {
				accepted++
			}
		}
	}
	if accepted != 0 {
		t.Fatalf("%d of %d bit-flipped packets accepted", accepted, flips)
	}
}

func TestProtectorBindings(t *testing.T) {
	key := [KeySize]byte{7}
	id := ConnID{1}
	c2s, _ := NewProtector(key, id, ClientToServer)
	ct, err := c2s.Seal(nil, []byte{1}, []byte("x"), 5)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  [KeySize]byte
		id   ConnID
		dir  Direction
		seq  uint64
	}{
		{"reflected: same key, other direction", key, id, ServerToClient, 5},
		{"other connection id", key, ConnID{2}, ClientToServer, 5},
		{"other key", [KeySize]byte{8}, id, ClientToServer, 5},
		{"other sequence number", key, id, ClientToServer, 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewProtector(tc.key, tc.id, tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Open(nil, []byte{1}, ct, tc.seq); !errors.Is(err, ErrAuth) {
				t.Fatalf("err = %v, want ErrAuth", err)
			}
		})
	}
	t.Run("too short for a tag", func(t *testing.T) {
		if _, err := c2s.Open(nil, nil, make([]byte, TagSize-1), 0); !errors.Is(err, ErrAuth) {
			t.Fatal(err)
		}
	})
	t.Run("oversized packet refused", func(t *testing.T) {
		if _, err := c2s.Seal(nil, []byte{1}, make([]byte, MaxPacketSize), 100); !errors.Is(err, ErrTooLarge) {
			t.Fatal(err)
		}
		if _, err := c2s.Open(nil, make([]byte, MaxHeaderSize+1), make([]byte, TagSize), 100); !errors.Is(err, ErrTooLarge) {
			t.Fatal(err)
		}
	})
	t.Run("bad direction", func(t *testing.T) {
		if _, err := NewProtector(key, id, 2); !errors.Is(err, ErrConfig) {
			t.Fatal(err)
		}
	})
}

func TestSealOpenAllocs(t *testing.T) {
	send, recv := testProtectors(t)
	hdr, body := []byte{1, 2, 3}, make([]byte, 1000)
	var pkt, out [MaxPacketSize]byte
	seq := uint64(0)
	allocs := testing.AllocsPerRun(200, func() {
		ct, err := send.Seal(pkt[:0], hdr, body, seq)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := recv.Open(out[:0], hdr, ct, seq); err != nil {
			t.Fatal(err)
		}
		seq++
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per seal+open", allocs)
	}
}
