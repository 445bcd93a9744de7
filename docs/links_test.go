package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// mdLink matches an inline Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// slug is GitHub's anchor for a heading: lower case, every character that
// is not a letter, digit, space, hyphen or underscore dropped, spaces made
// hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are a document's heading anchors, a repeated heading numbered
// -1, -2, … as GitHub numbers it; headings inside code fences are not.
func anchors(text string) map[string]bool {
	out, seen, fenced := map[string]bool{}, map[string]int{}, false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced {
			continue
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if level == 0 || level > 6 || !strings.HasPrefix(line[level:], " ") {
			continue
		}
		s := slug(line[level:])
		n := seen[s]
		seen[s]++
		if n > 0 {
			s += "-" + itoa(n)
		}
		out[s] = true
	}
	return out
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// brokenLinks lists the relative links of the Markdown file at path whose
// file or heading does not exist; read gives a file's text (nil: missing).
func brokenLinks(path, text string, read func(string) []byte) []string {
	var bad []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest, destText := path, text
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), file)
				b := read(dest)
				if b == nil {
					bad = append(bad, target+": no such file")
					continue
				}
				destText = string(b)
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if !anchors(destText)[anchor] {
				bad = append(bad, target+": no such heading")
			}
		}
	}
	return bad
}

func readFile(p string) []byte {
	if fi, err := os.Stat(p); err != nil {
		return nil
	} else if fi.IsDir() {
		return []byte{}
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	return b
}

// TestLinksResolve walks every Markdown file of the repository and fails on
// each relative link whose file or heading is missing.
func TestLinksResolve(t *testing.T) {
	root := ".."
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found %d Markdown files under %s; expected the repository's docs", len(files), root)
	}
	for _, f := range files {
		for _, b := range brokenLinks(f, string(readFile(f)), readFile) {
			t.Errorf("%s: %s", f, b)
		}
	}
}

// TestBrokenLinksFound checks the checker: a missing file, a missing
// heading and a repeated heading's numbered anchor.
func TestBrokenLinksFound(t *testing.T) {
	docs := map[string]string{
		"a.md": "# Top\n## Same\n## Same\n```\n# not a heading\n```\n" +
			"[ok](#top) [ok](#same-1) [bad](#same-2) [bad](#not-a-heading) [ok](b.md#the-curve-250--2000) [bad](b.md#nope) [bad](c.md) [ok](https://x/y#z)\n",
		"b.md": "## The curve: 250 → 2,000\n",
	}
	read := func(p string) []byte {
		if s, ok := docs[filepath.Base(p)]; ok {
			return []byte(s)
		}
		return nil
	}
	got := brokenLinks("a.md", docs["a.md"], read)
	want := []string{"#same-2: no such heading", "#not-a-heading: no such heading", "b.md#nope: no such heading", "c.md: no such file"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("brokenLinks = %q, want %q", got, want)
	}
}
