package handshake

import (
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net/netip"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// Connect token limits and layout (docs/protocol.md §7, Connect
// token). All integers are little-endian; times are Unix seconds of the
// backend's wall clock.
const (
	// KeySize is the size of every key: the token key the backend shares with
	// the zone servers and the per-token client↔server keys.
	KeySize = 32
	// MaxServerAddrs bounds the server list of a token.
	MaxServerAddrs = 8
	// MaxUserData bounds the opaque user data a token carries to the server.
	MaxUserData = 256
	// MaxTokenLifetime bounds Expiry: replay guard entries live until their token
	// expires, so the lifetime bounds how long each one holds memory.
	MaxTokenLifetime = time.Hour
	// MaxTimeout bounds the connection timeout a token may carry.
	MaxTimeout = time.Hour

	// TokenHeaderSize is the public header: the associated data of the sealed
	// part, and what a connect request repeats in the clear.
	TokenHeaderSize = 4 + TokenIDSize + 8 + 8 + 8 + 4 + 1 + MaxServerAddrs*addrSize // 209
	privateSize     = 8 + 2*KeySize + 2 + MaxUserData                               // 330
	// SealedSize is the sealed private part: player id, both keys, user data.
	SealedSize = privateSize + chacha20poly1305.Overhead // 346
	// TokenSize is the fixed size of every connect token: header, sealed part,
	// then the client's copy of the two keys.
	TokenSize = TokenHeaderSize + SealedSize + 2*KeySize // 619

	// wireTokenSize is what a connect request carries: header and sealed part,
	// never the client's key copy.
	wireTokenSize = TokenHeaderSize + SealedSize

	// header field offsets
	hdrVersion  = 0
	hdrNonce    = 4
	hdrProtocol = hdrNonce + TokenIDSize // 28
	hdrCreated  = hdrProtocol + 8        // 36
	hdrExpires  = hdrCreated + 8         // 44
	hdrTimeout  = hdrExpires + 8         // 52
	hdrCount    = hdrTimeout + 4         // 56
	hdrServers  = hdrCount + 1           // 57

	// private field offsets
	privPlayer  = 0
	privC2S     = 8
	privS2C     = privC2S + KeySize // 40
	privUserLen = privS2C + KeySize // 72
	privUser    = privUserLen + 2   // 74

	// token offsets of the client's key copy
	tokC2S = wireTokenSize
	tokS2C = tokC2S + KeySize
)

// Version opens every token header: the magic "GW" and the protocol version
// number 1 as a big-endian uint16. Every later version keeps these four bytes
// first, the token id at header bytes 4..27 and connect requests at
// RequestSize, so a server can answer any version with a Denied it
// understands; a header without the magic is not ghostwire at all and gets no
// answer.
var Version = [4]byte{'G', 'W', 0, 1}

// TokenParams is what the backend puts in a connect token.
type TokenParams struct {
	PlayerID   uint64
	ProtocolID uint64 // the game and build; servers refuse other ids
	// Expiry is the token's lifetime from issue: (0, MaxTokenLifetime], rounded
	// up to whole seconds. Short is better: a stolen token is useful until then.
	Expiry time.Duration
	// Timeout is the connection's idle timeout both ends apply once connected:
	// [1ms, MaxTimeout], carried in milliseconds.
	Timeout time.Duration
	// ServerAddrs are the zone servers this token may connect to (1 to
	// MaxServerAddrs), in the client's order of preference.
	ServerAddrs []netip.AddrPort
	// UserData is opaque to the protocol and reaches the server sealed: up to
	// MaxUserData bytes.
	UserData []byte
}

// Validate reports the first parameter out of range, wrapped around ErrParams.
func (p TokenParams) Validate() error {
	switch {
	case p.Expiry <= 0 || p.Expiry > MaxTokenLifetime:
		return fmt.Errorf("%w: Expiry %v outside (0, %v]", ErrParams, p.Expiry, MaxTokenLifetime)
	case p.Timeout < time.Millisecond || p.Timeout > MaxTimeout:
		return fmt.Errorf("%w: Timeout %v outside [1ms, %v]", ErrParams, p.Timeout, MaxTimeout)
	case len(p.ServerAddrs) == 0 || len(p.ServerAddrs) > MaxServerAddrs:
		return fmt.Errorf("%w: %d server addresses, want 1..%d", ErrParams, len(p.ServerAddrs), MaxServerAddrs)
	case len(p.UserData) > MaxUserData:
		return fmt.Errorf("%w: %d bytes of user data, max %d", ErrParams, len(p.UserData), MaxUserData)
	}
	for i, a := range p.ServerAddrs {
		if !a.IsValid() || a.Port() == 0 || a.Addr().Zone() != "" || a.Addr().IsUnspecified() {
			return fmt.Errorf("%w: server address %d (%v) must be a concrete address with a port and no zone", ErrParams, i, a)
		}
	}
	return nil
}

// IssueToken mints a connect token for p under the token key the zone servers
// share. now is the backend's wall clock; rand supplies the token id and the
// two session keys (crypto/rand.Reader in production). The result is TokenSize
// bytes; hand it to the client over an authenticated, encrypted channel (it
// holds the session keys in the clear).
func IssueToken(key [KeySize]byte, p TokenParams, now time.Time, rand io.Reader) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	tok := make([]byte, TokenSize)
	var priv [privateSize]byte
	defer clear(priv[:])
	if _, err := io.ReadFull(rand, tok[hdrNonce:hdrNonce+TokenIDSize]); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRand, err)
	}
	if _, err := io.ReadFull(rand, priv[privC2S:privUserLen]); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRand, err)
	}
	if string(priv[privC2S:privS2C]) == string(priv[privS2C:privUserLen]) {
		// Only a broken source repeats 32 bytes; one key for both directions
		// would let a packet be reflected back to its sender.
		return nil, fmt.Errorf("%w: drew the same key twice", ErrRand)
	}
	created := unixSeconds(now)
	life := uint64((p.Expiry + time.Second - 1) / time.Second)

	h := tok[:TokenHeaderSize]
	copy(h[hdrVersion:], Version[:])
	binary.LittleEndian.PutUint64(h[hdrProtocol:], p.ProtocolID)
	binary.LittleEndian.PutUint64(h[hdrCreated:], created)
	binary.LittleEndian.PutUint64(h[hdrExpires:], created+life)
	binary.LittleEndian.PutUint32(h[hdrTimeout:], uint32(p.Timeout/time.Millisecond))
	h[hdrCount] = byte(len(p.ServerAddrs))
	for i, a := range p.ServerAddrs {
		putAddr(h[hdrServers+i*addrSize:], a)
	}

	binary.LittleEndian.PutUint64(priv[privPlayer:], p.PlayerID)
	binary.LittleEndian.PutUint16(priv[privUserLen:], uint16(len(p.UserData)))
	copy(priv[privUser:], p.UserData)

	aead, err := chacha20poly1305.NewX(key[:])
	if err != nil {
		return nil, err
	}
	aead.Seal(tok[TokenHeaderSize:TokenHeaderSize], h[hdrNonce:hdrNonce+TokenIDSize], priv[:], h)
	copy(tok[tokC2S:], priv[privC2S:privS2C])
	copy(tok[tokS2C:], priv[privS2C:privUserLen])
	return tok, nil
}

