package bitstream

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// BS-11 costs.
func TestStringCosts(t *testing.T) {
	big := NewStringTable(1024)
	if err := big.Set(34, "Hey"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		write func(w *Writer) error
		bits  int
	}{
		{"Hey in a 0..64 length field: 7+24 bits (the slide's 30 needs 6 bits for 65 lengths)", func(w *Writer) error { return w.WriteString("Hey", 64) }, 31},
		{"Hey in a 0..63 length field", func(w *Writer) error { return w.WriteString("Hey", 63) }, 30},
		{"Fuzzy in a 128-char field: 1+5 bytes", func(w *Writer) error { return w.WriteString("Fuzzy", 128) }, 48},
		{"empty string", func(w *Writer) error { return w.WriteString("", 255) }, 8},
		{"maxLen 0 costs nothing", func(w *Writer) error { return w.WriteString("", 0) }, 0},
		{"table hit in 1024 slots: flag + 10 bits", func(w *Writer) error { return w.WriteTableString(big, "Hey", 64) }, 11},
		{"table miss: flag + literal", func(w *Writer) error { return w.WriteTableString(big, "Fuzzy", 128) }, 1 + 48},
		{"nil table: flag + literal", func(w *Writer) error { return w.WriteTableString(nil, "Hey", 64) }, 1 + 31},
		{"one-slot table hit is the flag alone", func(w *Writer) error {
			one := NewStringTable(1)
			_ = one.Set(0, "x")
			return w.WriteTableString(one, "x", 8)
		}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter(make([]byte, 64))
			if err := tc.write(w); err != nil {
				t.Fatal(err)
			}
			if w.BitLen() != tc.bits {
				t.Fatalf("%d bits, want %d", w.BitLen(), tc.bits)
			}
		})
	}
	if StringBits("Fuzzy", 128) != 48 || TableStringBits(big, "Hey", 64) != 11 || TableStringBits(big, "Fuzzy", 128) != 49 {
		t.Fatal("size helpers disagree with the writers")
	}
}

func TestStringRoundTrip(t *testing.T) {
	long := strings.Repeat("abcdefghij", 30) // 300 bytes: beyond ReadString's stack buffer
	tests := []struct {
		name   string
		s      string
		maxLen int
	}{
		{"empty", "", 10},
		{"empty in maxLen 0", "", 0},
		{"short", "Hey", 64},
		{"exactly maxLen", "Fuzzy", 5},
		{"binary bytes", "\x00\xff\x80\n", 16},
		{"utf-8", "ünïcödé", 64},
		{"long", long, 1000},
	}
	for _, tc := range tests {
		for lead := range 9 { // every alignment, so both the aligned copy and the shifting path run
			w := NewWriter(make([]byte, 512))
			for range lead {
				_ = w.WriteFlag(true)
			}
			if err := w.WriteString(tc.s, tc.maxLen); err != nil {
				t.Fatalf("%s lead %d: %v", tc.name, lead, err)
			}
			end := w.BitLen()
			r := NewReader(w.Bytes())
			for range lead {
				_, _ = r.ReadFlag("lead")
			}
			got, err := r.ReadString(tc.maxLen, "s")
			if err != nil || got != tc.s || r.Pos() != end {
				t.Fatalf("%s lead %d: %q, %v, pos %d want %d", tc.name, lead, got, err, r.Pos(), end)
			}
			r.Reset(w.Bytes())
			for range lead {
				_, _ = r.ReadFlag("lead")
			}
			dst := make([]byte, 3, 8)
			b, err := r.ReadStringBytes(dst, tc.maxLen, "s")
			if err != nil || string(b) != tc.s {
				t.Fatalf("%s lead %d: bytes %q, %v", tc.name, lead, b, err)
			}
			if len(tc.s) <= cap(dst) && &b[:1][0] != &dst[:1][0] {
				t.Fatalf("%s: ReadStringBytes did not reuse dst", tc.name)
			}
		}
	}
}

