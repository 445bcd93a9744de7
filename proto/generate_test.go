package proto

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates the Go code into a temporary
// directory and compares it with the committed files: a .proto edited
// without `go generate` fails here, and so would a generator that is not
// reproducible.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	protos, err := filepath.Glob("ghostwire/v1/*.proto")
	if err != nil || len(protos) == 0 {
		t.Fatalf("no .proto files: %v", err)
	}
	out := t.TempDir()
	args := append([]string{"run", "./internal/protoc", "-I", ".", "-out", out}, protos...)
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("generate: %v", err)
	}
	for _, p := range protos {
		gen := p[:len(p)-len(".proto")] + ".pb.go"
		want, err := os.ReadFile(gen)
		if err != nil {
			t.Fatalf("%s is not committed: %v", gen, err)
		}
		got, err := os.ReadFile(filepath.Join(out, gen))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./proto/...", gen)
		}
	}
}