// unixSeconds clamps times before 1970 to 0.
func unixSeconds(t time.Time) uint64 {
	if s := t.Unix(); s > 0 {
		return uint64(s)
	}
	return 0
}

// TokenHeader is the public part of a connect token: what anyone holding the
// token or watching a connect request can read.
type TokenHeader struct {
	ID         TokenID
	ProtocolID uint64
	Created    int64 // Unix seconds, backend clock
	Expires    int64 // Unix seconds, backend clock; the token is dead from this second on
	Timeout    time.Duration
	NumServers int
	Servers    [MaxServerAddrs]netip.AddrPort // Servers[:NumServers] are set
}

// Lists reports whether addr is one of the token's servers.
func (h *TokenHeader) Lists(addr netip.AddrPort) bool {
	addr = canonAddr(addr)
	for _, s := range h.Servers[:h.NumServers] {
		if s == addr {
			return true
		}
	}
	return false
}

// ExpiresAt is Expires as a time.Time.
func (h *TokenHeader) ExpiresAt() time.Time { return time.Unix(h.Expires, 0) }

// Expired reports whether the token is dead at now (wall clock).
func (h *TokenHeader) Expired(now time.Time) bool { return now.Unix() >= h.Expires }

// Token is a connect token as the client holds it: the public header, the two
// session keys, and the sealed part it forwards without reading. The zero
// Token is invalid; ParseToken makes one.
type Token struct {
	TokenHeader
	ClientToServerKey [KeySize]byte
	ServerToClientKey [KeySize]byte
	raw               [TokenSize]byte
}