func TestStringRefusals(t *testing.T) {
	w := NewWriter(make([]byte, 16))
	if err := w.WriteString("toolong", 6); !errors.Is(err, ErrTooLong) || w.BitLen() != 0 {
		t.Fatalf("too long: %v", err)
	}
	if err := w.WriteString("", -1); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("negative maxLen: %v", err)
	}
	if err := w.WriteString(strings.Repeat("x", 16), 100); !errors.Is(err, ErrOverflow) || w.BitLen() != 0 {
		t.Fatalf("overflow: %v, BitLen %d", err, w.BitLen())
	}

	// A hostile length above maxLen, and one beyond the packet: rejected
	// before anything is allocated, consuming nothing.
	tests := []struct {
		name   string
		length uint64
		maxLen int
		want   error
	}{
		{"length above maxLen", 120, 100, ErrTooLong},
		{"length beyond the packet", 90, 100, errEOF},
		{"huge maxLen, huge length", 1 << 40, 1 << 50, errEOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter(make([]byte, 32))
			_ = w.WriteBits(tc.length, RangeBits(0, int64(tc.maxLen)))
			_ = w.WriteBytes([]byte("abcdefgh"))
			r := NewReader(w.Bytes())
			dst := make([]byte, 0, 4)
			b, err := r.ReadStringBytes(dst, tc.maxLen, "name")
			var re *ReadError
			if !errors.As(err, &re) || !errors.Is(err, tc.want) || re.Field != "name" || re.Bit != 0 || r.Pos() != 0 {
				t.Fatalf("%v (pos %d), want %v at bit 0", err, r.Pos(), tc.want)
			}
			if len(b) != 0 || cap(b) != 4 {
				t.Fatalf("returned len %d cap %d, want dst[:0]", len(b), cap(b))
			}
			if _, err := r.ReadString(tc.maxLen, "name"); !errors.Is(err, tc.want) {
				t.Fatalf("ReadString: %v", err)
			}
			if _, err := r.ReadString(tc.maxLen, "name"); !errors.Is(err, tc.want) || r.Pos() != 0 {
				t.Fatalf("ReadString again: %v", err)
			}
		})
	}
	if _, err := NewReader(nil).ReadString(-1, "neg"); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("negative maxLen read: %v", err)
	}
}

func TestStringTable(t *testing.T) {
	tab := NewStringTable(8)
	if tab.Slots() != 8 || tab.IndexBits() != 3 {
		t.Fatalf("Slots %d IndexBits %d", tab.Slots(), tab.IndexBits())
	}
	mustSet := func(slot int, s string) {
		t.Helper()
		if err := tab.Set(slot, s); err != nil {
			t.Fatalf("Set(%d, %q): %v", slot, s, err)
		}
	}
	mustSet(3, "fireball")
	mustSet(3, "fireball") // idempotent
	mustSet(0, "")
	if slot, ok := tab.Lookup("fireball"); !ok || slot != 3 {
		t.Fatalf("Lookup: %d, %v", slot, ok)
	}
	if err := tab.Set(5, "fireball"); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := tab.Set(8, "x"); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("slot 8 of 8: %v", err)
	}
	if err := tab.Set(-1, "x"); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("slot -1: %v", err)
	}
	mustSet(3, "icebolt") // replaces, and forgets the old string
	if _, ok := tab.Lookup("fireball"); ok {
		t.Fatal("replaced string still found")
	}
	if s, ok := tab.Get(3); !ok || s != "icebolt" {
		t.Fatalf("Get(3) = %q, %v", s, ok)
	}
	tab.Delete(3)
	tab.Delete(3)
	tab.Delete(99)
	if _, ok := tab.Get(3); ok {
		t.Fatal("deleted slot still set")
	}
	if _, ok := tab.Lookup("icebolt"); ok {
		t.Fatal("deleted string still found")
	}
	mustSet(5, "icebolt")
	if s, ok := tab.Get(0); !ok || s != "" {
		t.Fatalf("the empty string is a legitimate entry: %q, %v", s, ok)
	}
	if _, ok := tab.Get(-1); ok {
		t.Fatal("Get(-1) found something")
	}
	var zero StringTable
	if _, ok := zero.Lookup("x"); ok || zero.Slots() != 0 {
		t.Fatal("zero table is not empty")
	}
	for _, bad := range []int{0, -1, 3, 12, 8192} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewStringTable(%d) did not panic", bad)
				}
			}()
			NewStringTable(bad)
		}()
	}
}

