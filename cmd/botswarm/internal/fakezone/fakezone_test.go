package fakezone

import (
	"net"
	"runtime"
	"testing"
	"time"
)

// The server's behaviour is exercised by the swarm's tests (it is their
// opponent); here: it starts, answers garbage with silence, and stops
// without leaking goroutines, even when closed twice.
func TestStartClose(t *testing.T) {
	before := runtime.NumGoroutine()
	z, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !z.Addr.IsValid() || z.Addr.Port() == 0 {
		t.Fatalf("address %v", z.Addr)
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(z.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("not a ghostwire packet")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := c.Read(make([]byte, 100)); err == nil {
		t.Fatalf("garbage got a %d-byte answer", n)
	}
	z.Close()
	z.Close()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines left", n-before)
	}
	if _, err := Start(Options{Listen: "256.0.0.1:1"}); err == nil {
		t.Fatal("a bad address started a server")
	}
}
