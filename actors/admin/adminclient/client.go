// Package adminclient calls the admin API that every zoned serves over NATS
// (package actors/admin): the subjects, the credentials file, and a Call
// that turns the service's error headers and NATS refusals into errors an
// operator can act on. zonectl links this package, not the zone server.
package adminclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
)

// ServiceName is the NATS micro service name (`nats micro ls` shows it).
const ServiceName = "ghostwire_admin"

// Prefix is the first token of every admin subject; NATS permissions give
// it to admins (publish) and nodes (subscribe) only.
const Prefix = "gwadmin"

// Operations. Each is served cluster-wide on Prefix.<op> (one node in a
// queue group answers, fanning out to the others) and, except the
// cluster-only ones, per node on Prefix.node.<node>.<op>.
const (
	OpNodes   = "nodes"
	OpZones   = "zones"
	OpPlayers = "players"
	OpPlayer  = "player"
	OpMove    = "move"
	OpKick    = "kick"
	OpDrain   = "drain"
	OpStats   = "stats"
	// OpMoveZone hands a zone to another node (zone migration).
	OpMoveZone = "move_zone"
)

// Subject is the cluster-wide subject of op.
func Subject(op string) string { return Prefix + "." + op }

// NodeSubject is node's own subject for op.
func NodeSubject(node, op string) string { return Prefix + ".node." + node + "." + op }

// Error codes the service answers with (Nats-Service-Error-Code).
const (
	CodeBadRequest  = "400"
	CodeNotFound    = "404"
	CodeUnavailable = "503"
	CodeInternal    = "500"
)

// CallerHeader names who asked for a mutating call (zonectl: user@host);
// the serving node logs it with the NATS user the credentials belong to.
const CallerHeader = "Ghostwire-Caller"

// Error is a refusal from the admin service.
type Error struct {
	Code        string
	Description string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (code %s)", e.Description, e.Code)
}

// NotFound reports whether err is the service saying the player, zone or
// node does not exist.
func NotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeNotFound
}

// ErrNoService: nothing serves the admin API on this NATS.
var ErrNoService = errors.New("adminclient: no admin service answered (is a zoned connected to this NATS?)")

// ErrPermission: NATS refused the request for these credentials.
var ErrPermission = errors.New("adminclient: NATS refused the request: these credentials may not call the admin API (use admin credentials)")

// Client is a NATS connection used for admin calls. Safe for concurrent
// use.
type Client struct {
	NC     *nats.Conn
	Caller string

	mu     sync.Mutex
	denied string // the last permissions violation NATS reported
}

// Connect dials NATS at url with the credentials in credsFile ("" for
// none) and returns a client. The connection does not reconnect: a CLI
// call either works now or says why.
func Connect(ctx context.Context, url, credsFile, caller string) (*Client, error) {
	c := &Client{Caller: caller}
	opts := []nats.Option{nats.Name("zonectl"), nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				c.mu.Lock()
				c.denied = err.Error()
				c.mu.Unlock()
			}
		})}
	if dl, ok := ctx.Deadline(); ok {
		opts = append(opts, nats.Timeout(timeUntil(dl)))
	}
	if credsFile != "" {
		o, err := CredsOption(credsFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, o)
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		where := Redact(url)
		if errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization") {
			if credsFile == "" {
				return nil, fmt.Errorf("NATS at %s wants credentials: pass admin credentials with --creds FILE or GHOSTWIRE_CREDS (a dev zoned writes DATA/admin.creds): %w", where, err)
			}
			return nil, fmt.Errorf("NATS at %s refused the credentials in %s: %w", where, credsFile, err)
		}
		return nil, fmt.Errorf("cannot reach NATS at %s: %w (is zoned running there? point --nats at its NATS)", where, err)
	}
	c.NC = nc
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() { c.NC.Close() }

// Call sends req to subject and decodes the answer into resp.
func (c *Client) Call(ctx context.Context, subject string, req, resp proto.Message) error {
	b, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	return c.CallRaw(ctx, subject, b, resp)
}

// CallRaw is Call with the request already encoded (or not a request at
// all: tests send garbage).
func (c *Client) CallRaw(ctx context.Context, subject string, data []byte, resp proto.Message) error {
	m := nats.NewMsg(subject)
	m.Data = data
	if c.Caller != "" {
		m.Header.Set(CallerHeader, c.Caller)
	}
	reply, err := c.NC.RequestMsgWithContext(ctx, m)
	if err != nil {
		c.mu.Lock()
		denied := c.denied
		c.mu.Unlock()
		switch {
		case denied != "":
			return fmt.Errorf("%w: %s", ErrPermission, denied)
		case errors.Is(err, nats.ErrNoResponders):
			return fmt.Errorf("%s: %w", subject, ErrNoService)
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
			return fmt.Errorf("%s: no answer in time (raise --timeout; a node may be overloaded): %w", subject, err)
		}
		return fmt.Errorf("%s: %w", subject, err)
	}
	if code := reply.Header.Get("Nats-Service-Error-Code"); code != "" {
		return &Error{Code: code, Description: reply.Header.Get("Nats-Service-Error")}
	}
	if err := proto.Unmarshal(reply.Data, resp); err != nil {
		return fmt.Errorf("%s: undecodable answer: %w", subject, err)
	}
	return nil
}
