package tokenkey

import (
	"bytes"
	"testing"
)

// FuzzParse: any bytes (a key file, the environment variable) parse to a key
// or an error, never a panic; a key that parses encodes back to a file that
// parses to the same key.
func FuzzParse(f *testing.F) {
	f.Add(Encode(Key{1, 2, 3}))
	f.Add([]byte("# comment\n" + string(Encode(Key{0xff}))))
	f.Add([]byte("zz"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := Parse(b)
		if err != nil {
			return
		}
		k2, err := Parse(Encode(k))
		if err != nil || k2 != k {
			t.Fatalf("round trip: %x → %x, %v", k, k2, err)
		}
		if !bytes.Contains(bytes.ToLower(b), bytes.TrimSpace(Encode(k))) {
			t.Fatalf("parsed %x from input that does not contain it", k)
		}
	})
}
