package udp

import (
	"fmt"
	"os"
	"strings"
)

// KernelDrops is the kernel's count of datagrams dropped on the local UDP
// socket bound to port, read from /proc/net/udp (Linux): "?" when no such
// socket is listed, the read error elsewhere. For diagnostics (a test that
// failed under load says whether the kernel dropped its datagrams); IPv4
// sockets only.
func KernelDrops(port uint16) string {
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		return err.Error()
	}
	suffix := fmt.Sprintf(":%04X", port)
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 12 && strings.HasSuffix(f[1], suffix) {
			return f[len(f)-1]
		}
	}
	return "?"
}
