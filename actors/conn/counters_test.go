package conn

import (
	"fmt"
	"io"
	"testing"

	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/session"
)

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
