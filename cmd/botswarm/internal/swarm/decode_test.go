package swarm

import (
	"math"
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/ghost"
)

// TestMirrorSectionsDecode: the sections BenchmarkMirrorSection reads are
// a real stream — a mirror that reads them all holds the view's 64 players
// at their last positions (to the quantum) with their last move stamps,
// and every section from the 10th (where the benchmark's ops begin) carries
// an update of each.
func TestMirrorSectionsDecode(t *testing.T) {
	const n = 40
	reg, secs, times, view := recordSections(t, 64, n, true)
	m, err := ghost.NewMirror(reg, ghost.DefaultMirrorConfig())
	if err != nil {
		t.Fatal(err)
	}
	var r bitstream.Reader
	for i, p := range secs {
		u := m.Stats().Updates
		r.Reset(p)
		if err := m.Read(&r, times[i]); err != nil {
			t.Fatalf("section %d: %v", i, err)
		}
		if got := m.Stats().Updates - u; i >= 10 && got != 64 {
			t.Fatalf("section %d updated %d ghosts, want 64", i, got)
		}
	}
	if c := m.Stats().Creates; c != 64 {
		t.Fatalf("%d creates, want 64", c)
	}
	if m.Len() != len(view) {
		t.Fatalf("mirror holds %d ghosts, want %d", m.Len(), len(view))
	}
	tol := reg.PosMaxError() * 1.01
	for _, e := range view {
		g, ok := m.ByEntity(e.Entity)
		if !ok {
			t.Fatalf("entity %d missing", e.Entity)
		}
		for k := range 3 {
			if d := math.Abs(g.State.Pos[k] - e.State.Pos[k]); d > tol {
				t.Fatalf("entity %d axis %d at %v, want %v", e.Entity, k, g.State.Pos[k], e.State.Pos[k])
			}
		}
		if g.State.Extra != e.State.Extra {
			t.Fatalf("entity %d move stamp %v, want %v", e.Entity, g.State.Extra, e.State.Extra)
		}
	}
}
