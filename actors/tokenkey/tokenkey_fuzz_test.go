package tokenkey

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// FuzzParse: any bytes (a key file, the environment variable) parse to
// 1..MaxKeys distinct keys or an error, never a panic; the keys that parse
// encode back to a file that parses to the same keys in the same order,
// and each was in the input.
func FuzzParse(f *testing.F) {
	f.Add(Encode(Key{1, 2, 3}))
	f.Add([]byte("# comment\n" + string(Encode(Key{0xff}))))
	f.Add([]byte("zz"))
	f.Add(append(Encode(Key{1}), Encode(Key{2})...))
	f.Add([]byte(strings.TrimSpace(string(Encode(Key{1}))) + "," + string(Encode(Key{1}))))
	f.Fuzz(func(t *testing.T, b []byte) {
		ks, err := ParseKeys(b)
		if err != nil {
			return
		}
		if len(ks) == 0 || len(ks) > MaxKeys {
			t.Fatalf("%d keys", len(ks))
		}
		var file []byte
		for _, k := range ks {
			if !bytes.Contains(bytes.ToLower(b), bytes.TrimSpace(Encode(k))) {
				t.Fatalf("parsed %x from input that does not contain it", k)
			}
			file = append(file, Encode(k)...)
		}
		ks2, err := ParseKeys(file)
		if err != nil || !slices.Equal(ks2, ks) {
			t.Fatalf("round trip: %x → %x, %v", ks, ks2, err)
		}
		if k, err := Parse(b); err != nil || k != ks[0] {
			t.Fatalf("Parse = %x, %v; want the first key", k, err)
		}
	})
}
