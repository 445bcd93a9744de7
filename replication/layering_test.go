package replication

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// forbiddenDep reports why a dependency may not appear below replication/
// (DESIGN.md rule of thumb), or "" when it is allowed.
func forbiddenDep(path string) string {
	switch {
	case path == "net/netip":
		return "" // pure value types (addresses in connect tokens), no sockets
	case path == "net" || strings.HasPrefix(path, "net/"):
		return "sockets belong in actors/, not in the pure protocol core"
	case strings.HasPrefix(path, "github.com/asynkron/protoactor-go"):
		return "actors wrap the pure core, never the reverse"
	case strings.HasPrefix(path, "github.com/nats-io/"):
		return "NATS is only spoken by the cluster bridge"
	}
	return ""
}

// clockCalls are the functions that read the wall clock or schedule on it.
var clockCalls = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true,
}

type listedPkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Deps       []string
}

func listReplication(t *testing.T) []listedPkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "github.com/ghostwire/ghostwire/replication/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listedPkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 2 {
		t.Fatalf("go list found %d packages under replication/; the check would be vacuous", len(pkgs))
	}
	return pkgs
}

func TestLayering(t *testing.T) {
	for _, p := range listReplication(t) {
		for _, dep := range p.Deps {
			if why := forbiddenDep(dep); why != "" {
				t.Errorf("%s depends on %s: %s", p.ImportPath, dep, why)
			}
		}
		for _, f := range p.GoFiles {
			for _, v := range impurities(t, filepath.Join(p.Dir, f)) {
				t.Error(v)
			}
		}
	}
}

// impurities lists clock reads and goroutine starts in one source file.
func impurities(t *testing.T, path string) []string {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	timeName := ""
	for _, imp := range file.Imports {
		if imp.Path.Value == `"time"` {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
	}
	var found []string
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			found = append(found, fmt.Sprintf("%s: goroutine started in pure replication code", fset.Position(n.Pos())))
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && timeName != "" && id.Name == timeName && clockCalls[n.Sel.Name] {
				found = append(found, fmt.Sprintf("%s: time.%s reads the clock; pass now in instead", fset.Position(n.Pos()), n.Sel.Name))
			}
		}
		return true
	})
	return found
}

// TestLayeringCatchesViolations proves the checks above are not vacuous.
func TestLayeringCatchesViolations(t *testing.T) {
	for _, dep := range []string{"net", "net/http", "github.com/asynkron/protoactor-go/actor", "github.com/nats-io/nats.go"} {
		if forbiddenDep(dep) == "" {
			t.Errorf("forbiddenDep(%q) allowed a forbidden dependency", dep)
		}
	}
	for _, dep := range []string{"net/netip", "time", "github.com/ghostwire/ghostwire/replication/bitstream"} {
		if forbiddenDep(dep) != "" {
			t.Errorf("forbiddenDep(%q) refused an allowed dependency", dep)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.go")
	src := "package bad\nimport clock \"time\"\nfunc f() { go f(); _ = clock.Now(); _ = clock.Duration(1) }\n"
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := impurities(t, bad); len(got) != 2 {
		t.Fatalf("found %d impurities in a file with 2: %v", len(got), got)
	}
}
