package handshake

// ReplayWindowSize is how far below the newest accepted sequence number a
// late packet is still accepted (once): sequences in (newest − 128, newest].
//
// Why 128 (it was 1024, "four times notify's AckWindow of 256"): a data
// packet's sequence number is its notify sequence, and notify reads the
// header — and refuses what it will not take — before the window is even
// checked (session: ReadHeaderInto, then Check, the AEAD, Commit, Accept).
// Notify takes nothing below its horizon, and accepting a packet s as the
// newest moves the horizon to at least s+1−K, K its ReorderThreshold (≤
// notify.MaxReorderThreshold = 32; 4 by default): the oldest packet notify
// can still accept is 31 below the newest it accepted, whatever its
// AckWindow (which bounds how far ahead a packet may be, and the ack
// reports, not how late one may come). The window's newest is notify's
// newest, except after the control packets that take sequence numbers
// from the same counter: Disconnect copies (the first one accepted closes
// the session, so nothing after it is read) and a server's Redirect
// copies (by default every 50 ms for at most 1 s: ≤ 21; the client
// leaves on the first it opens, so a data packet behind them no longer
// matters). So no packet notify would accept lies more than 31 (52 behind
// a default Redirect's copies) below the window's newest: 128 is over
// twice that, and the bitmap is 3
// words where 1024 took 17 (the Session 256 → 128 bytes with its
// receiving AEAD slimmed: 128 bytes a connection at each end). The
// session package fails to compile if MaxReorderThreshold outgrows it
// (replayCoversNotify), and TestLatePacketsWithinNotifyHorizonAccepted
// holds a session to it at K = 32. A peer with another window size
// interoperates: the window is the receiver's own policy, not on the wire.
const ReplayWindowSize = 128

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
	w.commit(seq)
	return nil
}

// commit is Commit for a seq that Check accepted with nothing committed
// since (Session.OpenWith: the AEAD between the two touches no window).
func (w *ReplayWindow) commit(seq uint64) {
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
}

// Newest is the newest committed sequence number (0 before any).
func (w *ReplayWindow) Newest() uint64 { return w.newest }
