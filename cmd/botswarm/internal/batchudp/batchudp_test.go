package batchudp

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// TestEveryDatagramArrivesIntact: a burst of datagrams of a few sizes to two
// receivers, many more than a flush holds, arrives exactly once and byte
// for byte — into a receiver with UDP_GRO (super-datagrams cut up by Each)
// and one without (the kernel cuts them up), and with UDP_SEGMENT refused.
func TestEveryDatagramArrivesIntact(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gso     bool
		refuses bool // the kernel refuses UDP_SEGMENT
	}{{"segmented", true, false}, {"one by one", false, false}, {"kernel refuses segments", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Close()
			setGSO(tx, tc.gso)
			if tc.refuses {
				refuseGSO(tx)
			}
			var rx [2]*Conn
			for i := range rx {
				if rx[i], err = Listen("127.0.0.1:0"); err != nil {
					t.Fatal(err)
				}
				defer rx[i].Close()
				rx[i].SetBuffers(4<<20, 1<<20)
			}
			plainRx(rx[1]) // the second receiver takes them one by one
			const n = 700
			want := [2]map[string]int{{}, {}}
			w := tx.NewWriter(256)
			for i := range n {
				r := i % 2
				size := 40 + (i/7)%5*30 // runs of equal sizes, five sizes
				p := append(w.Slot(), fmt.Sprintf("%05d|", i)...)
				for len(p) < size {
					p = append(p, byte(i))
				}
				want[r][string(p)]++
				w.Commit(p, rx[r].LocalAddr())
			}
			w.Flush()
			if w.Errs != 0 {
				t.Fatalf("%d datagrams dropped by send errors", w.Errs)
			}
			if tc.gso && !tc.refuses && w.Super == 0 {
				t.Fatal("no super-datagram sent")
			}
			for r := range rx {
				got := map[string]int{}
				cut := 0 // datagrams that came inside a super-datagram, beyond its first
				b := NewBatch(8, 0)
				deadline := time.Now().Add(5 * time.Second)
				total := 0
				for total < n/2 && time.Now().Before(deadline) {
					_ = rx[r].uc.SetReadDeadline(deadline)
					if err := rx[r].ReadBatch(b); err != nil {
						t.Fatalf("receiver %d: %v after %d datagrams", r, err, total)
					}
					cut += b.Datagrams() - b.n
					b.Each(func(p []byte, from netip.AddrPort) {
						if from != tx.LocalAddr() {
							t.Errorf("from %v, want %v", from, tx.LocalAddr())
						}
						got[string(bytes.Clone(p))]++
						total++
					})
				}
				if total != n/2 {
					t.Fatalf("receiver %d: %d datagrams, want %d", r, total, n/2)
				}
				switch {
				case r == 0 && tc.gso && !tc.refuses && rx[r].GRO() && cut == 0:
					t.Errorf("receiver with UDP_GRO got no super-datagram")
				case (r == 1 || !tc.gso || tc.refuses) && cut != 0:
					t.Errorf("receiver %d: %d datagrams in super-datagrams, want none", r, cut)
				}
				for k, c := range got {
					if want[r][k] != c {
						t.Fatalf("receiver %d: datagram %q arrived %d times, sent %d", r, k[:6], c, want[r][k])
					}
				}
			}
		})
	}
}

// TestSteadyStateAllocatesNothing: queueing and flushing a burst to the
// addresses already seen allocates nothing, nor does reading it, nor a
// read that finds nothing.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	tx, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	rx, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	to := rx.LocalAddr()
	w := tx.NewWriter(64)
	b := NewBatch(8, 0)
	_ = rx.uc.SetReadDeadline(time.Now().Add(10 * time.Second)) // bounds every read below
	burst := func() {
		for i := range 64 {
			p := append(w.Slot(), byte(i), 1, 2, 3, 4, 5, 6, 7)
			if i%3 == 0 {
				p = append(p, 8)
			}
			w.Commit(p, to)
		}
		w.Flush()
		for got := 0; got < 64; {
			if err := rx.ReadBatch(b); err != nil {
				t.Fatal(err)
			}
			got += b.Datagrams()
		}
		if err := rx.TryReadBatch(b); err != nil || b.Len() != 0 {
			t.Fatalf("a read of nothing: %d messages, %v", b.Len(), err)
		}
	}
	burst()
	limit := 0.0
	if raceEnabled {
		limit = 4 // x/net refills its pooled message headers and syscaller (race_on_test.go)
	}
	if a := testing.AllocsPerRun(20, burst); a > limit {
		t.Fatalf("%.1f allocations per burst of 64, want ≤ %v", a, limit)
	}
}
