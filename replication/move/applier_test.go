package move

import (
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// section writes s's kept moves into a fresh packet.
func section(t testing.TB, s *Stream) []byte {
	t.Helper()
	w := bitstream.NewWriter(make([]byte, 1200))
	if _, err := s.Write(w); err != nil {
		t.Fatal(err)
	}
	return w.Bytes()
}

// collect reads one section and returns the sequences applied.
func collect(t testing.TB, a *Applier, p []byte) []uint64 {
	t.Helper()
	var seqs []uint64
	if err := a.Read(bitstream.NewReader(p), func(m Move) { seqs = append(seqs, m.Seq) }); err != nil {
		t.Fatal(err)
	}
	return seqs
}

func TestApplierExactlyOnce(t *testing.T) {
	s := streamWith(t, Config{}, 1, Move{Forward: 1}, Move{Forward: 2}, Move{Forward: 3})
	p1 := section(t, s) // moves 1..3
	s.Add(Move{Seq: 4, Forward: 4})
	s.Add(Move{Seq: 5, Forward: 5})
	p2 := section(t, s) // moves 1..5
	s.Ack(3)
	p3 := section(t, s) // moves 4..5

	tests := []struct {
		name  string
		order [][]byte
		want  [][]uint64
	}{
		{"in order", [][]byte{p1, p2, p3}, [][]uint64{{1, 2, 3}, {4, 5}, nil}},
		{"duplicate packet", [][]byte{p1, p1, p2}, [][]uint64{{1, 2, 3}, nil, {4, 5}}},
		{"reordered: newer first", [][]byte{p2, p1, p3}, [][]uint64{{1, 2, 3, 4, 5}, nil, nil}},
		{"first packet lost", [][]byte{p2}, [][]uint64{{1, 2, 3, 4, 5}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var a Applier
			total := 0
			for i, p := range tc.order {
				got := collect(t, &a, p)
				if len(got) != len(tc.want[i]) {
					t.Fatalf("packet %d applied %v, want %v", i, got, tc.want[i])
				}
				for j := range got {
					if got[j] != tc.want[i][j] {
						t.Fatalf("packet %d applied %v, want %v", i, got, tc.want[i])
					}
				}
				total += len(got)
			}
			if a.LastApplied() != 5 || a.Stats().Applied != uint64(total) || a.Stats().Lost != 0 {
				t.Fatalf("last %d, stats %+v", a.LastApplied(), a.Stats())
			}
		})
	}
}

func TestApplierCountsGaps(t *testing.T) {
	s, _ := NewStream(Config{InputRate: 30, Window: 3})
	var a Applier
	for i := 0; i < 2; i++ {
		s.Add(Move{Seq: s.NextSeq()})
	}
	if got := collect(t, &a, section(t, s)); len(got) != 2 {
		t.Fatalf("applied %v", got)
	}
	// The ack never comes back; 6 more moves overflow the 3-move window,
	// which then holds 6..8. Moves 3..5 are lost for good.
	for i := 0; i < 6; i++ {
		s.Add(Move{Seq: s.NextSeq()})
	}
	got := collect(t, &a, section(t, s))
	if len(got) != 3 || got[0] != 6 {
		t.Fatalf("applied %v, want [6 7 8]", got)
	}
	if st := a.Stats(); st.Lost != 3 || st.Applied != 5 {
		t.Fatalf("stats %+v, want 3 lost and 5 applied", st)
	}
	if s.Stats().Dropped != 5 {
		// 1 and 2 were applied but never acked, so the client dropped them too.
		t.Fatalf("client dropped %d, want 5", s.Stats().Dropped)
	}
}

func TestApplierAcrossSequenceWrap(t *testing.T) {
	const start = 1<<16 - 20
	s := streamWith(t, Config{}, start)
	var a Applier
	a.Reset(start - 1)
	var applied []uint64
	for i := 0; i < 200; i++ {
		s.Add(Move{Seq: s.NextSeq(), Yaw: uint16(i)})
		if i%3 == 2 { // a packet every third move, the server acks every other packet
			got := collect(t, &a, section(t, s))
			applied = append(applied, got...)
			if i%2 == 0 {
				s.Ack(a.LastApplied())
			}
		}
	}
	for i, seq := range applied {
		if seq != start+uint64(i) {
			t.Fatalf("applied[%d] = %d, want %d", i, seq, start+uint64(i))
		}
	}
	if a.LastApplied() <= 1<<16 || a.Stats().Lost != 0 {
		t.Fatalf("last %d, stats %+v: the stream did not cross 2^16 cleanly", a.LastApplied(), a.Stats())
	}
}

func TestApplierCRCOnNewestOnly(t *testing.T) {
	s := streamWith(t, Config{}, 1, Move{CRC: 11}, Move{CRC: 22, Yaw: 5}, Move{CRC: 33, Yaw: 6})
	var a Applier
	var got []Move
	if err := a.Read(bitstream.NewReader(section(t, s)), func(m Move) { got = append(got, m) }); err != nil {
		t.Fatal(err)
	}
	for i, m := range got {
		last := i == len(got)-1
		if m.HasCRC != last || (last && m.CRC != 33) || (!last && m.CRC != 0) {
			t.Fatalf("move %d: HasCRC %v CRC %d", m.Seq, m.HasCRC, m.CRC)
		}
	}
	// A nil apply only advances.
	var b Applier
	if err := b.Read(bitstream.NewReader(section(t, s)), nil); err != nil || b.LastApplied() != 3 {
		t.Fatalf("nil apply: %v, last %d", err, b.LastApplied())
	}
}

// TestReadIntoMatchesRead: decoding into the caller's scratch, left full
// of another section's moves, applies what Read applies and counts the
// same.
func TestReadIntoMatchesRead(t *testing.T) {
	s := streamWith(t, Config{}, 1, Move{Forward: 1}, Move{Forward: 2}, Move{Forward: 3})
	p1 := section(t, s)
	s.Add(Move{Seq: 4, Forward: 4, Yaw: 9})
	p2 := section(t, s)
	var scratch [MaxWindow]Move
	for i := range scratch {
		scratch[i] = Move{Seq: 999, Forward: -7, Dt: 3}
	}
	var a, b Applier
	for _, p := range [][]byte{p1, p2, p1} {
		var want, got []Move
		if err := a.Read(bitstream.NewReader(p), func(m Move) { want = append(want, m) }); err != nil {
			t.Fatal(err)
		}
		if err := b.ReadInto(bitstream.NewReader(p), &scratch, func(m Move) { got = append(got, m) }); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("ReadInto applied %v, Read %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("ReadInto applied %v, Read %v", got, want)
			}
		}
	}
	if a.Stats() != b.Stats() || a.LastApplied() != b.LastApplied() {
		t.Fatalf("ReadInto: %+v last %d; Read: %+v last %d", b.Stats(), b.LastApplied(), a.Stats(), a.LastApplied())
	}
}
