package msg

import (
	"bytes"
	"net/netip"
	"testing"
)

// drainDepot empties the depots (tests share them: they are the
// process's).
func drainDepot() {
	for _, dp := range []*depot{&tinyDepot, &shortDepot} {
		dp.mu.Lock()
		dp.full, dp.empty = nil, nil
		dp.mu.Unlock()
	}
}

// TestDatagramCacheHandsBack: the tiny and short copies one goroutine's cache hands
// out (CompactWith) and another's releases come back to the first through
// the depot, whole magazines at a time: after a few rounds, every copy
// the reader takes is one the shard gave back, with its bytes copied
// fresh.
func TestDatagramCacheHandsBack(t *testing.T) {
	drainDepot()
	defer drainDepot()
	var reader, shard DatagramCache
	src := NewDatagram()
	defer src.Release()
	src.Addr = netip.MustParseAddrPort("192.0.2.1:4000")
	seen := make(map[*Datagram]bool)
	reused := 0
	const rounds, batch = 20, 3 * cacheMag
	for r := range rounds {
		var got []*Datagram
		for i := range batch {
			src.N = 1 + (r+i)%ShortDatagram
			for j := range src.N {
				src.Buf[j] = byte(r + i + j)
			}
			d := src.CompactWith(&reader)
			want := TinyDatagram
			if src.N > TinyDatagram {
				want = ShortDatagram
			}
			if len(d.Buf) != want || !bytes.Equal(d.Bytes(), src.Bytes()) || d.Addr != src.Addr {
				t.Fatalf("round %d: copy of %d bytes: %d-byte buffer, %d bytes", r, src.N, len(d.Buf), d.N)
			}
			if seen[d] {
				reused++
			}
			seen[d] = true
			got = append(got, d)
		}
		for _, d := range got {
			shard.Release(d)
		}
	}
	// The shard spills every full magazine; the reader takes them back.
	if want := (rounds - 1) * (batch - cacheMag); reused < want {
		t.Fatalf("%d of %d copies were reused, want at least %d: the shard's releases do not reach the reader", reused, rounds*batch, want)
	}
	if len(seen) > 2*batch+2*cacheMag {
		t.Fatalf("%d distinct datagrams for %d in flight at once", len(seen), batch)
	}
}

// TestDatagramCacheBounded: what the depot keeps is bounded (depotMags
// full magazines, a cache one), however many datagrams one side releases
// and the other never takes back: the rest goes to the pool.
func TestDatagramCacheBounded(t *testing.T) {
	drainDepot()
	defer drainDepot()
	var shard DatagramCache
	src := NewDatagram()
	defer src.Release()
	src.N = 40
	for range 100 * cacheMag {
		shard.Release(src.CompactWith(nil)) // from the pool: nobody takes them back
	}
	dp := &tinyDepot
	dp.mu.Lock()
	full, empty := len(dp.full), len(dp.empty)
	for _, m := range dp.full {
		if len(m) != cacheMag {
			t.Errorf("a full magazine of %d datagrams, want %d", len(m), cacheMag)
		}
	}
	dp.mu.Unlock()
	if full > depotMags || shard.Len() > cacheMag {
		t.Fatalf("depot %d full magazines (bound %d), cache %d (bound %d)", full, depotMags, shard.Len(), cacheMag)
	}
	if full != depotMags {
		t.Fatalf("depot %d full magazines after %d releases, want it full (%d)", full, 100*cacheMag, depotMags)
	}
	if empty > depotMags+2 {
		t.Fatalf("depot %d empty magazines, bound %d", empty, depotMags+2)
	}
	// Anything but a tiny or short copy goes to its own pool, not the
	// cache; each of those to its own size's magazine.
	big := NewDatagram()
	shard.Release(big)
	src.N = MidDatagram
	shard.Release(src.Compact())
	for _, st := range []struct {
		s    *stock
		want int
	}{{&shard.tiny, TinyDatagram}, {&shard.short, ShortDatagram}} {
		want := st.want
		for _, d := range st.s.free {
			if len(d.Buf) != want {
				t.Fatalf("a %d-byte datagram in the cache's %d-byte magazine", len(d.Buf), want)
			}
		}
	}
	if shard.Holds(big) {
		t.Fatal("the cache keeps a full-size datagram")
	}
}

// BenchmarkCompactRelease: a client's datagram copied compact (the
// gateway's reader) and released when handled (its connection's shard),
// through the pool or through two goroutines' caches (here one
// goroutine's two: the pool's best case, its Get and Put on one P).
func BenchmarkCompactRelease(b *testing.B) {
	src := NewDatagram()
	src.N = 60
	b.Run("pool", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			src.Compact().Release()
		}
	})
	b.Run("cache", func(b *testing.B) {
		var reader, shard DatagramCache
		b.ReportAllocs()
		for b.Loop() {
			shard.Release(src.CompactWith(&reader))
		}
	})
}
