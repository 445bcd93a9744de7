package handshake

import (
	"encoding/binary"

	"golang.org/x/crypto/chacha20poly1305"
)

// Offsets in a connect request / challenge response (RequestSize bytes):
//
//	0      kind byte
//	1      token header (TokenHeaderSize)
//	210    sealed private part (SealedSize)
//	556    cookie epoch (8, zero in a connect request)
//	564    cookie MAC (16, zero in a connect request)
//	580    zero padding up to RequestSize
const (
	reqWire   = 1
	reqCookie = reqWire + wireTokenSize // 556
	reqPad    = reqCookie + cookieSize  // 580
	// reqEchoEnd: a Denied echoes request bytes [1+hdrNonce, reqEchoEnd), the
	// token id, which every version keeps at the same place.
	reqEchoEnd = reqWire + hdrNonce + TokenIDSize
)

var (
	errReqCookie  = &FieldError{"connect request", "cookie", ErrMalformed}
	errReqPadding = &FieldError{"connect request", "padding", ErrMalformed}
)

// ConnectRequest is a decoded connect request or challenge response. Wire
// aliases the packet it was parsed from (header ‖ sealed part).
type ConnectRequest struct {
	Kind   Kind // KindConnectRequest or KindChallengeResponse
	Header TokenHeader
	Cookie Cookie // zero in a connect request
	Wire   []byte // header ‖ sealed private part, TokenHeaderSize+SealedSize bytes
}

// ParseConnectRequest decodes a connect request or challenge response without
// crypto or allocation. Only the canonical encoding is accepted (zero padding,
// zero cookie in a connect request). A header from another protocol version
// gives an error wrapping ErrWrongVersion.
func ParseConnectRequest(pkt []byte) (ConnectRequest, error) {
	var r ConnectRequest
	k, err := Classify(pkt)
	if err != nil {
		return r, err
	}
	if k != KindConnectRequest && k != KindChallengeResponse {
		return r, ErrUnexpected
	}
	r.Kind = k
	if err := parseHeader(pkt[reqWire:reqWire+TokenHeaderSize], &r.Header); err != nil {
		return ConnectRequest{}, err
	}
	r.Cookie.Epoch = binary.LittleEndian.Uint64(pkt[reqCookie:])
	copy(r.Cookie.MAC[:], pkt[reqCookie+8:reqPad])
	if k == KindConnectRequest && (r.Cookie != Cookie{}) {
		return ConnectRequest{}, errReqCookie
	}
	if !allZero(pkt[reqPad:]) {
		return ConnectRequest{}, errReqPadding
	}
	r.Wire = pkt[reqWire:reqCookie]
	return r, nil
}

// Append encodes r (RequestSize bytes) onto dst.
func (r *ConnectRequest) Append(dst []byte) []byte {
	return appendRequest(dst, r.Kind, r.Wire, r.Cookie)
}

func appendRequest(dst []byte, k Kind, wire []byte, c Cookie) []byte {
	n := len(dst)
	dst = append(dst, zeros[:RequestSize]...)
	p := dst[n:]
	p[0] = k.ControlByte()
	copy(p[reqWire:reqCookie], wire)
	if k == KindChallengeResponse {
		binary.LittleEndian.PutUint64(p[reqCookie:], c.Epoch)
		copy(p[reqCookie+8:reqPad], c.MAC[:])
	}
	return dst
}

// Challenge layout: kind, token id, cookie epoch, cookie MAC.
func appendChallenge(dst []byte, id *TokenID, c Cookie) []byte {
	dst = append(dst, KindChallenge.ControlByte())
	dst = append(dst, id[:]...)
	dst = binary.LittleEndian.AppendUint64(dst, c.Epoch)
	return append(dst, c.MAC[:]...)
}

// ParseChallenge decodes a Challenge: the token id it answers and the cookie.
func ParseChallenge(pkt []byte) (TokenID, Cookie, error) {
	var (
		id TokenID
		c  Cookie
	)
	if k, err := Classify(pkt); err != nil {
		return id, c, err
	} else if k != KindChallenge {
		return id, c, ErrUnexpected
	}
	copy(id[:], pkt[1:1+TokenIDSize])
	c.Epoch = binary.LittleEndian.Uint64(pkt[1+TokenIDSize:])
	copy(c.MAC[:], pkt[1+TokenIDSize+8:])
	return id, c, nil
}

// AppendDenied appends a Denied packet: kind, reason, and the token id of the
// request it answers (so only someone who saw the request can forge one).
func AppendDenied(dst []byte, r Reason, id TokenID) []byte {
	dst = append(dst, KindDenied.ControlByte(), byte(r))
	return append(dst, id[:]...)
}

var errDeniedReason = &FieldError{"denied", "reason", ErrMalformed}

// ParseDenied decodes a Denied packet.
func ParseDenied(pkt []byte) (Reason, TokenID, error) {
	var id TokenID
	if k, err := Classify(pkt); err != nil {
		return 0, id, err
	} else if k != KindDenied {
		return 0, id, ErrUnexpected
	}
	r := Reason(pkt[1])
	if !r.IsDenial() {
		return 0, id, errDeniedReason
	}
	copy(id[:], pkt[2:])
	return r, id, nil
}

