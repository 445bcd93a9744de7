package handshake

import (
	"crypto/hmac"
	"crypto/sha256"
	"net/netip"
)

// Key derivation. The keys inside a connect token never encrypt a packet
// themselves: each session derives its own from them, the server's address and
// the connection id (HMAC-SHA256 as a PRF, one label per use). So even a token
// that reached two servers (it may list several), or a token reused through a
// bug, never puts two sessions under one key — a repeated AEAD nonce is
// impossible across sessions, not merely forbidden.
const (
	labelC2S    = "ghostwire/1 c2s"
	labelS2C    = "ghostwire/1 s2c"
	labelAccept = "ghostwire/1 accept"
	labelCookie = "ghostwire/1 cookie"
)

// SessionKeys are one session's packet keys, one per direction.
type SessionKeys struct {
	ClientToServer [KeySize]byte
	ServerToClient [KeySize]byte
}

// DeriveSessionKeys computes the packet keys of the session with connection id
// id on server from a token's two keys. Client and server both call it; the
// inputs are the token's keys, the address the client sent to (and the server
// is configured with) and the id from the Accepted packet.
func DeriveSessionKeys(c2s, s2c *[KeySize]byte, server netip.AddrPort, id ConnID) SessionKeys {
	var k SessionKeys
	derive(&k.ClientToServer, *c2s, labelC2S, server, id[:])
	derive(&k.ServerToClient, *s2c, labelS2C, server, id[:])
	return k
}

// acceptKey is the key of the Accepted packet's tag: it exists before the
// connection id does, so it depends on the token's server→client key and the
// server only.
func acceptKey(s2c *[KeySize]byte, server netip.AddrPort) (k [KeySize]byte) {
	derive(&k, *s2c, labelAccept, server, nil)
	return k
}

// derive sets out = HMAC-SHA256(key, label ‖ addr(server) ‖ extra). key is
// taken by value: hmac.New keeps its argument reachable, and a pointer into
// the caller's Claims would move the whole Claims to the heap on every
// request, refused ones included.
func derive(out *[KeySize]byte, key [KeySize]byte, label string, server netip.AddrPort, extra []byte) {
	var msg [32 + addrSize + ConnIDSize]byte
	n := copy(msg[:], label)
	putAddr(msg[n:], server)
	n += addrSize
	n += copy(msg[n:], extra)
	m := hmac.New(sha256.New, key[:])
	m.Write(msg[:n])
	sum := m.Sum(nil)
	copy(out[:], sum)
	clear(sum)
	clear(msg[:])
	clear(key[:])
}
