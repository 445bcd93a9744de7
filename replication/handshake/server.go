package handshake

import (
	"crypto/cipher"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// Load is the gateway's view of its own capacity, passed with every request.
// It selects the handshake path (docs/protocol.md §7, When the
// cookie round trip applies).
type Load uint8

const (
	// LoadNormal: one round trip. A valid connect request is granted at once: the
	// server opens the token and grants a pending session, whose address is not
	// yet proven (see Session: it sends nothing but the Accepted reply until the
	// client's first authenticated packet arrives from that address).
	LoadNormal Load = iota
	// LoadHigh: two round trips. A connect request gets a stateless Challenge;
	// only a challenge response carrying a valid cookie for its source address is
	// granted. Nothing is opened or allocated for an unproven source.
	LoadHigh
	// LoadFull: nothing new is granted; requests get Denied(ServerFull). Retries
	// of sessions already granted still get their Accepted.
	LoadFull
)

func (l Load) String() string {
	switch l {
	case LoadNormal:
		return "normal"
	case LoadHigh:
		return "high"
	case LoadFull:
		return "full"
	}
	return fmt.Sprintf("load(%d)", uint8(l))
}

// Server defaults and limits.
const (
	DefaultCookieRotation = 30 * time.Second
	MinCookieRotation     = time.Second
	MaxCookieRotation     = 10 * time.Minute

	// MaxTokenKeys bounds the token keys a server accepts at once: its own
	// and those of a rotation in progress (ServerConfig.OtherKeys). A
	// request whose token opens under none costs one AEAD open per key, so
	// the bound is the cost of a bad token.
	MaxTokenKeys = 4
)

// ServerConfig configures the server side of the handshake.
type ServerConfig struct {
	// ProtocolID must equal the token's protocol id.
	ProtocolID uint64
	// Addr is this server's public address as the backend lists it in tokens
	// (not the wildcard it listens on). Required.
	Addr netip.AddrPort
	// CookieRotation is the cookie secret's lifetime: a cookie verifies in the
	// period it was minted in and the next, so for 1–2 rotations. Long enough for
	// a slow client's retry, short enough that a captured cookie soon dies.
	// [MinCookieRotation, MaxCookieRotation], default 30 s.
	CookieRotation time.Duration
	// GuardCapacity is the replay guard's size: at most this many tokens that
	// have opened a session and not yet expired. Memory is about 256 bytes per
	// slot (measured), allocated up front: 4 MiB at the default.
	// [MinGuardCapacity, MaxGuardCapacity], default 16384.
	GuardCapacity int
	// OtherKeys are token keys accepted besides the server's own during a
	// key rotation (docs/operations.md, Rotating the token key): a token
	// is opened under the own key first, then under each of these in
	// order. At most MaxTokenKeys-1, none equal to another or to the own
	// key. Empty outside a rotation.
	OtherKeys [][KeySize]byte
}

// DefaultServerConfig returns the defaults; Addr (and usually ProtocolID) must
// still be set.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{CookieRotation: DefaultCookieRotation, GuardCapacity: DefaultGuardCapacity}
}

// Validate reports the first field out of range, wrapped around ErrConfig.
func (c ServerConfig) Validate() error {
	switch {
	case !c.Addr.IsValid() || c.Addr.Port() == 0 || c.Addr.Addr().IsUnspecified():
		return fmt.Errorf("%w: Addr %v must be the concrete public address and port", ErrConfig, c.Addr)
	case c.CookieRotation < MinCookieRotation || c.CookieRotation > MaxCookieRotation:
		return fmt.Errorf("%w: CookieRotation %v outside [%v, %v]", ErrConfig, c.CookieRotation, MinCookieRotation, MaxCookieRotation)
	case c.GuardCapacity < MinGuardCapacity || c.GuardCapacity > MaxGuardCapacity:
		return fmt.Errorf("%w: GuardCapacity %d outside [%d, %d]", ErrConfig, c.GuardCapacity, MinGuardCapacity, MaxGuardCapacity)
	case len(c.OtherKeys) > MaxTokenKeys-1:
		return fmt.Errorf("%w: %d other token keys, at most %d", ErrConfig, len(c.OtherKeys), MaxTokenKeys-1)
	}
	return nil
}

