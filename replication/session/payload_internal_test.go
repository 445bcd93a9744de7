package session

import (
	"errors"
	"io"
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/move"
)

// TestResetPayloadStopsAtPayload: the reader reads past the payload's end
// in its buffer for speed, but never returns a bit of it: a payload cut
// short fails exactly as it does with a reader over the payload alone,
// whatever the bytes after it are (the scratch's stale bytes of another
// connection's packet).
func TestResetPayloadStopsAtPayload(t *testing.T) {
	// A move section of three moves, then cut at every length.
	var ring [move.MaxWindow]move.Move
	st, err := move.NewStream(move.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m := move.Move{Seq: st.NextSeq(), Dt: 32, Forward: 90, Yaw: uint16(1000 * i)}
		if err := st.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	var wbuf [64]byte
	w := bitstream.NewWriter(wbuf[:])
	if n, err := st.Write(w); n != 3 || err != nil {
		t.Fatal(n, err)
	}
	full := w.Bytes()
	for cut := 0; cut <= len(full); cut++ {
		var buf [MaxPacketSize]byte
		for i := range buf {
			buf[i] = 0xff // the slack: garbage that would decode
		}
		pt := append(buf[:0], full[:cut]...)
		var slack, plain bitstream.Reader
		resetPayload(&slack, pt)
		plain.Reset(full[:cut:cut])
		if slack.Remaining() != plain.Remaining() {
			t.Fatalf("cut %d: %d bits readable, want %d", cut, slack.Remaining(), plain.Remaining())
		}
		var a1, a2 move.Applier
		n1, err1 := readAll(&a1, &slack, &ring)
		n2, err2 := readAll(&a2, &plain, &ring)
		if n1 != n2 || (err1 == nil) != (err2 == nil) || err2 != nil && !errors.Is(err1, io.ErrUnexpectedEOF) {
			t.Fatalf("cut %d: %d moves, err %v; over the payload alone: %d moves, err %v", cut, n1, err1, n2, err2)
		}
		if cut < len(full) && err1 == nil {
			t.Fatalf("cut %d of %d bytes: the section decoded", cut, len(full))
		}
		if _, err := slack.ReadBits(uint(min(slack.Remaining()+1, 56)), "past the end"); err == nil {
			t.Fatalf("cut %d: read past the payload's end", cut)
		}
	}
}

func readAll(a *move.Applier, r *bitstream.Reader, ring *[move.MaxWindow]move.Move) (int, error) {
	n := 0
	err := a.ReadInto(r, ring, func(move.Move) { n++ })
	return n, err
}
