package handshake

import (
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Role says which end of a session this is.
type Role uint8

const (
	RoleClient Role = iota
	RoleServer
)

func (r Role) String() string {
	if r == RoleClient {
		return "client"
	}
	return "server"
}

// State is a connection's place in its lifecycle:
//
//	pending → challenged → connected → draining → closed
//
// The client walks all of it: pending (sending connect requests), challenged
// (sending challenge responses; skipped in the one-round-trip path),
// connected (Accepted verified). A server session starts pending — granted,
// client address not yet proven — and becomes connected with the first
// authenticated packet; "challenged" has no server state at all (the cookie
// is stateless). Either end goes draining when it sends a Disconnect (it then
// sends only redundant copies of it) and closed when it receives one, times
// out, or finishes draining (Close).
type State uint8

const (
	StatePending State = iota
	StateChallenged
	StateConnected
	StateDraining
	StateClosed
)

func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StateChallenged:
		return "challenged"
	case StateConnected:
		return "connected"
	case StateDraining:
		return "draining"
	case StateClosed:
		return "closed"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Session is one end of an established session's packet protection: a sending
// Protector, a receiving Protector, the receive ReplayWindow, the peer address
// and the lifecycle state. It is the pure core the connection actor drives.
//
// Address policy (checklist CL-11, NAT rebinding): on the server, a packet that
// authenticates from an address other than the session's moves the session to
// that address if its sequence number is the newest seen, so an old packet
// replayed from elsewhere cannot pull the session back. Open reports the move;
// the gateway updates its routing. The client never moves.
//
// The zero Session is not usable; Grant.Session and Client.Session make one.
// Not safe for concurrent use; the connection actor owns it.
type Session struct {
	role   Role
	state  State
	opened bool // a packet was authenticated
	reason Reason
	// The Disconnect's one-byte payload, sealed and opened in place: it
	// reaches the AEAD through an interface, so it lives here (the
	// headers are copied into the associated data: the call's own).
	discPT  [1]byte
	rxPT    [1]byte
	recvDir Direction
	send    protector // by value: next to the state and window every packet reads
	// recv is the receiving direction's AEAD: a receiving protector keeps
	// no state (its last and sealed were never used), so only the AEAD,
	// with recvDir beside the flags: 16 bytes of every Session.
	recv cipher.AEAD
	// id before window: with the flags and send it fills the Session's
	// first cache line (a 128-byte object starts on one), which is all a
	// sealed packet reads (SealWith); a received one reads the second
	// too (the window, the address). By a connection's next packet its
	// Session has left the cache on a loaded server, and each line is a
	// miss.
	id     ConnID // the nonce and associated data are built in the caller's Scratch
	window ReplayWindow
	addr   netip.AddrPort
}

func newSession(role Role, id ConnID, keys SessionKeys, addr netip.AddrPort) (*Session, error) {
	sendKey, sendDir, recvKey, recvDir := keys.ClientToServer, ClientToServer, keys.ServerToClient, ServerToClient
	state := StateConnected
	if role == RoleServer {
		sendKey, sendDir, recvKey, recvDir = recvKey, recvDir, sendKey, sendDir
		state = StatePending
	}
	s := &Session{role: role, state: state, addr: canonAddr(addr), id: id}
	if err := s.send.init(sendKey, sendDir); err != nil {
		return nil, err
	}
	var recv protector
	if err := recv.init(recvKey, recvDir); err != nil {
		return nil, err
	}
	s.recv, s.recvDir = recv.aead, recvDir
	return s, nil
}

func (s *Session) ID() ConnID           { return s.id }
func (s *Session) Role() Role           { return s.role }
func (s *Session) State() State         { return s.state }
func (s *Session) Addr() netip.AddrPort { return s.addr }

// Reason is why the session closed: the reason of the Disconnect received or
// sent, or the one given to Close. ReasonNone while open.
func (s *Session) Reason() Reason { return s.reason }

// NextSeq is the lowest sequence number Seal accepts.
func (s *Session) NextSeq() uint64 { return s.send.nextSeq() }

// Seal protects one outgoing packet (see Protector.Seal): header in the clear,
// payload encrypted, tag appended to dst. A server session refuses while the
// client's address is unproven (ErrUnverified); a draining or closed one
// refuses (ErrClosed).
func (s *Session) Seal(dst, header, payload []byte, seq uint64) ([]byte, error) {
	sc := scratches.Get()
	defer scratches.Put(sc)
	return s.SealWith(sc, dst, header, payload, seq)
}

// SealWith is Seal building the nonce and associated data in sc, the
// caller's (one per goroutine: a shard's connections share it).
func (s *Session) SealWith(sc *Scratch, dst, header, payload []byte, seq uint64) ([]byte, error) {
	switch {
	case s.state >= StateDraining:
		return dst, ErrClosed
	case s.state == StatePending:
		return dst, ErrUnverified
	}
	return s.send.seal(&sc.sc, &s.id, dst, header, payload, seq)
}

// Open authenticates one incoming short-form packet (header, ciphertext ‖ tag,
// the sequence number reconstructed from the header) received from from, and
// appends the payload to dst. The replay window is checked before and
// committed after the AEAD. moved reports that the server session moved to
// from. A pending server session becomes connected.
func (s *Session) Open(dst, header, ciphertext []byte, seq uint64, from netip.AddrPort) (pt []byte, moved bool, err error) {
	sc := scratches.Get()
	defer scratches.Put(sc)
	return s.OpenWith(sc, dst, header, ciphertext, seq, from)
}

// OpenWith is Open building the nonce and associated data in sc, the
// caller's (one per goroutine: a shard's connections share it).
func (s *Session) OpenWith(sc *Scratch, dst, header, ciphertext []byte, seq uint64, from netip.AddrPort) (pt []byte, moved bool, err error) {
	if s.state == StateClosed {
		return dst, false, ErrClosed
	}
	if err := s.window.Check(seq); err != nil {
		return dst, false, err
	}
	newest := !s.opened || seq > s.window.Newest()
	pt, err = openPacket(s.recv, s.recvDir, &sc.sc, &s.id, dst, header, ciphertext, seq)
	if err != nil {
		return dst, false, err
	}
	s.window.commit(seq) // Check passed just above, and nothing ran in between
	s.opened = true
	return pt, s.authenticated(from, newest), nil
}

// authenticated applies the address policy after a packet from from verified.
func (s *Session) authenticated(from netip.AddrPort, newest bool) (moved bool) {
	if s.role != RoleServer {
		return false
	}
	if s.state == StatePending {
		s.state = StateConnected
	}
	if from == s.addr {
		return false // the common case: s.addr is canonical, so from is too
	}
	if from = canonAddr(from); from.IsValid() && from != s.addr && newest {
		s.addr = from
		return true
	}
	return false
}

// AppendDisconnect appends one Disconnect packet carrying r (a disconnect
// reason) and moves the session to draining. Call it several times and send
// every copy: each takes a fresh sequence number (its own nonce), so the
// redundant copies are distinct packets and at least one should arrive.
//
// Layout: kind, connection id, sequence number (8, little-endian), the reason
// encrypted (1), tag; associated data = connection id ‖ kind ‖ sequence number.
func (s *Session) AppendDisconnect(dst []byte, r Reason) ([]byte, error) {
	switch {
	case !r.IsDisconnect():
		return dst, fmt.Errorf("%w: %v is not a disconnect reason", ErrConfig, r)
	case s.state == StateClosed:
		return dst, ErrClosed
	case s.state == StatePending:
		return dst, ErrUnverified
	}
	seq := s.send.nextSeq()
	var hdr [1 + 8]byte
	hdr[0] = KindDisconnect.ControlByte()
	binary.LittleEndian.PutUint64(hdr[1:], seq)
	s.discPT[0] = byte(r)
	n := len(dst)
	dst = append(dst, hdr[0])
	dst = append(dst, s.id[:]...)
	dst = append(dst, hdr[1:]...)
	sc := scratches.Get()
	out, err := s.send.seal(&sc.sc, &s.id, dst, hdr[:], s.discPT[:], seq)
	scratches.Put(sc)
	if err != nil {
		return dst[:n], err
	}
	s.state, s.reason = StateDraining, r
	return out, nil
}

var errDisconnectReason = &FieldError{"disconnect", "reason", ErrMalformed}

// OpenDisconnect authenticates a Disconnect packet and closes the session with
// its reason. Copies after the first fail with ErrClosed; drop them. It never
// moves the session's address.
func (s *Session) OpenDisconnect(pkt []byte) (Reason, error) {
	id, err := ParseDisconnectID(pkt)
	if err != nil {
		return 0, err
	}
	if id != s.ID() {
		return 0, ErrWrongConn
	}
	if s.state == StateClosed {
		return 0, ErrClosed
	}
	seq := binary.LittleEndian.Uint64(pkt[1+ConnIDSize:])
	if err := s.window.Check(seq); err != nil {
		return 0, err
	}
	var hdr [1 + 8]byte
	hdr[0] = pkt[0]
	copy(hdr[1:], pkt[1+ConnIDSize:1+ConnIDSize+8])
	sc := scratches.Get()
	_, err = openPacket(s.recv, s.recvDir, &sc.sc, &s.id, s.rxPT[:0], hdr[:], pkt[1+ConnIDSize+8:], seq)
	scratches.Put(sc)
	if err != nil {
		return 0, err
	}
	r := Reason(s.rxPT[0])
	if !r.IsDisconnect() {
		return 0, errDisconnectReason
	}
	if err := s.window.Commit(seq); err != nil {
		return 0, err
	}
	s.opened = true
	s.state, s.reason = StateClosed, r
	return r, nil
}

// Close ends the session locally (draining finished, timeout...): it seals and
// opens nothing more. r is recorded as the reason if none is yet.
func (s *Session) Close(r Reason) {
	if s.reason == ReasonNone {
		s.reason = r
	}
	s.state = StateClosed
}

// redirectPlainSize is a Redirect's encrypted part: the new server's
// address and the connect token for it.
const redirectPlainSize = addrSize + TokenSize

// AppendRedirect appends one Redirect packet telling the client to
// reconnect to server with token (a whole connect token, TokenSize bytes,
// that lists server). It leaves the session connected: the client's
// Disconnect (ReasonRedirected) is its acknowledgement, and until it arrives
// the server sends copies, each with a fresh sequence number like the
// Disconnect's. Only a server session sends it.
//
// Layout: kind, connection id, sequence number (8, little-endian), then
// address (19) ‖ token (619) encrypted, tag; associated data = connection id
// ‖ kind ‖ sequence number (docs/protocol.md §7.19).
func (s *Session) AppendRedirect(dst []byte, server netip.AddrPort, token []byte) ([]byte, error) {
	switch {
	case s.role != RoleServer:
		return dst, fmt.Errorf("%w: only a server redirects", ErrConfig)
	case len(token) != TokenSize:
		return dst, fmt.Errorf("%w: redirect token of %d bytes, want %d", ErrConfig, len(token), TokenSize)
	case !server.IsValid() || server.Port() == 0 || server.Addr().IsUnspecified():
		return dst, fmt.Errorf("%w: redirect address %v", ErrConfig, server)
	case s.state >= StateDraining:
		return dst, ErrClosed
	case s.state == StatePending:
		return dst, ErrUnverified
	}
	seq := s.send.nextSeq()
	var hdr [1 + 8]byte
	hdr[0] = KindRedirect.ControlByte()
	binary.LittleEndian.PutUint64(hdr[1:], seq)
	var pt [redirectPlainSize]byte
	putAddr(pt[:], canonAddr(server))
	copy(pt[addrSize:], token)
	n := len(dst)
	dst = append(dst, hdr[0])
	dst = append(dst, s.id[:]...)
	dst = append(dst, hdr[1:]...)
	sc := scratches.Get()
	out, err := s.send.seal(&sc.sc, &s.id, dst, hdr[:], pt[:], seq)
	scratches.Put(sc)
	clear(pt[:])
	if err != nil {
		return dst[:n], err
	}
	return out, nil
}

// ParseRedirectID returns the connection id a Redirect packet names, for
// routing; Session.OpenRedirect authenticates it.
func ParseRedirectID(pkt []byte) (ConnID, error) {
	var id ConnID
	if k, err := Classify(pkt); err != nil {
		return id, err
	} else if k != KindRedirect {
		return id, ErrUnexpected
	}
	copy(id[:], pkt[1:1+ConnIDSize])
	return id, nil
}

var (
	errRedirectAddr  = &FieldError{"redirect", "address", ErrMalformed}
	errRedirectToken = &FieldError{"redirect", "token", ErrMalformed}
)

// OpenRedirect authenticates a Redirect packet (a client session only) and
// returns the server to reconnect to and its connect token (a new slice).
// The token's header must be canonical and list that server. It changes
// nothing but the replay window: the caller closes the session with a
// Disconnect (ReasonRedirected). Later copies fail with ErrDuplicate (the
// same packet again) or succeed again (another copy): take the first.
func (s *Session) OpenRedirect(pkt []byte) (netip.AddrPort, []byte, error) {
	id, err := ParseRedirectID(pkt)
	if err != nil {
		return netip.AddrPort{}, nil, err
	}
	switch {
	case s.role != RoleClient:
		return netip.AddrPort{}, nil, ErrUnexpected
	case id != s.ID():
		return netip.AddrPort{}, nil, ErrWrongConn
	case s.state == StateClosed:
		return netip.AddrPort{}, nil, ErrClosed
	}
	seq := binary.LittleEndian.Uint64(pkt[1+ConnIDSize:])
	if err := s.window.Check(seq); err != nil {
		return netip.AddrPort{}, nil, err
	}
	var hdr [1 + 8]byte
	hdr[0] = pkt[0]
	copy(hdr[1:], pkt[1+ConnIDSize:1+ConnIDSize+8])
	var pt [redirectPlainSize]byte
	sc := scratches.Get()
	_, err = openPacket(s.recv, s.recvDir, &sc.sc, &s.id, pt[:0], hdr[:], pkt[1+ConnIDSize+8:], seq)
	scratches.Put(sc)
	if err != nil {
		return netip.AddrPort{}, nil, err
	}
	// Authenticated, so the server sent it; still refuse what a client
	// could not follow.
	server, ok := getAddr(pt[:addrSize])
	if !ok {
		return netip.AddrPort{}, nil, errRedirectAddr
	}
	tok, err := ParseToken(pt[addrSize:])
	if err != nil || !tok.Lists(server) {
		return netip.AddrPort{}, nil, errRedirectToken
	}
	if err := s.window.Commit(seq); err != nil {
		return netip.AddrPort{}, nil, err
	}
	s.opened = true
	return server, tok.Bytes(), nil
}
