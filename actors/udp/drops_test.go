package udp

import (
	"net"
	"runtime"
	"testing"
)

// A bound socket is found and has dropped nothing; a port nobody holds is
// not listed.
func TestKernelDrops(t *testing.T) {
	if runtime.GOOS != "linux" {
		if got := KernelDrops(1); got == "0" {
			t.Fatalf("KernelDrops without /proc/net/udp = %q", got)
		}
		return
	}
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(c.LocalAddr().(*net.UDPAddr).Port)
	if got := KernelDrops(port); got != "0" {
		t.Fatalf("KernelDrops(%d) of a fresh socket = %q, want 0", port, got)
	}
	c.Close()
	if got := KernelDrops(port); got != "?" {
		t.Fatalf("KernelDrops(%d) after close = %q, want ?", port, got)
	}
}
