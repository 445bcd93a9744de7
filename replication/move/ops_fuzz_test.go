package move

import (
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// FuzzMoveOps drives a Stream and an Applier with an arbitrary sequence of
// operations — sample, send, deliver any in-flight packet (in any order, more
// than once), drop one, return an ack (possibly a stale one) — and checks them
// against a reference model: the server applies exactly the moves it received
// before any later one, each once, in order, with the content the client
// sampled; it counts as lost exactly the moves it skipped; the client never
// releases a move the server has not applied, and drops only when full.
func FuzzMoveOps(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 0, 0, 0, 1, 0, 2, 0, 5, 0}, uint8(4))
	f.Add([]byte{0, 1, 0, 1, 0, 1, 3, 1, 2, 1, 2, 0, 5, 1, 0, 0, 0, 1, 4, 0, 2, 0}, uint8(2))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 4, 0, 1, 2, 0, 5, 0, 0, 1, 2, 0}, uint8(3))
	f.Fuzz(func(t *testing.T, ops []byte, window uint8) {
		s, err := NewStream(Config{InputRate: 30, Window: 1 + int(window)%8})
		if err != nil {
			t.Fatal(err)
		}
		var (
			ap       Applier
			created  = []Move{{}}
			applied  = []bool{false}
			flight   [][]byte // packets in flight
			acks     []uint64 // acks the server sent, in order
			lostSeen uint64
		)
		deliver := func(p []byte) {
			prev := ap.LastApplied()
			err := ap.Read(bitstream.NewReader(p), func(m Move) {
				if m.Seq <= prev || applied[m.Seq] || !sameInput(&m, &created[m.Seq]) {
					t.Fatalf("move %d applied out of order, twice or altered (prev %d)", m.Seq, prev)
				}
				for q := prev + 1; q < m.Seq; q++ {
					lostSeen++ // skipped: never to be applied
				}
				applied[m.Seq] = true
				prev = m.Seq
			})
			if err != nil {
				t.Fatalf("Read of a packet the client wrote: %v", err)
			}
			acks = append(acks, ap.LastApplied())
		}
		for i := 0; i < len(ops); i++ {
			arg := 0
			if i+1 < len(ops) {
				arg = int(ops[i+1])
			}
			switch ops[i] % 6 {
			case 0: // sample
				m := Move{Seq: s.NextSeq(), Dt: 32, Forward: int8(arg % 127), Yaw: uint16(i)}
				before := s.Len()
				if err := s.Add(m); err != nil {
					t.Fatal(err)
				}
				if s.Len() > before && before >= s.Config().Window {
					t.Fatal("stream grew past its window")
				}
				created = append(created, m)
				applied = append(applied, false)
			case 1: // send
				w := bitstream.NewWriter(make([]byte, 1200))
				if _, err := s.Write(w); err != nil {
					t.Fatal(err)
				}
				if len(flight) < 16 {
					flight = append(flight, w.Bytes())
				}
			case 2, 3: // deliver packet arg (3: and keep it, a duplicate)
				if len(flight) > 0 {
					k := arg % len(flight)
					deliver(flight[k])
					if ops[i]%6 == 2 {
						flight = append(flight[:k], flight[k+1:]...)
					}
					i++
				}
			case 4: // drop packet arg
				if len(flight) > 0 {
					k := arg % len(flight)
					flight = append(flight[:k], flight[k+1:]...)
					i++
				}
			case 5: // an ack reaches the client, maybe a stale one
				if len(acks) > 0 {
					a := acks[len(acks)-1-arg%len(acks)]
					s.Ack(a)
					i++
				}
			}
			// The client never released a move the server did not apply or
			// skip: everything ≤ its ack is at or below LastApplied.
			if s.Acked() > ap.LastApplied() {
				t.Fatalf("client released up to %d, server applied up to %d", s.Acked(), ap.LastApplied())
			}
			st := s.Stats()
			if st.Added != st.Acked+st.Dropped+uint64(s.Len()) {
				t.Fatalf("stream stats %+v break the invariant (len %d)", st, s.Len())
			}
		}
		if ap.Stats().Lost != lostSeen {
			t.Fatalf("applier counted %d lost, model %d", ap.Stats().Lost, lostSeen)
		}
		// A final loss-free packet brings everything kept; then every move is
		// applied or was lost, and lost ones were dropped by the client.
		w := bitstream.NewWriter(make([]byte, 1200))
		s.Write(w)
		deliver(w.Bytes())
		unapplied := uint64(0)
		for seq := uint64(1); seq < uint64(len(created)); seq++ {
			if !applied[seq] {
				unapplied++
			}
		}
		if ap.LastApplied() != s.Newest() || unapplied != ap.Stats().Lost || unapplied > s.Stats().Dropped {
			t.Fatalf("after flush: last %d newest %d, unapplied %d, lost %d, client dropped %d",
				ap.LastApplied(), s.Newest(), unapplied, ap.Stats().Lost, s.Stats().Dropped)
		}
	})
}
