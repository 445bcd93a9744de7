package ghost

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestScratchLentToOnePackerAtATime: a scratch is lent to one packer at a
// time. Two borrows without a release get two scratches; two given back
// are lent again once each (the last-given slot and the list), and a third
// borrow meanwhile gets neither.
func TestScratchLentToOnePackerAtATime(t *testing.T) {
	var a, b, c packer
	a.borrow()
	b.borrow()
	if a.packScratch == nil || a.packScratch == b.packScratch {
		t.Fatalf("two borrows got %p and %p", a.packScratch, b.packScratch)
	}
	pa, pb := a.packScratch, b.packScratch
	a.release()
	b.release()
	if a.packScratch != nil || b.packScratch != nil {
		t.Fatal("a released packer still holds its scratch")
	}
	a.borrow()
	b.borrow()
	c.borrow()
	lent := map[*packScratch]int{}
	for _, p := range []*packer{&a, &b, &c} {
		lent[p.packScratch]++
	}
	if len(lent) != 3 || lent[pa] != 1 || lent[pb] != 1 {
		t.Fatalf("after giving back %p and %p, three borrows got %p, %p, %p", pa, pb, a.packScratch, b.packScratch, c.packScratch)
	}
	a.release()
	b.release()
	c.release()
}

// TestConcurrentWritesShareNoScratch: tables written from several
// goroutines at once (a server's connection shards) write the packets
// each writes alone. Writes borrow their scratch from one shared list;
// two Writes handed the same scratch would mix their buckets and bits
// (and the race detector would report it).
func TestConcurrentWritesShareNoScratch(t *testing.T) {
	const workers, packets = 4, 300
	reg, cs := codeTestClasses(t)
	run := func(seed uint64) ([][]byte, error) {
		tab, err := NewTable(reg, DefaultConfig())
		if err != nil {
			return nil, err
		}
		sw, err := NewSnapshotWriter(reg)
		if err != nil {
			return nil, err
		}
		r := rand.New(rand.NewPCG(seed, 7))
		ents := make([]State, 40)
		for i := range ents {
			ents[i] = randCodeState(r)
			fitState(cs[i%len(cs)], &ents[i])
		}
		var out [][]byte
		var buf [MaxPacketBytes]byte
		var w bitstream.Writer
		now := time.Second
		for seq := uint64(1); seq <= packets; seq++ {
			now += time.Duration(48+r.IntN(5)) * time.Millisecond
			sn := sw.Next(len(ents))
			refs := make([]ViewRef, 0, len(ents))
			for i := range ents {
				ents[i].Pos[0] += r.Float64() - 0.5
				ents[i].Pos[2] += r.Float64() - 0.5
				sn.Set(i, uint64(100+i), cs[i%len(cs)], &ents[i])
				refs = append(refs, NewViewRef(uint32(i), cs[i%len(cs)], float32(1+i%5)))
			}
			sw.Seal(sn)
			if err := tab.SetSnapshotView(now, sn, refs); err != nil {
				return nil, err
			}
			w.Reset(buf[:100+r.IntN(MaxPacketBytes-100)])
			if _, err := tab.Write(&w, seq, now); err != nil {
				return nil, fmt.Errorf("packet %d: %w", seq, err)
			}
			out = append(out, bytes.Clone(w.Bytes()))
			tab.OnFate(notify.Fate{Seq: seq, Delivered: r.IntN(5) != 0, SentAt: now})
		}
		return out, nil
	}
	want := make([][][]byte, workers)
	for k := range want {
		var err error
		if want[k], err = run(uint64(k)); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		k   int
		got [][]byte
		err error
	}
	done := make(chan result, workers)
	for k := range workers {
		go func() {
			got, err := run(uint64(k))
			done <- result{k, got, err}
		}()
	}
	for range workers {
		res := <-done
		if res.err != nil {
			t.Fatal(res.err)
		}
		for i := range res.got {
			if !bytes.Equal(res.got[i], want[res.k][i]) {
				t.Fatalf("table %d, packet %d: written alongside others %x, alone %x", res.k, i+1, res.got[i], want[res.k][i])
			}
		}
	}
}