// ServerStats counts what Handle did with each packet.
type ServerStats struct {
	Garbage    uint64 // refused by Classify: wrong first byte or length
	Unexpected uint64 // a valid kind the server does not take here (route it elsewhere)
	Malformed  uint64 // right kind and size, non-canonical fields: dropped silently
	Challenges uint64 // Challenge replies sent
	BadCookies uint64 // challenge responses whose cookie did not verify (answered with a fresh Challenge)
	Granted    uint64 // sessions granted
	Retries    uint64 // requests for a pending session from its own address: same Accepted again
	// GrantedByKey splits Granted by the key that opened the token: [0]
	// the server's own, [i] ServerConfig.OtherKeys[i-1]. A rotation's old
	// key may go once its count stops rising.
	GrantedByKey [MaxTokenKeys]uint64
	Denied       [numReasons]uint64
}

// Grant is a session the server granted: the gateway allocates the connection
// from it (Grant.Session) and sends the Accepted reply Handle returned. The
// token's own keys are wiped; only the derived session keys remain.
type Grant struct {
	ID     ConnID
	Addr   netip.AddrPort // the client's source address (not yet proven under LoadNormal)
	Claims Claims         // player id, user data, timeout, token id and expiry
	Keys   SessionKeys
	// Key is the token key that opened the token: 0 the server's own, i
	// ServerConfig.OtherKeys[i-1].
	Key   int
	taken bool
}

// Session returns the server end of the granted session, in StatePending until
// the client's first authenticated packet. It may be called once: a second
// sending Protector under the same key would reuse nonces.
func (g *Grant) Session() (*Session, error) {
	if g.taken {
		return nil, fmt.Errorf("%w: Session already taken", ErrUnexpected)
	}
	s, err := newSession(RoleServer, g.ID, g.Keys, g.Addr)
	if err != nil {
		return nil, err
	}
	g.taken = true
	return s, nil
}

// Server answers connect requests statelessly until it grants a session: it
// checks tokens, mints and verifies cookies, and guards against token reuse.
// It never sends a reply larger than the request that caused it and never
// reads the clock: now is the server's wall clock (token expiry is written in
// the backend's Unix seconds), passed in; a clock that steps back is held at
// the newest time seen, so neither cookies nor expired tokens come back.
// Randomness (cookie secrets, connection ids) comes from the injected reader.
//
// Not safe for concurrent use; the gateway owns it.
type Server struct {
	cfg   ServerConfig
	addr  netip.AddrPort
	token []cipher.AEAD // the own key's first, then OtherKeys'
	rand  io.Reader
	start int64
	now   time.Time
	jar   cookieJar
	guard *ReplayGuard
	plain [privateSize]byte
	stats ServerStats
}

// NewServer returns a server for cfg holding the backend's token key. start is
// the wall-clock time this process started: tokens created before it are
// refused (ErrTokenTooOld), because a previous process may have used them and
// its replay guard died with it. rand is crypto/rand.Reader in production.
func NewServer(cfg ServerConfig, key [KeySize]byte, start time.Time, rand io.Reader) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tokens, err := tokenAEADs(key, cfg.OtherKeys)
	if err != nil {
		return nil, err
	}
	g, err := NewReplayGuard(cfg.GuardCapacity)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:   cfg,
		addr:  canonAddr(cfg.Addr),
		token: tokens,
		rand:  rand,
		start: start.Unix(),
		now:   start.Round(0),
		jar:   cookieJar{rotation: cfg.CookieRotation, rand: rand},
		guard: g,
	}
	if err := s.jar.rotate(start); err != nil {
		return nil, err
	}
	return s, nil
}

// SetKeys replaces the token keys (a rotation's keys reloaded): from the
// next request on, tokens are opened under key, then under each of others.
// The same rules as NewServer's (CheckKeys); on an error nothing changes.
// Sessions already granted and tokens in the replay guard are untouched.
func (s *Server) SetKeys(key [KeySize]byte, others [][KeySize]byte) error {
	tokens, err := tokenAEADs(key, others)
	if err != nil {
		return err
	}
	s.token = tokens
	return nil
}

