package handshake

import (
	"crypto/cipher"
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/prefetch"
)

// PrefetchSealKey asks the CPU for the sending AEAD's state, a pump or
// two before SealWith. Each AEAD is its own allocation behind an
// interface (the library's ChaCha20-Poly1305 holds its 32-byte key
// there), so its line is a second cold line behind the Session's: by a
// connection's next packet on a loaded node it has left the caches, and
// the AEAD's first read of the key waited for memory on nearly every
// packet (0.9 % of the node's samples at 2,000 players). Call it a turn
// after the Session's own lines were asked for (it reads the interface
// from them). A hint: it changes nothing and never faults. (The
// receiving AEAD's key is not fetched ahead: a connection shard's rounds
// of datagrams are too short for a fourth stage, actors/conn's
// prefetchEvents.)
func (s *Session) PrefetchSealKey() { prefetchAEAD(&s.send.aead) }

// PrefetchOpenKey is PrefetchSealKey for the receiving AEAD, ahead of
// OpenWith (its first read of the key: 1.1 % of the node's samples at
// 2,000 players). PrefetchSession asks for the Session's own lines, a
// turn before: a caller that holds the Session's address where it holds
// the Server's can ask for both at once, and for the key a turn later.
func (s *Session) PrefetchOpenKey() { prefetchAEAD(&s.recv) }

// PrefetchSession: see PrefetchOpenKey. A received packet reads the
// Session's two lines (the AEADs and state, then the replay window and
// the address).
func (s *Session) PrefetchSession() { prefetch.Lines(unsafe.Pointer(s), unsafe.Sizeof(*s)) }

// aeadState is how much of an AEAD's allocation to fetch: the library's
// ChaCha20-Poly1305 is its key, 32 bytes, in one line at most two.
const aeadState = 32

// prefetchAEAD fetches the allocation an AEAD interface points to: an
// interface value is two words, the type's and the data's (a pointer for
// a pointer type), and only the data word is read — no call through the
// interface, no type assertion on the hot path. TestPrefetchAEADFindsTheKey
// holds the layout to the runtime's.
func prefetchAEAD(a *cipher.AEAD) {
	prefetch.Lines(aeadData(a), aeadState)
}

// aeadData is the interface's data word.
func aeadData(a *cipher.AEAD) unsafe.Pointer {
	return (*[2]unsafe.Pointer)(unsafe.Pointer(a))[1]
}
