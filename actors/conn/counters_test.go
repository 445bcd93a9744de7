package conn

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/session"
)

// rejectionByIs is the reference: the errors.Is cascade Counters.count
// was, case after case.
func rejectionByIs(err error) rejection {
	switch {
	case errors.Is(err, session.ErrProtocol):
		return rejectProtocol
	case errors.Is(err, handshake.ErrAuth):
		return rejectAuth
	case errors.Is(err, handshake.ErrDuplicate), errors.Is(err, handshake.ErrStale),
		errors.Is(err, notify.ErrDuplicate), errors.Is(err, notify.ErrStale):
		return rejectReplayed
	case errors.Is(err, handshake.ErrWrongConn):
		return rejectWrongConn
	case errors.Is(err, handshake.ErrClosed), errors.Is(err, session.ErrClosed):
		return rejectAfterClose
	case errors.Is(err, handshake.ErrUnexpected), errors.Is(err, session.ErrNotConnected):
		return rejectUnexpected
	case errors.Is(err, handshake.ErrGarbage), errors.Is(err, handshake.ErrMalformed):
		return rejectGarbage
	}
	return rejectHeader
}

// isAuth is an error that says it is handshake.ErrAuth (an Is method):
// only errors.Is can tell.
type isAuth struct{}

func (isAuth) Error() string        { return "claims to be an auth failure" }
func (isAuth) Is(target error) bool { return target == handshake.ErrAuth }

// uncomparable is an error whose dynamic type cannot be compared with ==.
type uncomparable struct{ why []string }

func (u uncomparable) Error() string { return "uncomparable" }
func (u uncomparable) Unwrap() error { return notify.ErrStale }

// TestRejectionOfMatchesErrorsIs: the one walk of an error's chain files
// it where the errors.Is cascade did — every sentinel alone and wrapped
// (fmt's %w, two %w, the packages' field errors), two sentinels in one
// tree (the earlier case wins, wherever it sits), an Is method of its own
// (errors.Is decides), an uncomparable error, none at all.
func TestRejectionOfMatchesErrorsIs(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want rejection
	}{
		{"unknown sentinel", notify.ErrTooFar, rejectHeader},
		{"truncated header", &bitstream.ReadError{Field: "ack", Bit: 3, Err: io.ErrUnexpectedEOF}, rejectHeader},
		{"protocol with a decode error", fmt.Errorf("%w: %w", session.ErrProtocol,
			fmt.Errorf("move section: %w", &bitstream.ReadError{Field: "move.dt", Err: io.ErrUnexpectedEOF})), rejectProtocol},
		{"auth wrapped", fmt.Errorf("session: open: %w", handshake.ErrAuth), rejectAuth},
		{"notify duplicate", notify.ErrDuplicate, rejectReplayed},
		{"malformed in a field error", fmt.Errorf("x: %w", &handshake.FieldError{Packet: "data", Field: "seq", Err: handshake.ErrMalformed}), rejectGarbage},
		{"garbage before stale in one tree", fmt.Errorf("%w: %w", handshake.ErrGarbage, notify.ErrStale), rejectReplayed},
		{"stale deep, protocol deeper", fmt.Errorf("a: %w", fmt.Errorf("%w and %w", notify.ErrStale,
			fmt.Errorf("b: %w", session.ErrProtocol))), rejectProtocol},
		{"an Is method", fmt.Errorf("wrapped: %w", isAuth{}), rejectAuth},
		{"an Is method beside a sentinel", fmt.Errorf("%w: %w", handshake.ErrGarbage, isAuth{}), rejectAuth},
		{"uncomparable", uncomparable{why: []string{"x"}}, rejectReplayed},
		{"plain error", errors.New("session: event numbering section: lanes not increasing"), rejectHeader},
	}
	for _, s := range rejections {
		cases = append(cases,
			struct {
				name string
				err  error
				want rejection
			}{s.err.Error(), s.err, s.r},
			struct {
				name string
				err  error
				want rejection
			}{"wrapped " + s.err.Error(), fmt.Errorf("ctx: %w", s.err), s.r})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if ref := rejectionByIs(tc.err); ref != tc.want {
				t.Fatalf("case wrong: errors.Is files it as %d, the case says %d", ref, tc.want)
			}
			if got := rejectionOf(tc.err); got != tc.want {
				t.Errorf("rejectionOf = %d, want %d (errors.Is)", got, tc.want)
			}
		})
	}
}

// TestCountFilesEachRejectionOnce: count adds one to the counter of the
// error's rejection and to no other.
func TestCountFilesEachRejectionOnce(t *testing.T) {
	for _, tc := range []struct {
		err  error
		read func(*Counters) uint64
	}{
		{fmt.Errorf("%w: %w", session.ErrProtocol, io.ErrUnexpectedEOF), func(c *Counters) uint64 { return c.ProtocolErrors.Load() }},
		{handshake.ErrAuth, func(c *Counters) uint64 { return c.AuthFailed.Load() }},
		{notify.ErrStale, func(c *Counters) uint64 { return c.Replayed.Load() }},
		{handshake.ErrWrongConn, func(c *Counters) uint64 { return c.WrongConn.Load() }},
		{session.ErrClosed, func(c *Counters) uint64 { return c.AfterClose.Load() }},
		{session.ErrNotConnected, func(c *Counters) uint64 { return c.Unexpected.Load() }},
		{handshake.ErrGarbage, func(c *Counters) uint64 { return c.Garbage.Load() }},
		{notify.ErrTooFar, func(c *Counters) uint64 { return c.BadHeader.Load() }},
	} {
		var c Counters
		c.count(tc.err)
		if got := tc.read(&c); got != 1 {
			t.Errorf("%v: its counter is %d, want 1", tc.err, got)
		}
		if sum := c.Rejected() + c.ProtocolErrors.Load(); sum != 1 {
			t.Errorf("%v: %d counted in all, want 1", tc.err, sum)
		}
	}
}

// TestRejectionSentinelsShareAType: walkRejection looks up only errors of
// the first sentinel's type; a sentinel of another type would never be
// found.
func TestRejectionSentinelsShareAType(t *testing.T) {
	for _, s := range rejections {
		if reflect.TypeOf(s.err) != sentinelType {
			t.Errorf("%q is a %T, not a %v", s.err, s.err, sentinelType)
		}
	}
}