// CheckKeys reports what NewServer and SetKeys would refuse in a set of
// token keys: more than MaxTokenKeys, or one key twice.
func CheckKeys(key [KeySize]byte, others [][KeySize]byte) error {
	if len(others) > MaxTokenKeys-1 {
		return fmt.Errorf("%w: %d other token keys, at most %d", ErrConfig, len(others), MaxTokenKeys-1)
	}
	keys := append([][KeySize]byte{key}, others...)
	for i, k := range keys {
		for j := range i {
			if k == keys[j] {
				return fmt.Errorf("%w: token key %d is key %d again", ErrConfig, i, j)
			}
		}
	}
	return nil
}

// tokenAEADs opens an AEAD per key: the own one's first.
func tokenAEADs(key [KeySize]byte, others [][KeySize]byte) ([]cipher.AEAD, error) {
	if err := CheckKeys(key, others); err != nil {
		return nil, err
	}
	tokens := make([]cipher.AEAD, 0, 1+len(others))
	for _, k := range append([][KeySize]byte{key}, others...) {
		aead, err := chacha20poly1305.NewX(k[:])
		if err != nil {
			return nil, err
		}
		tokens = append(tokens, aead)
	}
	return tokens, nil
}

// Stats returns the counters.
func (s *Server) Stats() ServerStats { return s.stats }

// Guard exposes the replay guard (for metrics: Len).
func (s *Server) Guard() *ReplayGuard { return s.guard }

// Consume tells the server that the session granted for token id was verified
// (its first authenticated packet arrived) or has gone: from now on the token
// admits nothing, and retries get Denied(TokenUsed) instead of a stale Accepted.
func (s *Server) Consume(id TokenID) { s.guard.Consume(id) }

// errBadCookie is returned with the fresh Challenge that answers a challenge
// response whose cookie did not verify (stale epoch, other address, forged).
var errBadCookie = fmt.Errorf("%w: cookie", ErrAuth)

