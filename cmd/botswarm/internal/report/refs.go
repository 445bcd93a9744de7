package report

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"golang.org/x/net/html"
)

// NetworkRefs returns everything in an HTML page that would make a browser
// fetch something: src/href-like attributes, url() and @import in CSS,
// external scripts, stylesheets, frames, images. The HTML report's tests
// use it to prove the page opens offline; an empty result is the goal.
func NetworkRefs(page []byte) ([]string, error) {
	var refs []string
	z := html.NewTokenizer(bytes.NewReader(page))
	inStyle := false
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			if z.Err() != io.EOF {
				return refs, fmt.Errorf("html: %w", z.Err())
			}
			return refs, nil
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			switch tok.Data {
			case "script", "link", "iframe", "object", "embed", "img", "image", "use", "audio", "video", "source", "base":
				refs = append(refs, "<"+tok.Data+">")
			}
			inStyle = tok.Data == "style"
			for _, a := range tok.Attr {
				k := strings.ToLower(a.Key)
				if a.Namespace != "" {
					k = a.Namespace + ":" + k
				}
				switch k {
				case "src", "href", "xlink:href", "srcset", "poster", "data", "action", "formaction", "background", "manifest":
					refs = append(refs, k+"="+a.Val)
				case "style":
					if strings.Contains(strings.ToLower(a.Val), "url(") {
						refs = append(refs, "style url(): "+a.Val)
					}
				}
				if strings.HasPrefix(k, "xmlns") {
					continue // namespace names are identifiers, never fetched
				}
				if v := strings.ToLower(a.Val); strings.Contains(v, "http://") || strings.Contains(v, "https://") || strings.Contains(v, "//cdn") {
					refs = append(refs, k+"="+a.Val)
				}
			}
		case html.EndTagToken:
			inStyle = false
		case html.TextToken:
			if inStyle {
				css := strings.ToLower(string(z.Text()))
				if strings.Contains(css, "url(") || strings.Contains(css, "@import") {
					refs = append(refs, "css: "+css)
				}
			}
		}
	}
}
