package handshake

import (
	"errors"
	"fmt"
)

// Rejections of a received packet. Every decoder and every Open returns one of
// these (possibly wrapped, with errors.Is seeing through); the caller drops the
// packet and counts the error. None of them changes protocol state.
var (
	// ErrGarbage: the first byte or the length does not match any ghostwire
	// packet. Decided before any crypto or allocation.
	ErrGarbage = errors.New("handshake: not a ghostwire packet")
	// ErrMalformed: the kind and length are right but a field is not canonical
	// (nonzero padding, unknown address family, length beyond its bound...).
	ErrMalformed = errors.New("handshake: malformed packet")
	// ErrUnexpected: a well-formed packet this end never accepts in its role or
	// state (a Challenge at the server, an Accepted after connecting...).
	ErrUnexpected = errors.New("handshake: unexpected packet")
	// ErrAuth: an AEAD tag or cookie did not verify: tampered, forged, or sealed
	// under other keys.
	ErrAuth = errors.New("handshake: message authentication failed")
	// ErrDuplicate: this sequence number was already accepted (replay).
	ErrDuplicate = errors.New("handshake: duplicate sequence")
	// ErrStale: the sequence number lies ReplayWindowSize or more below the
	// newest accepted one; it can no longer be told from a replay.
	ErrStale = errors.New("handshake: sequence below the replay window")
	// ErrWrongConn: a protected packet named a connection id this session does
	// not own.
	ErrWrongConn = errors.New("handshake: wrong connection id")
	// ErrClosed: the session is closed (or draining); it seals nothing but
	// Disconnect copies, and a closed one opens nothing.
	ErrClosed = errors.New("handshake: session closed")
	// ErrUnverified: a server session whose client address is not proven yet
	// sends nothing (the only reply it may cause is the Accepted, which
	// Server.Handle sends).
	ErrUnverified = errors.New("handshake: client address not verified yet")
)

// Token verdicts: why a connect token was refused. The server answers each with
// a Denied packet carrying the matching Reason; the client reports it.
var (
	ErrWrongVersion  = errors.New("handshake: wrong protocol version")
	ErrWrongProtocol = errors.New("handshake: wrong protocol id")
	ErrBadToken      = errors.New("handshake: invalid connect token")
	ErrTokenExpired  = errors.New("handshake: connect token expired")
	ErrWrongServer   = errors.New("handshake: connect token does not list this server")
	// ErrTokenTooOld: the token was created before this server process started,
	// so it may already have been used with a previous process whose replay
	// guard is gone (the restart rule, netcode GHSA-v29p-3vj4-vg4f).
	ErrTokenTooOld = errors.New("handshake: connect token created before the server started")
	// ErrTokenInUse: a handshake for this token is pending from another address.
	ErrTokenInUse = errors.New("handshake: connect token in use from another address")
	// ErrTokenUsed: the token already opened its one session.
	ErrTokenUsed = errors.New("handshake: connect token already used")
	// ErrServerFull: the server admits no new connection (Load == LoadFull).
	ErrServerFull = errors.New("handshake: server full")
	// ErrGuardFull: every replay guard slot holds an unexpired token; refusing is
	// the only answer that cannot reopen a used token.
	ErrGuardFull = errors.New("handshake: replay guard full")
	// ErrDenied is wrapped by the client when the server sent a Denied packet.
	ErrDenied = errors.New("handshake: connection denied")
)

// Send-side and configuration errors.
var (
	// ErrSeqReuse: Seal was asked for a sequence number not above the last one it
	// sealed. Sealing it would reuse an AEAD nonce.
	ErrSeqReuse = errors.New("handshake: sequence number not above the last sealed")
	// ErrTooLarge: a header or packet exceeds MaxPacketSize.
	ErrTooLarge = errors.New("handshake: packet too large")
	// ErrConfig is wrapped by every error a Validate method returns.
	ErrConfig = errors.New("handshake: invalid config")
	// ErrParams is wrapped by every error IssueToken returns for bad TokenParams.
	ErrParams = errors.New("handshake: invalid token params")
	// ErrRand: the injected randomness source failed.
	ErrRand = errors.New("handshake: randomness source failed")
)

// FieldError says which field of a packet was malformed. errors.Is sees through
// it to Err (ErrMalformed or ErrBadToken).
type FieldError struct {
	Packet string // "token", "connect request", ...
	Field  string // "servers[2].family", "user data length", ...
	Err    error
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("handshake: %s: field %s: %v", e.Packet, e.Field, e.Err)
}

func (e *FieldError) Unwrap() error { return e.Err }
