package bitstream

// WriteBitsFrom appends the first nbits bits of src, a bit string in this
// package's canonical order (as a Writer's Bytes and BitLen give it), so a
// section packed by one owner — a ghost manager packing into its own buffer —
// can be spliced into a packet another owner frames, at any bit offset. Bits
// of src beyond nbits are ignored (they need not be zero).
//
// Like every write it is atomic: ErrWidth when nbits is negative or exceeds
// 8·len(src), ErrOverflow when the bits do not fit; nothing is written then.
func (w *Writer) WriteBitsFrom(src []byte, nbits int) error {
	if nbits < 0 || nbits > 8*len(src) {
		return w.fail(ErrWidth)
	}
	if !w.fits(nbits) {
		return ErrOverflow
	}
	full := nbits >> 3
	writeData(w, src[:full])
	if tail := uint(nbits & 7); tail != 0 {
		w.put(uint64(src[full])&(1<<tail-1), tail)
	}
	return nil
}

// Resize moves the end of the writer's buffer to n bytes of the buffer's
// backing array, keeping every bit written: a packet builder caps one section
// (events may not eat the share reserved for ghosts) and lifts the cap for the
// next, without copying. n must lie in [Len(), cap of the buffer]; otherwise
// Resize returns ErrWidth and changes nothing.
func (w *Writer) Resize(n int) error {
	if n < w.Len() || n > cap(w.buf) {
		return ErrWidth
	}
	w.buf = w.buf[:n]
	return nil
}
