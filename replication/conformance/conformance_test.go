package conformance

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestVectorsUpToDate regenerates every vector file in memory and compares
// it with docs/vectors byte for byte: the code and the files never drift.
// After a deliberate change, run go generate ./replication/conformance.
func TestVectorsUpToDate(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join("..", "..", "docs", "vectors", f.Name))
		if err != nil {
			t.Errorf("%s: %v (run go generate ./replication/conformance)", f.Name, err)
			continue
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("docs/vectors/%s differs from what the code produces (run go generate ./replication/conformance and review the diff: a changed vector is a wire change)", f.Name)
		}
	}
}
