package zones

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

// forbiddenDep reports why a dependency may not appear below zones/
// (DESIGN §2: zones/ core logic never imports NATS, actors or sockets), or
// "" when it is allowed.
func forbiddenDep(path string) string {
	switch {
	case path == "net/netip":
		return ""
	case path == "net" || strings.HasPrefix(path, "net/"):
		return "sockets belong in actors/, not in the zone core"
	case strings.HasPrefix(path, "github.com/asynkron/protoactor-go"):
		return "actors/zone wraps the zone core, never the reverse"
	case strings.HasPrefix(path, "github.com/nats-io/"):
		return "NATS is only spoken by the cluster bridge"
	case strings.HasPrefix(path, "github.com/ghostwire/ghostwire/actors"):
		return "the zone core must not depend on actors"
	case strings.HasPrefix(path, "github.com/ghostwire/ghostwire/proto"):
		return "protobuf forms convert to and from the zone core in proto/, not here"
	}
	return ""
}

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

func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "github.com/ghostwire/ghostwire/zones/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listedPkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found %d packages under zones/; the check would be vacuous", len(pkgs))
	}
	for _, p := range pkgs {
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
			found = append(found, fmt.Sprintf("%s: goroutine started in the zone core", fset.Position(n.Pos())))
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && timeName != "" && id.Name == timeName && clockCalls[n.Sel.Name] {
				found = append(found, fmt.Sprintf("%s: time.%s reads the clock; pass now in instead", fset.Position(n.Pos()), n.Sel.Name))
			}
		}
		return true
	})
	return found
}

func TestLayeringCatchesViolations(t *testing.T) {
	for _, dep := range []string{"net", "github.com/asynkron/protoactor-go/actor", "github.com/nats-io/nats.go", "github.com/ghostwire/ghostwire/actors/msg", "github.com/ghostwire/ghostwire/proto/ghostwire/v1"} {
		if forbiddenDep(dep) == "" {
			t.Errorf("forbiddenDep(%q) allowed a forbidden dependency", dep)
		}
	}
	for _, dep := range []string{"time", "github.com/ghostwire/ghostwire/replication/ghost"} {
		if forbiddenDep(dep) != "" {
			t.Errorf("forbiddenDep(%q) refused an allowed dependency", dep)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.go")
	if err := os.WriteFile(bad, []byte("package bad\nimport clock \"time\"\nfunc f() { go f(); _ = clock.Now() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := impurities(t, bad); len(got) != 2 {
		t.Fatalf("found %d impurities in a file with 2: %v", len(got), got)
	}
}