func TestTableStringRoundTrip(t *testing.T) {
	tab := newTestTable()
	tests := []struct {
		name   string
		tab    *StringTable
		s      string
		maxLen int
		hit    bool
	}{
		{"hit", tab, "fireball", 32, true},
		{"hit on the empty string", tab, "", 32, true},
		{"miss", tab, "frostbolt", 32, false},
		{"nil table", nil, "fireball", 32, false},
		{"zero table", &StringTable{}, "fireball", 32, false},
		{"miss with a long literal", tab, strings.Repeat("z", 200), 300, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for lead := range 3 {
				w := NewWriter(make([]byte, 512))
				for range lead {
					_ = w.WriteFlag(false)
				}
				if err := w.WriteTableString(tc.tab, tc.s, tc.maxLen); err != nil {
					t.Fatal(err)
				}
				if got := w.BitLen() - lead; got != TableStringBits(tc.tab, tc.s, tc.maxLen) {
					t.Fatalf("%d bits, TableStringBits says %d", got, TableStringBits(tc.tab, tc.s, tc.maxLen))
				}
				r := NewReader(w.Bytes())
				for range lead {
					_, _ = r.ReadFlag("lead")
				}
				got, err := r.ReadTableString(tc.tab, tc.maxLen, "spell")
				if err != nil || got != tc.s {
					t.Fatalf("ReadTableString: %q, %v", got, err)
				}
				r.Reset(w.Bytes())
				for range lead {
					_, _ = r.ReadFlag("lead")
				}
				b, err := r.ReadTableStringBytes(tc.tab, make([]byte, 0, 4), tc.maxLen, "spell")
				if err != nil || string(b) != tc.s {
					t.Fatalf("ReadTableStringBytes: %q, %v", b, err)
				}
			}
		})
	}
	t.Run("hit on a slot the reader lacks", func(t *testing.T) {
		w := NewWriter(make([]byte, 8))
		_ = w.WriteTableString(tab, "fireball", 32)
		other := NewStringTable(16)
		for _, rt := range []*StringTable{other, nil} {
			r := NewReader(w.Bytes())
			if _, err := r.ReadTableString(rt, 32, "spell"); !errors.Is(err, ErrOutOfRange) || r.Pos() != 0 {
				t.Fatalf("table %v: %v, pos %d", rt, err, r.Pos())
			}
		}
	})
	t.Run("table string longer than maxLen", func(t *testing.T) {
		w := NewWriter(make([]byte, 8))
		if err := w.WriteTableString(tab, "player_spawn", 4); !errors.Is(err, ErrTooLong) || w.BitLen() != 0 {
			t.Fatalf("write: %v", err)
		}
		_ = w.WriteTableString(tab, "player_spawn", 32)
		r := NewReader(w.Bytes())
		if _, err := r.ReadTableString(tab, 4, "spell"); !errors.Is(err, ErrTooLong) || r.Pos() != 0 {
			t.Fatalf("read: %v", err)
		}
	})
	t.Run("truncated slot index", func(t *testing.T) {
		w := NewWriter(make([]byte, 8))
		_ = w.WriteTableString(tab, "player_spawn", 32)
		var r Reader
		r.ResetBits(w.Bytes(), 3)
		b, err := r.ReadTableStringBytes(tab, nil, 32, "spell")
		if !errors.Is(err, errEOF) || r.Pos() != 0 || len(b) != 0 {
			t.Fatalf("%q, %v, pos %d", b, err, r.Pos())
		}
	})
	t.Run("bytes form reuses dst", func(t *testing.T) {
		w := NewWriter(make([]byte, 64))
		_ = w.WriteTableString(tab, "fireball", 32)
		dst := make([]byte, 0, 16)
		b, err := NewReader(w.Bytes()).ReadTableStringBytes(tab, dst, 32, "spell")
		if err != nil || !bytes.Equal(b, []byte("fireball")) || &b[0] != &dst[:1][0] {
			t.Fatalf("%q, %v", b, err)
		}
	})
}

