package event

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"zero config", func(c *Config) { *c = Config{} }},
		{"7 lanes", func(c *Config) { c.Lanes = 7 }},
		{"65 lanes", func(c *Config) { c.Lanes = 65 }},
		{"in flight below 16384", func(c *Config) { c.MaxInFlightPerLane = 8192 }},
		{"in flight not a power of two", func(c *Config) { c.MaxInFlightPerLane = 20000 }},
		{"in flight above limit", func(c *Config) { c.MaxInFlightPerLane = 1 << 21 }},
		{"fragment too small", func(c *Config) { c.MaxFragment = 63 }},
		{"event above 64 KiB", func(c *Config) { c.MaxEventSize = 1<<16 + 1 }},
		{"event below fragment", func(c *Config) { c.MaxEventSize = c.MaxFragment - 1 }},
		{"queue below one event", func(c *Config) { c.MaxQueuedBytes = c.MaxEventSize - 1 }},
		{"min fragment 0", func(c *Config) { c.MinFragment = 0 }},
		{"min fragment above max", func(c *Config) { c.MinFragment = c.MaxFragment + 1 }},
		{"negative redundancy", func(c *Config) { c.Redundancy = -1 }},
		{"redundancy 9", func(c *Config) { c.Redundancy = 9 }},
		{"redundancy bytes negative", func(c *Config) { c.RedundancyBytes = -1 }},
		{"residual loss negative", func(c *Config) { c.ResidualLoss = -0.1 }},
		{"residual loss above limit", func(c *Config) { c.ResidualLoss = 0.6 }},
		{"residual loss NaN", func(c *Config) { c.ResidualLoss = math.NaN() }},
		{"no stagger keys", func(c *Config) { c.StaggerKeys = 0 }},
		{"too many stagger keys", func(c *Config) { c.StaggerKeys = 1<<16 + 1 }},
		{"stagger base 0", func(c *Config) { c.StaggerBase = 0 }},
		{"stagger limit below base", func(c *Config) { c.StaggerLimit = c.StaggerBase - time.Millisecond }},
		{"no partials", func(c *Config) { c.MaxPartial = 0 }},
		{"no unguaranteed queue", func(c *Config) { c.MaxUnguaranteed = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("Validate = %v, want ErrConfig", err)
			}
			if _, err := NewSender(c); !errors.Is(err, ErrConfig) {
				t.Errorf("NewSender = %v, want ErrConfig", err)
			}
			if _, err := NewReceiver(c); !errors.Is(err, ErrConfig) {
				t.Errorf("NewReceiver = %v, want ErrConfig", err)
			}
		})
	}
}

func TestIDWidth(t *testing.T) {
	for _, tc := range []struct {
		m    int
		want uint
	}{{1 << 14, 15}, {1 << 15, 16}, {1 << 20, 21}} {
		if got := idWidth(tc.m); got != tc.want {
			t.Errorf("idWidth(%d) = %d, want %d", tc.m, got, tc.want)
		}
	}
}

// TestConfigsAreShared: Senders and Receivers built from equal Configs share
// one read-only copy; a different Config gets its own; what Config returns is
// a copy the caller may change without touching anyone else's.
func TestConfigsAreShared(t *testing.T) {
	cfg := DefaultConfig()
	s1, err := NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := NewSender(cfg)
	r, _ := NewReceiver(cfg)
	if s1.cfg != s2.cfg || s1.cfg != r.cfg {
		t.Fatal("equal Configs not shared")
	}
	other := cfg
	other.Redundancy = 3
	s3, _ := NewSender(other)
	if s3.cfg == s1.cfg || s3.Config().Redundancy != 3 || s1.Config().Redundancy != cfg.Redundancy {
		t.Fatal("a different Config shared or changed another's")
	}
	c := s1.Config()
	c.Lanes = MaxLanes
	if s2.Config().Lanes != cfg.Lanes {
		t.Fatal("changing the Config a Sender returned changed the shared copy")
	}
}
