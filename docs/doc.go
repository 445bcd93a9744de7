// Package docs holds ghostwire's documentation (Markdown, the conformance
// vectors, the figures). It has no code of its own: its test checks that
// every relative link between the documents resolves — the file exists and,
// where the link names a heading, the heading does — so moving a section
// cannot silently break the links that point at it.
package docs
