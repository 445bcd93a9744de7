package handshake

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
)

// Sizes of the wire format (docs/protocol.md § Handshake, fragment
// docs/protocol.md §7, gives every layout byte by byte).
const (
	// MaxPacketSize bounds every ghostwire datagram (DESIGN.md §3): it fits the
	// IPv6 minimum MTU (1280) minus IP and UDP headers with room to spare.
	MaxPacketSize = 1200
	// RequestSize is the exact size of ConnectRequest and ChallengeResponse: the
	// largest datagram, so every reply is smaller than the request that caused it
	// and the handshake proves the path carries full-size datagrams (as QUIC's
	// 1200-byte Initial does).
	RequestSize = MaxPacketSize
	// TagSize is the Poly1305 tag every protected packet ends with.
	TagSize = 16
	// ConnIDSize is the size of a connection id.
	ConnIDSize = 8
	// MinDataSize is the smallest short-form protected packet: a 1-byte header
	// and the tag.
	MinDataSize = 1 + TagSize
	// MinRoutedSize is the smallest long-form protected packet.
	MinRoutedSize = 1 + ConnIDSize + MinDataSize

	ChallengeSize    = 1 + TokenIDSize + 8 + cookieMACSize // 49
	AcceptedSize     = 1 + ConnIDSize + TagSize            // 25
	DeniedSize       = 1 + 1 + TokenIDSize                 // 26
	DisconnectSize   = 1 + ConnIDSize + 8 + 1 + TagSize    // 34
	NoConnectionSize = 1 + ConnIDSize                      // 9
	// RedirectSize: kind, connection id, sequence, then the new server's
	// address and a whole connect token, encrypted, and the tag (671).
	RedirectSize = 1 + ConnIDSize + 8 + addrSize + TokenSize + TagSize
)

// Kind is the type of a datagram, read from its first byte.
//
// A first byte whose two low bits are not both set starts a notify header
// (replication/notify: its 2-bit type field, where 3 is reserved): that is a
// short-form protected packet, KindData. A first byte with both low bits set is
// a control byte 0b kkkkkk11 and kind k = byte >> 2 names one of the packets
// below. So telling a data packet from a handshake packet costs nothing on the
// wire: the steady state carries no prefix byte.
type Kind uint8

const (
	KindData              Kind = 0 // short-form protected packet: notify header, ciphertext, tag
	KindConnectRequest    Kind = 1 // client → server, RequestSize bytes, carries the token
	KindChallenge         Kind = 2 // server → client, carries a cookie
	KindChallengeResponse Kind = 3 // client → server, a ConnectRequest with the cookie filled in
	KindAccepted          Kind = 4 // server → client, the connection id, authenticated
	KindDenied            Kind = 5 // server → client, a Reason
	KindDisconnect        Kind = 6 // either way, protected, a Reason
	KindNoConnection      Kind = 7 // server → client: that connection does not exist here
	KindRouted            Kind = 8 // long-form protected packet: connection id, then as KindData
	KindRedirect          Kind = 9 // server → client, protected: reconnect there with this token
	numKinds                   = 10
)

var kindNames = [numKinds]string{"data", "connect request", "challenge", "challenge response",
	"accepted", "denied", "disconnect", "no connection", "routed", "redirect"}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "invalid"
}

// ControlByte is the first byte of a control packet of kind k.
func (k Kind) ControlByte() byte { return byte(k)<<2 | 3 }

// sizes[k] is the exact size of kind k, or 0 when it is variable (data, routed).
var sizes = [numKinds]int{0, RequestSize, ChallengeSize, RequestSize, AcceptedSize, DeniedSize,
	DisconnectSize, NoConnectionSize, 0, RedirectSize}

// Classify names the kind of a datagram from its first byte and length alone:
// no crypto, no allocation, a few nanoseconds. It is the gateway's first filter;
// everything it refuses is ErrGarbage. A packet it accepts may still fail its
// kind's decoder or authentication.
func Classify(pkt []byte) (Kind, error) {
	if len(pkt) == 0 || len(pkt) > MaxPacketSize {
		return 0, ErrGarbage
	}
	b := pkt[0]
	if b&3 != 3 {
		if len(pkt) < MinDataSize {
			return 0, ErrGarbage
		}
		return KindData, nil
	}
	k := Kind(b >> 2)
	if k == KindData || k >= numKinds {
		return 0, ErrGarbage
	}
	if n := sizes[k]; n != 0 {
		if len(pkt) != n {
			return 0, ErrGarbage
		}
	} else if len(pkt) < MinRoutedSize {
		return 0, ErrGarbage
	}
	return k, nil
}

// ConnID names a connection in every protected packet's associated data and in
// long-form packets on the wire. The server draws it at random; zero is never
// issued (it means "unknown" in NoConnection).
type ConnID [ConnIDSize]byte

func (id ConnID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is the zero id (no connection).
func (id ConnID) IsZero() bool { return id == ConnID{} }

// TokenIDSize is the size of a token id: the token's XChaCha20 nonce.
const TokenIDSize = 24

// TokenID identifies a connect token. It is the token's 192-bit random
// XChaCha20-Poly1305 nonce: unique per token, public (so the server can bind a
// cookie to it and look it up in the replay guard before spending an AEAD
// open), and authenticated (opening under any other nonce fails).
type TokenID [TokenIDSize]byte

func (id TokenID) String() string { return hex.EncodeToString(id[:]) }

// addrSize is the encoded size of an address: family, 16 address bytes, port.
const addrSize = 1 + 16 + 2

// putAddr writes a as [family 4|6][16 address bytes][port LE]; an IPv4 address
// occupies the first 4 address bytes, the other 12 are zero. a must be valid.
func putAddr(b []byte, a netip.AddrPort) {
	_ = b[addrSize-1]
	ip := a.Addr().Unmap()
	clear(b[:addrSize])
	if ip.Is4() {
		b[0] = 4
		v4 := ip.As4()
		copy(b[1:5], v4[:])
	} else {
		b[0] = 6
		v6 := ip.As16()
		copy(b[1:17], v6[:])
	}
	binary.LittleEndian.PutUint16(b[17:19], a.Port())
}

// getAddr decodes a canonical putAddr encoding: family 4 or 6, IPv4 padding
// zero, no IPv4-mapped IPv6, no zone, port nonzero.
func getAddr(b []byte) (netip.AddrPort, bool) {
	_ = b[addrSize-1]
	port := binary.LittleEndian.Uint16(b[17:19])
	if port == 0 {
		return netip.AddrPort{}, false
	}
	var ip netip.Addr
	switch b[0] {
	case 4:
		if !allZero(b[5:17]) {
			return netip.AddrPort{}, false
		}
		ip = netip.AddrFrom4([4]byte(b[1:5]))
	case 6:
		ip = netip.AddrFrom16([16]byte(b[1:17]))
		if ip.Is4In6() {
			return netip.AddrPort{}, false
		}
	default:
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip, port), true
}

// canonAddr is the form addresses are compared in: IPv4-mapped IPv6 unmapped,
// zone dropped (a zone never crosses the wire).
func canonAddr(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap().WithZone(""), a.Port())
}

// zeros is read-only: compared against padding and unused fields.
var zeros [MaxPacketSize]byte

func allZero(b []byte) bool {
	for len(b) > len(zeros) {
		if string(b[:len(zeros)]) != string(zeros[:]) {
			return false
		}
		b = b[len(zeros):]
	}
	return string(b) == string(zeros[:len(b)])
}
