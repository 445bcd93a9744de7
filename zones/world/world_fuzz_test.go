package world

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: a world map is configuration, but zoned reads it from a path a
// user gives, so arbitrary bytes must give a world or an error, never a
// panic; and a world that parses re-encodes to one that parses the same.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"two-by-two.json", "strip.json", "bad-overlap.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := Parse(data)
		if err != nil {
			return
		}
		again, err := w.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		w2, err := Parse(again)
		if err != nil {
			t.Fatalf("re-parse of a valid world: %v", err)
		}
		if w2.Len() != w.Len() || w2.Bounds() != w.Bounds() {
			t.Fatal("round trip changed the world")
		}
	})
}
