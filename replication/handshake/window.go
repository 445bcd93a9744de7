package handshake

// ReplayWindowSize is how far below the newest accepted sequence number a
// late packet is still accepted (once): sequences in (newest − 1024, newest].
// It is four times the notify window (replication/notify AckWindow 256), so
// replay protection never refuses a packet notify would still accept.
const ReplayWindowSize = 1024

// replayWords is the bitmap's length in 64-bit words: a window of
// ReplayWindowSize bits touches at most ReplayWindowSize/64 + 1 words, and the
// extra one lets advancing clear whole words (the WireGuard / RFC 6479 ring).
const replayWords = ReplayWindowSize/64 + 1

// ReplayWindow refuses duplicate and too-old sequence numbers of one
// direction. Use it in two phases around the AEAD:
//
//	if err := w.Check(seq); err != nil { drop }     // before decryption: cheap
//	pt, err := prot.Open(dst, hdr, ct, seq)          // authenticate
//	if err != nil { drop }
//	if err := w.Commit(seq); err != nil { drop }    // only now does state move
//
// Because only authenticated sequence numbers are committed, a forged packet
// with a far-future sequence number cannot advance the window and lock the
// real peer out. Sequence numbers are full 64-bit values that never wrap; the
// ring index wraps and is tested across every word boundary.
//
// The zero ReplayWindow is ready to use (nothing accepted yet; 0 is the first
// valid sequence). Not safe for concurrent use; the connection actor owns it.
type ReplayWindow struct {
	newest uint64 // the newest committed sequence number (0 before any commit)
	bits   [replayWords]uint64
}

// Check reports whether seq could be accepted now: nil, ErrDuplicate or
// ErrStale. It changes nothing.
func (w *ReplayWindow) Check(seq uint64) error {
	if seq > w.newest {
		return nil
	}
	if w.newest-seq >= ReplayWindowSize {
		return ErrStale
	}
	word, bit := (seq/64)%replayWords, seq%64
	if w.bits[word]&(1<<bit) != 0 {
		return ErrDuplicate
	}
	return nil
}

// Commit records seq as accepted. It re-checks (another packet with the same
// sequence may have been committed since Check) and returns the same errors.
func (w *ReplayWindow) Commit(seq uint64) error {
	if err := w.Check(seq); err != nil {
		return err
	}
	if seq > w.newest {
		// Clear the words the window slides onto: those after newest's word up to
		// and including seq's word. A jump of a whole ring or more clears all.
		if n := seq/64 - w.newest/64; n >= replayWords {
			w.bits = [replayWords]uint64{}
		} else {
			for i := w.newest/64 + 1; i <= seq/64; i++ {
				w.bits[i%replayWords] = 0
			}
		}
		w.newest = seq
	}
	w.bits[(seq/64)%replayWords] |= 1 << (seq % 64)
	return nil
}

// Newest is the newest committed sequence number (0 before any).
func (w *ReplayWindow) Newest() uint64 { return w.newest }
