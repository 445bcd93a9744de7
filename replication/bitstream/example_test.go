package bitstream_test

import (
	"errors"
	"fmt"
	"io"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

func Example() {
	spells := bitstream.NewStringTable(1024)
	_ = spells.Set(34, "fireball")

	var buf [1200]byte
	var w bitstream.Writer
	w.Reset(buf[:])
	_ = w.WriteFlag(true)
	_ = w.WriteRangedInt(17, 0, 32)
	_ = w.WriteUnitFloat(0.45, 5)
	_ = w.WriteFixed(-1999.9, -2000, 2000, 0.1)
	_ = w.WriteQuat([4]float64{0, 0, 0.6, 0.8})
	_ = w.WriteTableString(spells, "fireball", 32)
	if err := w.Err(); err != nil {
		panic(err)
	}
	fmt.Printf("%d bits, %d bytes\n", w.BitLen(), w.Len())

	var r bitstream.Reader
	r.ResetBits(w.Bytes(), w.BitLen())
	more, _ := r.ReadFlag("hdr.more")
	n, _ := r.ReadRangedInt(0, 32, "hdr.count")
	health, _ := r.ReadUnitFloat(5, "health")
	x, _ := r.ReadFixed(-2000, 2000, 0.1, "pos.x")
	rot, _ := r.ReadQuat("rot")
	spell, _ := r.ReadTableString(spells, 32, "spell")
	fmt.Printf("%v %d %.4f %.1f [%.3f %.3f %.3f %.3f] %s\n", more, n, health, x, rot[0], rot[1], rot[2], rot[3], spell)

	_, err := r.ReadBits(3, "trailer")
	var re *bitstream.ReadError
	fmt.Println(errors.As(err, &re), re.Field, re.Bit, errors.Is(err, io.ErrUnexpectedEOF))
	// Output:
	// 86 bits, 11 bytes
	// true 17 0.4516 -1999.9 [0.000 0.000 0.600 0.800] fireball
	// true trailer 86 true
}

// A ghost update as one record: the same bits as its per-field calls, one
// error check.
func ExampleWriter_Begin() {
	pos, _ := bitstream.NewFixedFormat(-2000, 2000, 0.01)

	var buf [1200]byte
	var w bitstream.Writer
	w.Reset(buf[:])
	rec := w.Begin()
	rec.WriteFlag(true)
	rec.WriteRangedInt(517, 0, 1023)
	rec.WriteFixed3(&pos, -120.5, 33.25, 1999.99)
	rec.WriteQuat([4]float64{0, 0, 0.6, 0.8})
	if err := rec.End(); err != nil {
		panic(err)
	}
	fmt.Printf("%d bits\n", w.BitLen())

	var r bitstream.Reader
	r.ResetBits(w.Bytes(), w.BitLen())
	rr := r.Begin("ghost")
	more := rr.ReadFlag()
	id := rr.ReadRangedInt(0, 1023)
	x, y, z := rr.ReadFixed3(&pos)
	rot := rr.ReadQuat()
	fmt.Printf("%v %d %.2f %.2f %.2f [%.3f %.3f %.3f %.3f] %v\n", more, id, x, y, z, rot[0], rot[1], rot[2], rot[3], rr.End())

	rr = r.Begin("trailer")
	_ = rr.ReadBits(3)
	err := rr.End()
	var re *bitstream.ReadError
	fmt.Println(errors.As(err, &re), re.Field, re.Bit, errors.Is(err, io.ErrUnexpectedEOF))
	// Output:
	// 115 bits
	// true 517 -120.50 33.25 1999.99 [0.000 0.000 0.600 0.800] <nil>
	// true trailer 115 true
}
