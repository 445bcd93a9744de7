package netsim

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestPipeDirectionsIndependent(t *testing.T) {
	t.Run("each direction has its own config", func(t *testing.T) {
		p, err := NewPipe(Config{Latency: 10 * ms}, Config{Latency: 30 * ms, Loss: 1})
		if err != nil {
			t.Fatal(err)
		}
		p.AtoB.Send(0, []byte("ping"))
		p.BtoA.Send(0, []byte("pong"))
		if at, ok := p.AtoB.NextDelivery(); !ok || at != 10*ms {
			t.Errorf("A→B next delivery %v %v, want 10ms", at, ok)
		}
		if p.BtoA.Pending() != 0 || p.BtoA.Stats().Dropped.Loss != 1 {
			t.Errorf("B→A with Loss 1: Pending %d, Stats %+v", p.BtoA.Pending(), p.BtoA.Stats())
		}
	})
	t.Run("same seed, different random streams", func(t *testing.T) {
		cfg := Config{Loss: 0.5, Seed: 1}
		p, err := NewPipe(cfg, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var ab, ba []bool
		for i := range 200 {
			now := time.Duration(i) * ms
			p.AtoB.Send(now, nil)
			p.BtoA.Send(now, nil)
			ab = append(ab, p.AtoB.Deliver(now, nil) == 1)
			ba = append(ba, p.BtoA.Deliver(now, nil) == 1)
		}
		if slices.Equal(ab, ba) {
			t.Error("both directions lost the same packets: RNG streams are not independent")
		}
		// A→B of a pipe is the same stream as NewLink with that config.
		l := mustLink(t, cfg)
		for i, want := range ab {
			now := time.Duration(i) * ms
			l.Send(now, nil)
			if got := l.Deliver(now, nil) == 1; got != want {
				t.Fatalf("packet %d: NewLink delivered=%v, Pipe.AtoB delivered=%v", i, got, want)
			}
		}
	})
	t.Run("invalid config names the direction", func(t *testing.T) {
		if _, err := NewPipe(Config{}, Config{Loss: -1}); !errors.Is(err, ErrConfig) {
			t.Errorf("NewPipe with bad B→A config: %v", err)
		}
		if _, err := NewPipe(Config{Jitter: -1}, Config{}); !errors.Is(err, ErrConfig) {
			t.Errorf("NewPipe with bad A→B config: %v", err)
		}
	})
}