// ReadTableString reads a hit's flag and slot in one read and hands every
// other case to readTableRef: each case returns what ReadTableStringBytes
// (readTableRef's way throughout) returns, and stops at the same bit.
func TestReadTableStringHitPath(t *testing.T) {
	tab := NewStringTable(16)
	_ = tab.Set(3, "elf_archer")
	_ = tab.Set(0, "wolf")
	hit := func(slot uint64) func(w *Writer) {
		return func(w *Writer) { _ = w.WriteBits(1|slot<<1, 1+tab.IndexBits()) }
	}
	for _, tc := range []struct {
		name   string
		write  func(w *Writer)
		t      *StringTable
		maxLen int
		size   int
	}{
		{name: "a hit", write: hit(3), t: tab, maxLen: 32, size: 16},
		{name: "a hit on slot 0", write: hit(0), t: tab, maxLen: 32, size: 16},
		{name: "a hit in the buffer's last bytes", write: hit(3), t: tab, maxLen: 32, size: 1},
		{name: "an empty slot", write: hit(5), t: tab, maxLen: 32, size: 16},
		{name: "a table string over maxLen", write: hit(3), t: tab, maxLen: 4, size: 16},
		{name: "a negative maxLen", write: hit(3), t: tab, maxLen: -1, size: 16},
		{name: "a literal", write: func(w *Writer) { _ = w.WriteTableString(tab, "gg wp", 32) }, t: tab, maxLen: 32, size: 16},
		{name: "a hit read without a table", write: hit(3), t: nil, maxLen: 32, size: 16},
		{name: "the stream ends inside the slot", write: func(w *Writer) { _ = w.WriteBits(1, 1) }, t: tab, maxLen: 32, size: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, tc.size)
			w := NewWriter(buf)
			tc.write(w)
			var ref, got Reader
			ref.ResetBits(buf, w.BitLen())
			got.ResetBits(buf, w.BitLen())
			want, werr := ref.ReadTableStringBytes(tc.t, nil, tc.maxLen, "s")
			s, err := got.ReadTableString(tc.t, tc.maxLen, "s")
			if s != string(want) || fmt.Sprint(err) != fmt.Sprint(werr) || got.Pos() != ref.Pos() {
				t.Fatalf("ReadTableString %q, %v at bit %d; readTableRef's way %q, %v at bit %d", s, err, got.Pos(), want, werr, ref.Pos())
			}
		})
	}
}

// The table's index agrees with a map of its strings through any mix of
// Set (new strings, moves refused as duplicates, replacements) and Delete,
// at every table size, for held strings, deleted ones and strings that
// share a held one's length and first, middle and last bytes (one hash),
// each looked up as itself and as a copy in other memory.
func TestStringTableIndexMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	names := []string{"", "a", "b", "ab", "aab", "abb", "wave", "wove", "orc_warrior", "orc_wxrrior", "elf_archer", "elf_archxr", "fireball", "firebell", "a longer name than sixteen bytes", "a longer nbme than sixteen bytes"}
	for k := range 40 {
		names = append(names, fmt.Sprintf("name%03d", k))
	}
	for _, slots := range []int{1, 2, 4, 16, 64} {
		tab := NewStringTable(slots)
		ref := map[string]int{}
		for range 3000 {
			slot, s := rng.IntN(slots), names[rng.IntN(len(names))]
			if rng.IntN(3) == 0 {
				tab.Delete(slot)
				for k, v := range ref {
					if v == slot {
						delete(ref, k)
					}
				}
			} else {
				err := tab.Set(slot, s)
				if j, ok := ref[s]; ok && j != slot {
					if err != ErrDuplicate {
						t.Fatalf("%d slots: Set(%d, %q) = %v, held by %d", slots, slot, s, err, j)
					}
				} else {
					if err != nil {
						t.Fatalf("%d slots: Set(%d, %q) = %v", slots, slot, s, err)
					}
					for k, v := range ref {
						if v == slot {
							delete(ref, k)
						}
					}
					ref[s] = slot
				}
			}
			for _, s := range names {
				want, wok := ref[s]
				// The string itself (the table's own bytes when it holds
				// it) and a copy of it (other bytes: compared by content).
				for _, q := range []string{s, strings.Clone(s)} {
					if got, ok := tab.Lookup(q); ok != wok || ok && got != want {
						t.Fatalf("%d slots: Lookup(%q) = %d %v, want %d %v", slots, q, got, ok, want, wok)
					}
					// The writers test find's common case themselves (the
					// first probe's slot holding these very bytes): the
					// same flag and slot, or a literal.
					wantBits := uint64(0) // a literal's flag
					if wok {
						wantBits = 1 | uint64(want)<<1
					}
					n := 1 + tab.IndexBits()
					var buf [128]byte
					w := NewWriter(buf[:])
					_ = w.WriteTableString(tab, q, 40)
					rw := w.Begin()
					rw.WriteTableString(tab, q, 40)
					if err := rw.End(); err != nil {
						t.Fatal(err)
					}
					r := NewReader(w.Bytes())
					if !wok {
						n = 1
					}
					got1, _ := r.ReadBits(n, "w")
					if wok {
						r.bit = int(n)
					} else {
						r.bit = 1 + int(RangeBits(0, 40)) + 8*len(q)
					}
					got2, _ := r.ReadBits(n, "rw")
					if got1 != wantBits || got2 != wantBits {
						t.Fatalf("%d slots: %q written as %b (Writer) and %b (record), want %b", slots, q, got1, got2, wantBits)
					}
				}
			}
		}
	}
}
