package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestImageBuild: the Dockerfile's base images are pinned, the build is
// static and trimmed, the image runs as non-root, and the build context
// leaves out git history and local dev keys (docker itself cannot run here).
func TestImageBuild(t *testing.T) {
	df, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^ARG (\w+)=(\S+)`).FindAllStringSubmatch(string(df), -1) {
		args[m[1]] = m[2]
	}
	froms := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(string(df), -1)
	if len(froms) < 2 {
		t.Fatalf("want a build stage and a final stage, got %d FROM lines", len(froms))
	}
	for _, m := range froms {
		img := regexp.MustCompile(`\$\{(\w+)\}`).ReplaceAllStringFunc(m[1], func(v string) string { return args[v[2:len(v)-1]] })
		if img != "scratch" && !pinned(img) {
			t.Errorf("FROM %s (%s) is not pinned", m[1], img)
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-buildid=", "-buildvcs=false", "GOTOOLCHAIN=local"} {
		if !strings.Contains(string(df), want) {
			t.Errorf("Dockerfile: no %s (static, reproducible build)", want)
		}
	}
	if m := regexp.MustCompile(`(?m)^USER (\d+)`).FindStringSubmatch(string(df)); m == nil || m[1] == "0" {
		t.Error("Dockerfile: the final stage must set a numeric non-root USER")
	}
	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(ignore))
	for _, want := range []string{".git", "**/ghostwire-data", "**/*.key", "*-out"} {
		found := false
		for _, l := range lines {
			found = found || l == want
		}
		if !found {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
}
