package session

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/ghostwire/ghostwire/replication/handshake"
)

var (
	// ErrConfig is wrapped by every error a Validate method returns.
	ErrConfig = errors.New("session: invalid config")
	// ErrProtocol: a packet authenticated (so the peer sent it) but its
	// sections do not decode. A genuine peer never does that; the receiving end
	// starts a disconnect with handshake.ReasonProtocolError.
	ErrProtocol = errors.New("session: peer broke the protocol")
	// ErrNotConnected: the packet or call needs a connected session.
	ErrNotConnected = errors.New("session: not connected")
	// ErrClosed: the session is closed; it sends and accepts nothing more.
	ErrClosed = errors.New("session: closed")
	// ErrConnectTimeout: the client got no Accepted before ConnectTimeout or
	// the token's expiry.
	ErrConnectTimeout = errors.New("session: connect timed out")
	// ErrTimeout: nothing authenticated arrived for the connection's timeout.
	ErrTimeout = errors.New("session: connection timed out")
)

// ErrForgotten: the server answered the connection's packets with
// NoConnection naming it, and nothing authenticated, for
// ClientConfig.ForgottenAfter — it restarted, or dropped the session. It
// is an ErrTimeout (errors.Is), come early: whoever reconnects on a
// timeout reconnects on it.
var ErrForgotten = fmt.Errorf("session: the server no longer knows this connection: %w", ErrTimeout)

// DeniedError is the client's Err when the server refused the connect token.
// errors.Is sees handshake.ErrDenied and the reason's own error
// (handshake.ErrTokenExpired, handshake.ErrServerFull, ...).
type DeniedError struct {
	Reason handshake.Reason
	Err    error // as returned by handshake.Client.HandleReply
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("session: connection denied: %v", e.Reason)
}

func (e *DeniedError) Unwrap() error { return e.Err }

// DisconnectError is Err when the peer closed the connection with a
// Disconnect (ClientQuit, ServerShutdown, Kicked, ...).
type DisconnectError struct {
	Reason handshake.Reason
}

func (e *DisconnectError) Error() string {
	return fmt.Sprintf("session: disconnected by peer: %v", e.Reason)
}

// RedirectError is Err when the server moved the client to another server
// (a Redirect, docs/protocol.md §7.19): connect a new Client to Server with
// Token to continue as the same player. Token is a whole connect token,
// short-lived and good for one session.
type RedirectError struct {
	Server netip.AddrPort
	Token  []byte
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("session: redirected to %v", e.Server)
}
