package conformance

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"net/netip"

	"github.com/ghostwire/ghostwire/replication/handshake"
)

// These helpers build § 7's byte strings from the spec's text, not from
// replication/handshake; the tests check the code against them.

// specAddr is addr(a), § 7.2.
func specAddr(a netip.AddrPort) []byte {
	b := make([]byte, 19)
	ip := a.Addr()
	if ip.Is4() {
		b[0] = 4
		v := ip.As4()
		copy(b[1:], v[:])
	} else {
		b[0] = 6
		v := ip.As16()
		copy(b[1:], v[:])
	}
	binary.LittleEndian.PutUint16(b[17:], a.Port())
	return b
}

// specNonce is § 7.9's nonce: direction ‖ 00 ‖ 00 00 ‖ seq (8, LE).
func specNonce(dir int, seq uint64) []byte {
	n := make([]byte, 12)
	n[0] = byte(dir)
	binary.LittleEndian.PutUint64(n[4:], seq)
	return n
}

func specHMAC(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// specAcceptKey is K_accept, § 7.7.
func specAcceptKey(s2c [32]byte, server netip.AddrPort) (k [32]byte) {
	copy(k[:], specHMAC(s2c[:], []byte("ghostwire/1 accept"), specAddr(server)))
	return k
}

// specPlaintext is the token's sealed plaintext, § 7.4.
func specPlaintext(c *handshake.Claims) []byte {
	b := make([]byte, 330)
	binary.LittleEndian.PutUint64(b, c.PlayerID)
	copy(b[8:], c.ClientToServerKey[:])
	copy(b[40:], c.ServerToClientKey[:])
	binary.LittleEndian.PutUint16(b[72:], uint16(c.UserDataLen))
	copy(b[74:], c.UserData[:c.UserDataLen])
	return b
}