// Accepted layout: kind, connection id, tag. The tag is ChaCha20-Poly1305 over
// an empty plaintext under acceptKey(token s2c key, server), nonce
// [1][domainAccepted][0][0][connection id], associated data kind ‖ connection
// id ‖ token id. It is a deterministic function of (token, server, connection
// id), so a retry gets the same bytes and no nonce is used for two messages.
func appendAccepted(dst []byte, key *[KeySize]byte, id ConnID, tok *TokenID) ([]byte, error) {
	aead, err := chacha20poly1305.New(key[:])
	if err != nil {
		return dst, err
	}
	dst = append(dst, KindAccepted.ControlByte())
	dst = append(dst, id[:]...)
	nonce, ad := acceptedNonce(id), acceptedAD(id, tok)
	return aead.Seal(dst, nonce[:], nil, ad[:]), nil
}

// openAccepted verifies an Accepted packet and returns its connection id.
func openAccepted(pkt []byte, key *[KeySize]byte, tok *TokenID) (ConnID, error) {
	var id ConnID
	if k, err := Classify(pkt); err != nil {
		return id, err
	} else if k != KindAccepted {
		return id, ErrUnexpected
	}
	copy(id[:], pkt[1:1+ConnIDSize])
	if id.IsZero() {
		return id, ErrAuth
	}
	aead, err := chacha20poly1305.New(key[:])
	if err != nil {
		return ConnID{}, err
	}
	nonce, ad := acceptedNonce(id), acceptedAD(id, tok)
	if _, err := aead.Open(nil, nonce[:], pkt[1+ConnIDSize:], ad[:]); err != nil {
		return ConnID{}, ErrAuth
	}
	return id, nil
}

func acceptedNonce(id ConnID) (n [chacha20poly1305.NonceSize]byte) {
	n[0] = byte(ServerToClient)
	n[1] = domainAccepted
	copy(n[4:], id[:])
	return n
}

func acceptedAD(id ConnID, tok *TokenID) (ad [1 + ConnIDSize + TokenIDSize]byte) {
	ad[0] = KindAccepted.ControlByte()
	copy(ad[1:], id[:])
	copy(ad[1+ConnIDSize:], tok[:])
	return ad
}

// NoConnection layout: kind, then the connection id of the packet it answers
// when that was a long-form packet, else zeros.
//
// AppendNoConnection builds the reply to an unroutable protected packet req.
// It refuses (ErrUnexpected) to answer anything but a protected data packet —
// never a handshake packet, a Disconnect or another NoConnection, so two
// endpoints can never ping-pong — and every reply is smaller than req (a
// protected packet is at least MinDataSize = 17 bytes, the reply 9), so it
// cannot amplify. Rate-limit it per source (RateLimiter) before sending: it is
// still a reflection.
func AppendNoConnection(dst, req []byte) ([]byte, error) {
	k, err := Classify(req)
	if err != nil {
		return dst, err
	}
	var id ConnID
	switch k {
	case KindData:
	case KindRouted:
		copy(id[:], req[1:1+ConnIDSize])
	default:
		return dst, ErrUnexpected
	}
	dst = append(dst, KindNoConnection.ControlByte())
	return append(dst, id[:]...), nil
}

// ParseNoConnection decodes a NoConnection packet: the connection id it names
// (zero when the packet it answered was short-form).
func ParseNoConnection(pkt []byte) (ConnID, error) {
	var id ConnID
	if k, err := Classify(pkt); err != nil {
		return id, err
	} else if k != KindNoConnection {
		return id, ErrUnexpected
	}
	copy(id[:], pkt[1:])
	return id, nil
}

// AppendRouted appends the long-form prefix (KindRouted, connection id); a
// protected packet sealed by the session follows it unchanged. The prefix is
// not authenticated by itself, but the connection id is in every packet's
// associated data, so a packet routed to the wrong session fails to open.
func AppendRouted(dst []byte, id ConnID) []byte {
	dst = append(dst, KindRouted.ControlByte())
	return append(dst, id[:]...)
}

// ParseRouted splits a long-form packet into its connection id and the
// short-form packet that follows.
func ParseRouted(pkt []byte) (ConnID, []byte, error) {
	if k, err := Classify(pkt); err != nil {
		return ConnID{}, nil, err
	} else if k != KindRouted {
		return ConnID{}, nil, ErrUnexpected
	}
	return SplitRouted(pkt)
}

// SplitRouted is ParseRouted of a packet Classify has already found
// KindRouted (the gateway's reader and Server.Receive classify every
// datagram first, and a second Classify was ≈ 16 instructions a long-form
// datagram each): it checks only the length and the inner packet's form.
func SplitRouted(pkt []byte) (ConnID, []byte, error) {
	var id ConnID
	if len(pkt) < MinRoutedSize {
		return id, nil, ErrGarbage
	}
	id = ConnID(pkt[1 : 1+ConnIDSize])
	rest := pkt[1+ConnIDSize:]
	if rest[0]&3 == 3 {
		return id, nil, ErrGarbage // the inner packet must be short-form
	}
	return id, rest, nil
}

// ParseDisconnectID returns the connection id a Disconnect packet names, for
// routing; Session.OpenDisconnect authenticates it.
func ParseDisconnectID(pkt []byte) (ConnID, error) {
	var id ConnID
	if k, err := Classify(pkt); err != nil {
		return id, err
	} else if k != KindDisconnect {
		return id, ErrUnexpected
	}
	copy(id[:], pkt[1:1+ConnIDSize])
	return id, nil
}