// Decoding errors of the token header and private part. They are values, not
// built per call, so rejecting a hostile packet allocates nothing.
var (
	errTokenSize     = &FieldError{"token", "size", ErrBadToken}
	errTokenMagic    = &FieldError{"token", "magic", ErrBadToken}
	errTokenVersion  = &FieldError{"token", "version", ErrWrongVersion}
	errTokenTimes    = &FieldError{"token", "created/expires", ErrBadToken}
	errTokenTimeout  = &FieldError{"token", "timeout", ErrBadToken}
	errTokenCount    = &FieldError{"token", "server count", ErrBadToken}
	errTokenServer   = &FieldError{"token", "server address", ErrBadToken}
	errTokenUnused   = &FieldError{"token", "unused server slots", ErrBadToken}
	errTokenUserLen  = &FieldError{"token", "user data length", ErrBadToken}
	errTokenUserPad  = &FieldError{"token", "user data padding", ErrBadToken}
	errTokenKeysCopy = &FieldError{"token", "client key copy", ErrBadToken}
)

// parseHeader decodes and validates a TokenHeaderSize-byte header. It accepts
// only the canonical encoding IssueToken writes, so decode → encode is the
// identity.
func parseHeader(b []byte, h *TokenHeader) error {
	_ = b[TokenHeaderSize-1]
	if b[hdrVersion] != Version[0] || b[hdrVersion+1] != Version[1] {
		return errTokenMagic
	}
	if [4]byte(b[hdrVersion:hdrVersion+4]) != Version {
		return errTokenVersion
	}
	copy(h.ID[:], b[hdrNonce:hdrNonce+TokenIDSize])
	h.ProtocolID = binary.LittleEndian.Uint64(b[hdrProtocol:])
	created := binary.LittleEndian.Uint64(b[hdrCreated:])
	expires := binary.LittleEndian.Uint64(b[hdrExpires:])
	if created > math.MaxInt64/2 || expires <= created || expires-created > uint64(MaxTokenLifetime/time.Second) {
		return errTokenTimes
	}
	h.Created, h.Expires = int64(created), int64(expires)
	ms := binary.LittleEndian.Uint32(b[hdrTimeout:])
	if ms == 0 || ms > uint32(MaxTimeout/time.Millisecond) {
		return errTokenTimeout
	}
	h.Timeout = time.Duration(ms) * time.Millisecond
	n := int(b[hdrCount])
	if n == 0 || n > MaxServerAddrs {
		return errTokenCount
	}
	h.NumServers = n
	for i := range MaxServerAddrs {
		slot := b[hdrServers+i*addrSize : hdrServers+(i+1)*addrSize]
		if i >= n {
			h.Servers[i] = netip.AddrPort{}
			continue
		}
		a, ok := getAddr(slot)
		if !ok || a.Addr().IsUnspecified() {
			return errTokenServer
		}
		h.Servers[i] = a
	}
	if !allZero(b[hdrServers+n*addrSize : TokenHeaderSize]) {
		return errTokenUnused
	}
	return nil
}

