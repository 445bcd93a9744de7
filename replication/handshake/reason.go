package handshake

import "fmt"

// Reason says why a connection was refused (Denied) or ended (Disconnect). It
// travels as one byte; values not listed here are refused on decode, so a
// future reason needs a new protocol version.
type Reason uint8

// Denied reasons: the server refused a connect request. Each maps to the
// sentinel error of the same name (Reason.Err).
const (
	ReasonNone          Reason = 0  // never sent
	ReasonServerFull    Reason = 1  // ErrServerFull: try another server or later
	ReasonWrongVersion  Reason = 2  // ErrWrongVersion: update the client
	ReasonWrongProtocol Reason = 3  // ErrWrongProtocol: token for another game or build
	ReasonBadToken      Reason = 4  // ErrBadToken: the token does not open under this server's key
	ReasonTokenExpired  Reason = 5  // ErrTokenExpired: fetch a new token
	ReasonWrongServer   Reason = 6  // ErrWrongServer: the token does not list this server
	ReasonTokenTooOld   Reason = 7  // ErrTokenTooOld: the server restarted since the token was made
	ReasonTokenInUse    Reason = 8  // ErrTokenInUse: a handshake for it is pending elsewhere
	ReasonTokenUsed     Reason = 9  // ErrTokenUsed: the token already opened its session
	ReasonBusy          Reason = 10 // ErrGuardFull: too many live tokens; retry shortly
)

// Disconnect reasons: a connected peer ends the session.
const (
	ReasonClientQuit     Reason = 32 // the player left
	ReasonServerShutdown Reason = 33 // the server is stopping (drain failed or was skipped)
	ReasonTimeout        Reason = 34 // nothing heard for the token's timeout
	ReasonKicked         Reason = 35 // an operator or the game removed the player
	ReasonProtocolError  Reason = 36 // the peer broke the protocol
	ReasonDuplicate      Reason = 37 // the player connected again elsewhere; this session is superseded
	// ReasonRedirected: the client follows the server's Redirect (its
	// Disconnect is the Redirect's acknowledgement). Only a client sends
	// it, and only to a server that sent a Redirect, so no older peer
	// ever receives it.
	ReasonRedirected Reason = 38
)

const numReasons = 39

// reasonInfo is read-only: names and denial errors, indexed by Reason.
var reasonInfo = [numReasons]struct {
	name string
	err  error
}{
	ReasonServerFull:     {"server full", ErrServerFull},
	ReasonWrongVersion:   {"wrong version", ErrWrongVersion},
	ReasonWrongProtocol:  {"wrong protocol", ErrWrongProtocol},
	ReasonBadToken:       {"bad token", ErrBadToken},
	ReasonTokenExpired:   {"token expired", ErrTokenExpired},
	ReasonWrongServer:    {"wrong server", ErrWrongServer},
	ReasonTokenTooOld:    {"token older than server", ErrTokenTooOld},
	ReasonTokenInUse:     {"token in use", ErrTokenInUse},
	ReasonTokenUsed:      {"token used", ErrTokenUsed},
	ReasonBusy:           {"busy", ErrGuardFull},
	ReasonClientQuit:     {"client quit", nil},
	ReasonServerShutdown: {"server shutdown", nil},
	ReasonTimeout:        {"timeout", nil},
	ReasonKicked:         {"kicked", nil},
	ReasonProtocolError:  {"protocol error", nil},
	ReasonDuplicate:      {"duplicate session", nil},
	ReasonRedirected:     {"redirected", nil},
}

func (r Reason) String() string {
	if r.Valid() {
		return reasonInfo[r].name
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Valid reports whether r is a reason this version sends.
func (r Reason) Valid() bool { return r < numReasons && reasonInfo[r].name != "" }

// IsDenial reports whether r is sent in Denied (as opposed to Disconnect).
func (r Reason) IsDenial() bool { return r >= ReasonServerFull && r <= ReasonBusy }

// IsDisconnect reports whether r is sent in Disconnect.
func (r Reason) IsDisconnect() bool { return r >= ReasonClientQuit && r <= ReasonRedirected }

// Err returns the sentinel error a denial reason stands for (nil for
// disconnect reasons and invalid values).
func (r Reason) Err() error {
	if r.Valid() {
		return reasonInfo[r].err
	}
	return nil
}

// reasonFor maps a token verdict to the reason the Denied packet carries.
func reasonFor(err error) Reason {
	switch err {
	case ErrServerFull:
		return ReasonServerFull
	case ErrWrongVersion:
		return ReasonWrongVersion
	case ErrWrongProtocol:
		return ReasonWrongProtocol
	case ErrTokenExpired:
		return ReasonTokenExpired
	case ErrWrongServer:
		return ReasonWrongServer
	case ErrTokenTooOld:
		return ReasonTokenTooOld
	case ErrTokenInUse:
		return ReasonTokenInUse
	case ErrTokenUsed:
		return ReasonTokenUsed
	case ErrGuardFull:
		return ReasonBusy
	}
	return ReasonBadToken
}
