package event

import (
	"bytes"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestWriteEmptyIsWrite drives two Senders alike, one with Write alone and
// one with WriteEmpty first and Write only when it declines (a server's
// usual packet, its end bit written by the caller): the same sections, bit
// for bit — the round-robin start included, which orders the streams of a
// later section — the same counts, and WriteEmpty declining exactly while
// something is queued or in flight.
func TestWriteEmptyIsWrite(t *testing.T) {
	a, err := NewSender(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSender(DefaultConfig())
	var empties, declined int
	for seq := uint64(1); seq <= 400; seq++ {
		now := time.Duration(seq) * 50 * time.Millisecond // trims run too
		if seq%37 == 0 {
			for _, s := range []*Sender{a, b} {
				if err := s.SendOrdered(int(seq/37)%2, []byte("hello")); err != nil {
					t.Fatal(err)
				}
				if err := s.SendOrdered(2, []byte("there")); err != nil {
					t.Fatal(err)
				}
			}
		}
		idle := a.txState == nil && a.work == 0 && a.x == nil
		wa := bitstream.NewWriter(make([]byte, 64))
		if _, err := a.Write(wa, seq, now); err != nil {
			t.Fatal(err)
		}
		wb := bitstream.NewWriter(make([]byte, 64))
		took := b.WriteEmpty(seq, now)
		if took != idle {
			t.Fatalf("packet %d: WriteEmpty %v with nothing queued or in flight %v", seq, took, idle)
		}
		if took {
			empties++
			wb.WriteFlag(false)
		} else {
			declined++
			if _, err := b.Write(wb, seq, now); err != nil {
				t.Fatal(err)
			}
		}
		if wa.BitLen() != wb.BitLen() || !bytes.Equal(wa.Bytes(), wb.Bytes()) {
			t.Fatalf("packet %d: Write %x (%d bits), WriteEmpty path %x (%d bits)", seq, wa.Bytes(), wa.BitLen(), wb.Bytes(), wb.BitLen())
		}
		// Every other packet is lost: resends and copies go out too.
		f := notify.Fate{Seq: seq, Delivered: seq%2 == 0}
		a.OnFate(f)
		b.OnFate(f)
	}
	if empties == 0 || declined == 0 {
		t.Fatalf("%d empty sections, %d declined: the test exercised one path only", empties, declined)
	}
	if sa, sb := a.Stats(), b.Stats(); sa != sb {
		t.Fatalf("stats differ\n Write      %+v\n WriteEmpty %+v", sa, sb)
	}
	if b.WriteEmpty(400, 0) {
		t.Fatal("WriteEmpty took a sequence not after the last")
	}
}
