// Package bitstream packs and unpacks values at bit granularity over
// caller-owned buffers. It is the bottom layer of the ghostwire wire format
// (seeds: Torque BitStream, "Robust Efficient Networking"; Multiplayer Game
// Programming ch. 4). The exact layout of every encoding is specified in
// docs/protocol.md (fragment docs/protocol.md §2), precisely
// enough to reimplement it in another language.
//
// # Bit order
//
// There is one canonical order, independent of the host: the stream is a
// sequence of bits numbered from 0; bit i lives in byte i/8 at bit position
// i%8 (least significant bit first). A value written with WriteBits(v, n)
// occupies n consecutive stream bits, least significant bit of v first. So
// WriteBits(13, 5) then WriteBits(52, 6) yields the bytes 0x8D 0x06
// (book figure 4.9). Unused bits of the last byte are zero.
//
// # Encodings
//
//   - WriteBits (1..64 bits), WriteFlag (1 bit), WriteBytes (8 bits each).
//   - WriteRangedInt: v ∈ [min, max] inclusive in RangeBits(min, max) =
//     ⌈log2(max−min+1)⌉ bits (checklist D-7: [0, 32] is 6 bits).
//   - WriteQuantized (bits over [min, max]), WriteFixed (by precision, the
//     book's fixed point), WriteUnitFloat ([0, 1]), WriteSignedFloat ([−1, 1],
//     0 exact), WriteFloat32. All round to nearest; *MaxError functions give
//     the worst-case error so tests can assert "within quantization".
//   - NewFixedFormat and NewQuantizedFormat: those encodings with their
//     parameters validated once, for fields of a fixed shape. A format's
//     Write and Read are the field calls' bits and values without the
//     per-call validation and divisions; Write3 and Read3 carry three
//     components (a position, a velocity) in one call.
//   - WriteUnitVector (octahedral, 2×bits) and WriteQuat (smallest three,
//     47 bits); UnitVectorMaxAngle and QuatMaxAngle bound their error.
//   - WriteString (length in RangeBits(0, maxLen) bits, then bytes),
//     WriteTableString (flag + slot of a StringTable, or flag + literal), and
//     WriteGamma (Elias-gamma for small unbounded counts).
//
// # Walkthrough
//
//	var buf [1200]byte
//	var w bitstream.Writer
//	w.Reset(buf[:])
//	w.WriteFlag(true)                      // 1 bit
//	w.WriteRangedInt(17, 0, 32)            // 6 bits: [0,32] has 33 values
//	w.WriteUnitFloat(0.45, 5)              // 5 bits: nearest of 32 levels, 14/31
//	w.WriteFixed(-1999.9, -2000, 2000, 0.1) // 16 bits: code 1
//	w.WriteQuat(rot)                       // 47 bits
//	w.WriteTableString(spells, "fireball", 32) // 11 bits on a hit in 1024 slots
//	if err := w.Err(); err != nil { ... }  // first failure, if any
//	pkt, nbits := w.Bytes(), w.BitLen()
//
//	var r bitstream.Reader
//	r.ResetBits(pkt, nbits) // or Reset(pkt) when the padding is harmless
//	more, err := r.ReadFlag("hdr.more")
//	n, err := r.ReadRangedInt(0, 32, "hdr.count")
//
// # Records
//
// A record is a run of fields written or read as one: Writer.Begin and
// Reader.Begin lend the stream's position to a RecordWriter or RecordReader
// (a small value kept in the caller's frame), whose methods are the field
// calls without an error each: the record remembers its first failure and
// End reports it and gives the position back. Its small fields inline into
// the caller and its others need no stack frame of their own, so a record
// of many fields (a ghost update) costs less than its per-field calls, with
// the same bits and values. A written record is whole or absent: one that
// outgrows the buffer is taken back by End (ErrOverflow), so check
// Remaining against the record's largest size first, as a packet builder
// does.
//
//	rec := w.Begin()
//	rec.WriteFlag(true)
//	rec.WriteRangedInt(id, 0, 1023)           // 10 bits
//	rec.WriteFixed3(&posFormat, x, y, z)      // a FixedFormat made once
//	rec.WriteQuat(rot)
//	if err := rec.End(); err != nil { ... }   // the Writer is usable again
//
//	rr := r.Begin("ghost")                    // the name its errors carry
//	more := rr.ReadFlag()
//	id := rr.ReadRangedInt(0, 1023)
//	x, y, z := rr.ReadFixed3(&posFormat)
//	if err := rr.End(); err != nil { ... }    // *ReadError at the failing field's bit
//
// Strings are not record fields: end the record, write or read the string
// through the Writer or Reader, and begin another.
//
// Every Read method takes the name of the field it reads; a failure returns a
// *ReadError naming that field and its bit offset, wrapping
// io.ErrUnexpectedEOF (ran off the end), ErrOutOfRange / ErrTooLong (a value
// the schema forbids) or ErrWidth. A failed read consumes nothing. Decoders
// accept only canonical encodings (re-encoding a decoded value gives the same
// bits), except that a table-string literal may name a string the reader's
// table holds. Nothing panics on any input, and no method allocates except
// ReadString (one string, bounded by the caller's maximum length), an
// undersized dst in the *Bytes readers, Begin over a buffer shorter than 8
// bytes (8 bytes of scratch), and the error path.
//
// Every write is atomic: it writes its whole value or nothing. Writers return
// the failure (buffer full, value out of range, NaN) from the failing call and
// remember the first one in Err, so a packet builder may check once; Truncate
// rewinds a section that did not fit and clears the overflow it caused.
//
// Writers and Readers are values with no hidden allocation: keep one per
// connection and Reset it per packet. Neither is safe for concurrent use.
package bitstream
