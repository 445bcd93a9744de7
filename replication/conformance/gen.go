//go:build ignore

// gen writes the conformance vectors to docs/vectors (run by go generate in
// replication/conformance).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ghostwire/ghostwire/replication/conformance"
)

func main() {
	files, err := conformance.Files()
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
	dir := filepath.Join("..", "..", "docs", "vectors")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "conformance:", err)
			os.Exit(1)
		}
	}
}
