package conn

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/ghostwire/ghostwire/actors/msg"
)

func TestDefaultConfigValidates(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultInboundQueueIsShort: what the datagrams queued for one
// connection may hold by default — compact copies of up to
// msg.LargeDatagram bytes, the common case — stays a few kilobytes
// (DefaultMaxInbound): an overloaded node's queues grow with its
// connections, not with how far behind it is.
func TestDefaultInboundQueueIsShort(t *testing.T) {
	const most = 4 << 10
	per := msg.LargeDatagram + int(unsafe.Sizeof(msg.Datagram{}))
	if q := DefaultMaxInbound * per; q > most {
		t.Fatalf("%d datagrams of %d B queued per connection: %d B, want ≤ %d", DefaultMaxInbound, per, q, most)
	}
	if DefaultMaxInbound < 4 {
		t.Fatalf("DefaultMaxInbound %d: a burst of a client's datagrams (a round's batch) must fit", DefaultMaxInbound)
	}
}

func TestConfigRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*Config)
	}{
		{"no registry", func(c *Config) { c.Registry = nil }},
		{"inbound zero", func(c *Config) { c.MaxInbound = 0 }},
		{"inbound too big", func(c *Config) { c.MaxInbound = MaxMaxInbound + 1 }},
		{"bad session", func(c *Config) { c.Session.SendRate = 0 }},
		{"bad ghosts", func(c *Config) { c.Ghosts.MaxGhosts = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mut(&c)
			if err := c.Validate(); !errors.Is(err, ErrConfig) {
				t.Fatalf("Validate = %v, want ErrConfig", err)
			}
		})
	}
}

// The token's timeout replaces the default, and a keepalive that would not
// fit inside it shrinks, so a short-timeout token still yields a valid
// session config.
func TestSessionConfigFollowsTheToken(t *testing.T) {
	c := DefaultConfig()
	for _, timeout := range []time.Duration{0, 300 * time.Millisecond, 2 * time.Second, time.Minute} {
		s := c.sessionConfig(timeout)
		if timeout > 0 && s.Timeout != timeout {
			t.Errorf("timeout %v: session timeout %v", timeout, s.Timeout)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("timeout %v: %v", timeout, err)
		}
	}
	if s := c.sessionConfig(time.Minute); s.KeepAlive != c.Session.KeepAlive {
		t.Errorf("a long timeout changed the keepalive to %v", s.KeepAlive)
	}
}
