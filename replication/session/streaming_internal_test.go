package session

import (
	"testing"
	"time"
)

// TestNotStreamingBeforeData: an endpoint whose peer has sent no data
// packet yet does not count it as streaming at any time (lastData starts
// at noData, where a flag that it was set used to say so), and one whose
// peer sent one at t does for KeepAlive after t.
func TestNotStreamingBeforeData(t *testing.T) {
	cfg := DefaultServerConfig()
	var e endpoint
	if err := e.init(cfg.Notify, cfg.Events, cfg.KeepAlive, cfg.Timeout, cfg.DisconnectCopies, cfg.DisconnectInterval, serverLimits{}, false); err != nil {
		t.Fatal(err)
	}
	ka := cfg.KeepAlive
	for _, now := range []time.Duration{-time.Hour, 0, time.Millisecond, ka - 1, ka, 100 * 365 * 24 * time.Hour} {
		if e.peerStreaming(now) {
			t.Errorf("streaming at %v before any data", now)
		}
	}
	e.lastData = 5 * time.Second
	for now, want := range map[time.Duration]bool{5 * time.Second: true, 5*time.Second + ka - 1: true, 5*time.Second + ka: false} {
		if got := e.peerStreaming(now); got != want {
			t.Errorf("data at 5s: streaming at %v = %v, want %v", now, got, want)
		}
	}
}
