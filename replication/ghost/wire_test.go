package ghost

import (
	"fmt"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// The worked example of docs/protocol.md §6, bit for bit.
func TestWireExample(t *testing.T) {
	reg, _, nc := newTestRegistry(t)
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	mir, err := NewMirror(reg, DefaultMirrorConfig())
	if err != nil {
		t.Fatal(err)
	}
	e := ViewEntry{Entity: 42, Class: nc, Priority: 1}
	e.State.Pos = [3]float64{1, 0, 2}
	e.State.Health = 100
	e.State.Name = MustName("wolf")
	var buf [64]byte
	var w bitstream.Writer
	var r bitstream.Reader
	now := 1000 * time.Millisecond
	for i, want := range []struct {
		x    float64
		bits int
		hex  string
	}{
		{1.00, 132, "42 1f 00 33 57 a4 0d 03 20 43 70 18 00 19 80 00 00"},
		{1.25, 38, "d2 20 00 6c 0f"},
		{1.50, 32, "62 22 00 02"},
		{1.75, 32, "f2 23 00 02"},
	} {
		e.State.Pos[0] = want.x
		if err := tab.SetView(now, []ViewEntry{e}); err != nil {
			t.Fatal(err)
		}
		w.Reset(buf[:])
		if _, err := tab.Write(&w, uint64(i+1), now); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("% x", w.Bytes()); w.BitLen() != want.bits || got != want.hex {
			t.Fatalf("x = %.2f: %d bits %s, want %d bits %s", want.x, w.BitLen(), got, want.bits, want.hex)
		}
		r.Reset(w.Bytes())
		if err := mir.Read(&r, now); err != nil {
			t.Fatal(err)
		}
		if g, _ := mir.ByEntity(42); g.State.Pos != reg.QuantizePos(e.State.Pos) {
			t.Fatalf("client position %v", g.State.Pos)
		}
		tab.OnFate(notify.Fate{Seq: uint64(i + 1), Delivered: true, SentAt: now})
		now += 50 * time.Millisecond
	}
}