// Handle processes one datagram from src that Classify named a connect request
// or challenge response (anything else: ErrGarbage or ErrUnexpected, nothing
// done) and appends the reply to dst. It returns the extended dst — a reply to
// send to src when longer than dst, at most ChallengeSize bytes and so always
// smaller than the RequestSize-byte request — a Grant when a new session was
// granted, and an error saying why a request was refused (also when a Denied
// or Challenge reply is returned).
//
// The checks run cheapest first and allocate nothing until a session is
// granted: kind and size; magic (none: silence) and version; canonical
// fields; protocol id; expiry; token age; this server listed; replay guard (a
// retry from the granted address gets the stored Accepted again); load; cookie
// (LoadHigh, or a challenge response); and only then the XChaCha20-Poly1305
// open of the sealed part.
func (s *Server) Handle(dst, pkt []byte, src netip.AddrPort, now time.Time, load Load) ([]byte, *Grant, error) {
	k, err := Classify(pkt)
	if err != nil {
		s.stats.Garbage++
		return dst, nil, err
	}
	if k != KindConnectRequest && k != KindChallengeResponse {
		s.stats.Unexpected++
		return dst, nil, ErrUnexpected
	}
	if !src.IsValid() || src.Port() == 0 {
		s.stats.Malformed++
		return dst, nil, ErrGarbage
	}
	src = canonAddr(src)
	// Compare wall clocks (Round(0) drops the monotonic reading): tokens and
	// cookies are written in wall time, and a wall clock that steps back while
	// the monotonic one runs on must still be held at its newest value.
	if now = now.Round(0); now.After(s.now) {
		s.now = now
	}
	now = s.now
	echo := TokenID(pkt[reqWire+hdrNonce : reqEchoEnd])

	req, err := ParseConnectRequest(pkt)
	switch {
	case err == errTokenMagic:
		// Not ghostwire (random bytes with a lucky first byte): no answer.
		s.stats.Malformed++
		return dst, nil, ErrGarbage
	case errors.Is(err, ErrWrongVersion):
		return s.deny(dst, ErrWrongVersion, &echo)
	case errors.Is(err, ErrBadToken):
		return s.deny(dst, ErrBadToken, &echo)
	case err != nil:
		s.stats.Malformed++
		return dst, nil, err
	}
	h := &req.Header
	switch {
	case h.ProtocolID != s.cfg.ProtocolID:
		return s.deny(dst, ErrWrongProtocol, &echo)
	case h.Expired(now):
		return s.deny(dst, ErrTokenExpired, &echo)
	case h.Created < s.start:
		return s.deny(dst, ErrTokenTooOld, &echo)
	case !h.Lists(s.addr):
		return s.deny(dst, ErrWrongServer, &echo)
	}
	switch e := s.guard.Lookup(h.ID, now); e.State {
	case GuardPending:
		if e.Addr != src {
			return s.deny(dst, ErrTokenInUse, &echo)
		}
		s.stats.Retries++
		return append(dst, e.Accepted[:]...), nil, nil
	case GuardConsumed:
		return s.deny(dst, ErrTokenUsed, &echo)
	}
	if load >= LoadFull {
		return s.deny(dst, ErrServerFull, &echo)
	}
	if k == KindChallengeResponse {
		ok, err := s.jar.verify(now, &req.Cookie, src, &h.ID)
		if err != nil {
			return dst, nil, err
		}
		if !ok {
			s.stats.BadCookies++
			dst, _, err = s.challenge(dst, now, src, &h.ID)
			if err != nil {
				return dst, nil, err
			}
			return dst, nil, errBadCookie
		}
	} else if load == LoadHigh {
		return s.challenge(dst, now, src, &h.ID)
	}

	c := Claims{TokenHeader: *h}
	key := 0
	for ; key < len(s.token); key++ {
		if err = openPrivate(s.token[key], req.Wire, s.plain[:0], &c); err != ErrBadToken {
			break // opened (nil), or opened and malformed: the key is right
		}
	}
	if err != nil {
		return s.deny(dst, ErrBadToken, &echo)
	}
	id, err := s.newConnID()
	if err == nil {
		entry := GuardEntry{Addr: src, Expires: h.Expires}
		ak := acceptKey(&c.ServerToClientKey, s.addr)
		_, err = appendAccepted(entry.Accepted[:0], &ak, id, &h.ID)
		clear(ak[:])
		if err == nil {
			err = s.guard.Insert(h.ID, entry, now)
		}
		if err == nil {
			g := &Grant{ID: id, Addr: src, Keys: DeriveSessionKeys(&c.ClientToServerKey, &c.ServerToClientKey, s.addr, id), Key: key}
			clear(c.ClientToServerKey[:])
			clear(c.ServerToClientKey[:])
			g.Claims = c
			s.stats.Granted++
			s.stats.GrantedByKey[key]++
			return append(dst, entry.Accepted[:]...), g, nil
		}
	}
	clear(c.ClientToServerKey[:])
	clear(c.ServerToClientKey[:])
	if errors.Is(err, ErrGuardFull) {
		return s.deny(dst, ErrGuardFull, &echo)
	}
	return dst, nil, err
}

func (s *Server) deny(dst []byte, why error, id *TokenID) ([]byte, *Grant, error) {
	r := reasonFor(why)
	s.stats.Denied[r]++
	return AppendDenied(dst, r, *id), nil, why
}

func (s *Server) challenge(dst []byte, now time.Time, src netip.AddrPort, id *TokenID) ([]byte, *Grant, error) {
	c, err := s.jar.mint(now, src, id)
	if err != nil {
		return dst, nil, err
	}
	s.stats.Challenges++
	return appendChallenge(dst, id, c), nil, nil
}

// newConnID draws a nonzero connection id.
func (s *Server) newConnID() (ConnID, error) {
	var id ConnID
	for range 4 {
		if _, err := io.ReadFull(s.rand, id[:]); err != nil {
			return id, fmt.Errorf("%w: connection id: %v", ErrRand, err)
		}
		if !id.IsZero() {
			return id, nil
		}
	}
	return id, fmt.Errorf("%w: connection id: zero four times", ErrRand)
}
