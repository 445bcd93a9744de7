package session

import (
	"errors"
	"reflect"

	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// Rejection is the counter a datagram Receive refused is filed under
// (Counters): the first of these whose sentinel the error's tree holds,
// in this order.
type Rejection uint8

const (
	RejectProtocol   Rejection = iota // ErrProtocol: an authenticated packet whose sections did not decode
	RejectAuth                        // handshake.ErrAuth: the AEAD tag did not verify
	RejectReplayed                    // a duplicate, or below the replay or notify window
	RejectWrongConn                   // handshake.ErrWrongConn
	RejectAfterClose                  // arrived after the session closed
	RejectUnexpected                  // a kind the session does not take in its state
	RejectGarbage                     // bad kind, size, padding or prefix
	RejectHeader                      // none of them: notify refused the header
)

// rejections are the sentinels a Rejection names, in Rejection order.
var rejections = [...]struct {
	err error
	r   Rejection
}{
	{ErrProtocol, RejectProtocol},
	{handshake.ErrAuth, RejectAuth},
	{handshake.ErrDuplicate, RejectReplayed}, {handshake.ErrStale, RejectReplayed},
	{notify.ErrDuplicate, RejectReplayed}, {notify.ErrStale, RejectReplayed},
	{handshake.ErrWrongConn, RejectWrongConn},
	{handshake.ErrClosed, RejectAfterClose}, {ErrClosed, RejectAfterClose},
	{handshake.ErrUnexpected, RejectUnexpected}, {ErrNotConnected, RejectUnexpected},
	{handshake.ErrGarbage, RejectGarbage}, {handshake.ErrMalformed, RejectGarbage},
}

// sentinelType is the dynamic type of every sentinel in rejections
// (errors.New's; TestRejectionSentinelsShareAType), and bySentinel their
// rejections by value: an error of that type is looked up once, not
// compared with each (an interface compare of the same type is a call,
// ≈ 25 instructions, thirteen for an error none of them is).
var (
	sentinelType = reflect.TypeOf(rejections[0].err)
	bySentinel   = func() map[error]Rejection {
		m := make(map[error]Rejection, len(rejections))
		for _, s := range rejections {
			m[s.err] = s.r
		}
		return m
	}()
)

// RejectionOf is the Rejection of an error Receive returned, its tree
// walked once: thirteen errors.Is in a row walked it thirteen times for a
// header the session refused (the last case), ≈ 1,600 instructions of a
// rejected datagram — counted once by the session and once by its
// owner, which files the same error under its own counters. A tree with
// an Is method of its own goes through errors.Is (rejectionSlow): only
// errors.Is knows what that method matches.
func RejectionOf(err error) Rejection {
	r := RejectHeader
	if !walkRejection(err, &r) {
		return rejectionSlow(err)
	}
	return r
}

// walkRejection lowers *r to the rejection of any sentinel in err's tree
// (errors.Is's tree: Unwrap() error and Unwrap() []error), and reports
// false, having stopped, at an error with an Is method.
func walkRejection(err error, r *Rejection) bool {
	for err != nil {
		if _, ok := err.(interface{ Is(error) bool }); ok {
			return false
		}
		if reflect.TypeOf(err) == sentinelType { // comparable: a map key
			if s, ok := bySentinel[err]; ok && s < *r {
				*r = s
			}
		}
		switch x := err.(type) {
		case interface{ Unwrap() error }:
			err = x.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				if !walkRejection(e, r) {
					return false
				}
			}
			return true
		default:
			return true
		}
	}
	return true
}

// rejectionSlow is RejectionOf by errors.Is, sentinel after sentinel.
func rejectionSlow(err error) Rejection {
	for _, s := range &rejections {
		if errors.Is(err, s.err) {
			return s.r
		}
	}
	return RejectHeader
}
