package notify

import (
	"reflect"
	"testing"
	"unsafe"
)

// TestReadHeaderIntoSetsEveryField: decoding into a Header full of another
// packet's leftovers (every byte 0x01) gives what ReadHeader gives — every
// field but the bitmap, and the bitmap's first nbits bits, the only ones
// anything reads — for headers with holes, without, and older than the
// newest accepted. A field added to Header and not reset fails here.
func TestReadHeaderIntoSetsEveryField(t *testing.T) {
	// B accepts 0, 2, 3, 5 of A's first 7 packets, then answers with
	// headers whose acks have holes; A reads them out of order.
	a, b, _, now := lockstepPair(t, DefaultConfig(), 7, []uint64{0, 2, 3, 5})
	var pkts [][]byte
	for range 3 {
		now += 10 * ms
		_, p := b.send(t, now, TypeData)
		pkts = append(pkts, p)
	}
	holes := 0
	for _, i := range []int{1, 0, 2} { // the first read is the newest; then an older one
		p := pkts[i]
		a.r.Reset(p)
		want, werr := a.c.ReadHeader(&a.r)
		var got Header
		raw := unsafe.Slice((*byte)(unsafe.Pointer(&got)), unsafe.Sizeof(got))
		for j := range raw {
			raw[j] = 0x01
		}
		a.r.Reset(p)
		gerr := a.c.ReadHeaderInto(&a.r, &got)
		if gerr != werr {
			t.Fatalf("packet %d: ReadHeaderInto = %v, ReadHeader %v", i, gerr, werr)
		}
		gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
		for f := range gv.NumField() {
			name := gv.Type().Field(f).Name
			if name == "bitmap" {
				continue
			}
			if g, w := gv.Field(f), wv.Field(f); !reflect.DeepEqual(valueOf(g), valueOf(w)) {
				t.Fatalf("packet %d: field %s = %v, ReadHeader's %v", i, name, valueOf(g), valueOf(w))
			}
		}
		for bit := uint64(0); bit < uint64(want.nbits); bit++ {
			if got.bitmapBit(bit) != want.bitmapBit(bit) {
				t.Fatalf("packet %d: bitmap bit %d = %v, ReadHeader's %v", i, bit, got.bitmapBit(bit), want.bitmapBit(bit))
			}
		}
		if !want.allOK && want.hasAck {
			holes++
		}
		if i == 1 {
			if err := a.c.AcceptHeader(&got, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	if holes == 0 {
		t.Fatal("no header with holes in its ack: the bitmap went untested")
	}
}

// valueOf reads an exported or unexported field's value.
func valueOf(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Bool:
		return v.Bool()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	}
	panic("notify test: Header field of kind " + v.Kind().String())
}
