//go:build linux

package swarm

import (
	"bytes"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
)

// TestSharedTransportSendsEveryDatagram: datagrams of mixed sizes to two
// peers, many more than a batch, arrive intact and exactly once — through
// UDP_SEGMENT groups and, with GSO off, one by one.
func TestSharedTransportSendsEveryDatagram(t *testing.T) {
	for _, mode := range []string{"gso", "plain", "kernel refuses gso"} {
		t.Run(mode, func(t *testing.T) {
			checkNoLeaks(t)
			tr, err := newSharedTransport(false)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.shutdown()
			tr.gso = mode != "plain"
			refused := 0
			if mode == "kernel refuses gso" {
				write := tr.write
				tr.write = func(ms []ipv4.Message, flags int) (int, error) {
					for i, m := range ms {
						if m.OOB != nil {
							refused++
							if i == 0 {
								return 0, syscall.EIO
							}
							n, err := write(ms[:i], flags)
							return n, err
						}
					}
					return write(ms, flags)
				}
			}
			var peers []*net.UDPConn
			for range 2 {
				p, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				_ = p.SetReadBuffer(4 << 20)
				peers = append(peers, p)
			}
			const n = 300
			want := [2]map[string]int{{}, {}}
			for tag := int32(0); tag < 10; tag++ {
				to := peers[tag%2].LocalAddr().(*net.UDPAddr).AddrPort()
				if _, err := tr.open(to, tag); err != nil {
					t.Fatal(err)
				}
			}
			for i := range n {
				tag := int32(i % 10)
				p := bytes.Repeat([]byte{byte(i)}, 40+i%3) // three sizes
				p[0], p[1] = byte(i>>8), byte(i)
				if err := tr.send(int(tag), p); err != nil {
					t.Fatal(err)
				}
				want[tag%2][string(p)]++
			}
			tr.wait(0, func(int32, []byte, error) {})
			for k, p := range peers {
				_ = p.SetReadDeadline(time.Now().Add(2 * time.Second))
				got := 0
				for got < n/2 {
					b := make([]byte, 2048)
					m, err := p.Read(b)
					if err != nil {
						t.Fatalf("peer %d: %d of %d datagrams: %v", k, got, n/2, err)
					}
					if want[k][string(b[:m])] == 0 {
						t.Fatalf("peer %d: unexpected or duplicate datagram of %d bytes", k, m)
					}
					want[k][string(b[:m])]--
					got++
				}
			}
			if tr.takeSendErrors() != 0 {
				t.Fatal("send errors")
			}
			if mode == "kernel refuses gso" && (refused == 0 || tr.gso) {
				t.Fatalf("the fallback was not taken: %d refusals, gso %v", refused, tr.gso)
			}
		})
	}
}