// ParseToken decodes a connect token on the client: the public header and the
// keys. It cannot check the sealed part (only servers hold the token key); a
// token that parses may still be refused by the server.
func ParseToken(b []byte) (Token, error) {
	var t Token
	if len(b) != TokenSize {
		return t, errTokenSize
	}
	if err := parseHeader(b[:TokenHeaderSize], &t.TokenHeader); err != nil {
		return Token{}, err
	}
	copy(t.ClientToServerKey[:], b[tokC2S:])
	copy(t.ServerToClientKey[:], b[tokS2C:])
	if t.ClientToServerKey == t.ServerToClientKey {
		return Token{}, errTokenKeysCopy // one key for both directions: never issued
	}
	copy(t.raw[:], b)
	return t, nil
}

// Bytes returns the token's encoding (a copy).
func (t *Token) Bytes() []byte { return append([]byte(nil), t.raw[:]...) }

// Claims is what a server learns from a connect token it opened.
type Claims struct {
	TokenHeader
	PlayerID          uint64
	ClientToServerKey [KeySize]byte
	ServerToClientKey [KeySize]byte
	UserDataLen       int
	UserData          [MaxUserData]byte // UserData[:UserDataLen] is set
}

// OpenToken is the server's check of a whole connect token (TokenSize bytes):
// the header decodes, now (this server's wall clock) is before expiry, server
// is listed, and the sealed part opens under key with the header as associated
// data. The client's key copy is not authenticated and not read. Servers
// handling connect requests use Server.Handle, which runs the same checks in
// the order that spends the least on hostile input.
func OpenToken(key [KeySize]byte, tok []byte, now time.Time, server netip.AddrPort) (Claims, error) {
	var c Claims
	if len(tok) != TokenSize {
		return c, errTokenSize
	}
	if err := parseHeader(tok[:TokenHeaderSize], &c.TokenHeader); err != nil {
		return Claims{}, err
	}
	if c.Expired(now) {
		return Claims{}, ErrTokenExpired
	}
	if !c.Lists(server) {
		return Claims{}, ErrWrongServer
	}
	aead, err := chacha20poly1305.NewX(key[:])
	if err != nil {
		return Claims{}, err
	}
	var buf [privateSize]byte
	if err := openPrivate(aead, tok[:wireTokenSize], buf[:0], &c); err != nil {
		return Claims{}, err
	}
	return c, nil
}

// openPrivate opens the sealed part of wire (header ‖ sealed) into scratch
// (cap ≥ privateSize) and decodes it into c. c.TokenHeader must already hold
// the parsed header. The plaintext is wiped from scratch afterwards.
func openPrivate(aead cipher.AEAD, wire, scratch []byte, c *Claims) error {
	h := wire[:TokenHeaderSize]
	p, err := aead.Open(scratch[:0], h[hdrNonce:hdrNonce+TokenIDSize], wire[TokenHeaderSize:wireTokenSize], h)
	if err != nil {
		return ErrBadToken
	}
	defer clear(p)
	n := int(binary.LittleEndian.Uint16(p[privUserLen:]))
	if n > MaxUserData {
		return errTokenUserLen
	}
	if !allZero(p[privUser+n : privateSize]) {
		return errTokenUserPad
	}
	c.PlayerID = binary.LittleEndian.Uint64(p[privPlayer:])
	copy(c.ClientToServerKey[:], p[privC2S:privS2C])
	copy(c.ServerToClientKey[:], p[privS2C:privUserLen])
	c.UserDataLen = n
	copy(c.UserData[:], p[privUser:privUser+n])
	return nil
}
