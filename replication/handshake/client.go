package handshake

import (
	"fmt"
	"net/netip"
)

// Client is the client side of the handshake for one connect token and one
// server. It builds the packet to (re)send in its state and digests the
// server's replies; retransmission timing (resend every ~100 ms until the
// token's expiry or a timeout) belongs to the caller, which keeps the clock.
//
//	c, _ := handshake.NewClient(tok, server)
//	pkt, _ := c.AppendRequest(buf[:0])   // send; resend on a timer
//	err := c.HandleReply(reply)           // Challenge → challenged, Accepted → connected
//	s, _ := c.Session()                   // once connected: protect packets
//
// A token opens at most one session: after Denied, or when giving up, fetch a
// new token. The zero Client is not usable. Not safe for concurrent use.
type Client struct {
	tok    Token
	server netip.AddrPort
	state  State
	cookie Cookie
	id     ConnID
	reason Reason
	taken  bool // Session was called
}

// NewClient parses token and prepares to connect to server, which the token
// must list (ErrWrongServer). Check Token().Expired(now) before connecting.
func NewClient(token []byte, server netip.AddrPort) (*Client, error) {
	t, err := ParseToken(token)
	if err != nil {
		return nil, err
	}
	if !t.Lists(server) {
		return nil, ErrWrongServer
	}
	return &Client{tok: t, server: canonAddr(server)}, nil
}

// Token is the parsed token (its header: expiry, timeout, servers).
func (c *Client) Token() *Token { return &c.tok }

// Server is the address the client connects to.
func (c *Client) Server() netip.AddrPort { return c.server }

// State is pending (sending connect requests), challenged (sending challenge
// responses), connected, or closed (denied).
func (c *Client) State() State { return c.state }

// Reason is the denial reason once closed by a Denied packet.
func (c *Client) Reason() Reason { return c.reason }

// ConnID is the connection id from the Accepted packet (zero before).
func (c *Client) ConnID() ConnID { return c.id }

// AppendRequest appends the packet to send in the current state: a connect
// request while pending, a challenge response (carrying the latest cookie)
// while challenged. Both are RequestSize bytes. Resending the same packet is
// safe: the server's answer to a retry is the same.
func (c *Client) AppendRequest(dst []byte) ([]byte, error) {
	switch c.state {
	case StatePending:
		return appendRequest(dst, KindConnectRequest, c.tok.raw[:wireTokenSize], Cookie{}), nil
	case StateChallenged:
		return appendRequest(dst, KindChallengeResponse, c.tok.raw[:wireTokenSize], c.cookie), nil
	}
	return dst, fmt.Errorf("%w: no request to send when %v", ErrUnexpected, c.state)
}

// HandleReply digests one packet from the server during the handshake:
//   - Challenge for this token: store the cookie, go challenged (a newer
//     challenge replaces the cookie).
//   - Accepted whose tag verifies under this token's key: go connected. A
//     duplicate of the same Accepted afterwards is ignored (nil).
//   - Denied for this token: go closed; the error wraps ErrDenied and the
//     reason's own error (errors.Is(err, ErrTokenExpired)...).
//
// Anything else, or a reply for another token, returns an error and changes
// nothing. Denied and Challenge are not authenticated; binding them to the
// token id limits forging them to attackers who see the request.
func (c *Client) HandleReply(pkt []byte) error {
	k, err := Classify(pkt)
	if err != nil {
		return err
	}
	handshaking := c.state == StatePending || c.state == StateChallenged
	switch k {
	case KindChallenge:
		id, cookie, err := ParseChallenge(pkt)
		if err != nil {
			return err
		}
		if id != c.tok.ID {
			return ErrAuth
		}
		if !handshaking {
			return ErrUnexpected
		}
		c.cookie, c.state = cookie, StateChallenged
		return nil
	case KindAccepted:
		if c.state == StateClosed {
			return ErrUnexpected
		}
		k := acceptKey(&c.tok.ServerToClientKey, c.server)
		id, err := openAccepted(pkt, &k, &c.tok.ID)
		clear(k[:])
		if err != nil {
			return err
		}
		if c.state == StateConnected {
			if id == c.id {
				return nil // the server answered a retry
			}
			return ErrUnexpected
		}
		c.id, c.state = id, StateConnected
		return nil
	case KindDenied:
		r, id, err := ParseDenied(pkt)
		if err != nil {
			return err
		}
		if id != c.tok.ID {
			return ErrAuth
		}
		if !handshaking {
			return ErrUnexpected
		}
		c.state, c.reason = StateClosed, r
		return fmt.Errorf("%w: %w", ErrDenied, r.Err())
	}
	return ErrUnexpected
}

// OpenAccepted verifies an Accepted packet under tok's key for server and
// returns the connection id it grants, changing nothing. Many clients
// sharing one socket (a bot swarm) use it to find which of them an
// Accepted — the one reply that names neither connection nor token — is
// for, before handing it over (docs/protocol.md § 7.18.6).
func OpenAccepted(pkt []byte, tok *Token, server netip.AddrPort) (ConnID, error) {
	k := acceptKey(&tok.ServerToClientKey, server)
	defer clear(k[:])
	return openAccepted(pkt, &k, &tok.ID)
}

// Session returns the client end of the session once connected. It may be
// called once: a second sending Protector under the same key would reuse
// nonces.
func (c *Client) Session() (*Session, error) {
	if c.state != StateConnected {
		return nil, fmt.Errorf("%w: not connected (%v)", ErrUnexpected, c.state)
	}
	if c.taken {
		return nil, fmt.Errorf("%w: Session already taken", ErrUnexpected)
	}
	keys := DeriveSessionKeys(&c.tok.ClientToServerKey, &c.tok.ServerToClientKey, c.server, c.id)
	s, err := newSession(RoleClient, c.id, keys, c.server)
	if err != nil {
		return nil, err
	}
	c.taken = true
	return s, nil
}
