package session

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// rejectionByIs is the reference: the errors.Is cascade the counters
// were, case after case.
func rejectionByIs(err error) Rejection {
	switch {
	case errors.Is(err, ErrProtocol):
		return RejectProtocol
	case errors.Is(err, handshake.ErrAuth):
		return RejectAuth
	case errors.Is(err, handshake.ErrDuplicate), errors.Is(err, handshake.ErrStale),
		errors.Is(err, notify.ErrDuplicate), errors.Is(err, notify.ErrStale):
		return RejectReplayed
	case errors.Is(err, handshake.ErrWrongConn):
		return RejectWrongConn
	case errors.Is(err, handshake.ErrClosed), errors.Is(err, ErrClosed):
		return RejectAfterClose
	case errors.Is(err, handshake.ErrUnexpected), errors.Is(err, ErrNotConnected):
		return RejectUnexpected
	case errors.Is(err, handshake.ErrGarbage), errors.Is(err, handshake.ErrMalformed):
		return RejectGarbage
	}
	return RejectHeader
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
		want Rejection
	}{
		{"unknown sentinel", notify.ErrTooFar, RejectHeader},
		{"truncated header", &bitstream.ReadError{Field: "ack", Bit: 3, Err: io.ErrUnexpectedEOF}, RejectHeader},
		{"protocol with a decode error", fmt.Errorf("%w: %w", ErrProtocol,
			fmt.Errorf("move section: %w", &bitstream.ReadError{Field: "move.dt", Err: io.ErrUnexpectedEOF})), RejectProtocol},
		{"auth wrapped", fmt.Errorf("session: open: %w", handshake.ErrAuth), RejectAuth},
		{"notify duplicate", notify.ErrDuplicate, RejectReplayed},
		{"malformed in a field error", fmt.Errorf("x: %w", &handshake.FieldError{Packet: "data", Field: "seq", Err: handshake.ErrMalformed}), RejectGarbage},
		{"garbage before stale in one tree", fmt.Errorf("%w: %w", handshake.ErrGarbage, notify.ErrStale), RejectReplayed},
		{"stale deep, protocol deeper", fmt.Errorf("a: %w", fmt.Errorf("%w and %w", notify.ErrStale,
			fmt.Errorf("b: %w", ErrProtocol))), RejectProtocol},
		{"an Is method", fmt.Errorf("wrapped: %w", isAuth{}), RejectAuth},
		{"an Is method beside a sentinel", fmt.Errorf("%w: %w", handshake.ErrGarbage, isAuth{}), RejectAuth},
		{"uncomparable", uncomparable{why: []string{"x"}}, RejectReplayed},
		{"plain error", errors.New("session: event numbering section: lanes not increasing"), RejectHeader},
	}
	for _, s := range rejections {
		cases = append(cases,
			struct {
				name string
				err  error
				want Rejection
			}{s.err.Error(), s.err, s.r},
			struct {
				name string
				err  error
				want Rejection
			}{"wrapped " + s.err.Error(), fmt.Errorf("ctx: %w", s.err), s.r})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if ref := rejectionByIs(tc.err); ref != tc.want {
				t.Fatalf("case wrong: errors.Is files it as %d, the case says %d", ref, tc.want)
			}
			if got := RejectionOf(tc.err); got != tc.want {
				t.Errorf("rejectionOf = %d, want %d (errors.Is)", got, tc.want)
			}
		})
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
