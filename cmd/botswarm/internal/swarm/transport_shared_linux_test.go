//go:build linux

package swarm

import (
	"bytes"
	"net"
	"testing"
	"time"
)

// TestSharedTransportSendsEveryDatagram: datagrams of mixed sizes to two
// peers, many more than a batch, arrive intact and exactly once — through
// UDP_SEGMENT groups and, with GSO off, one by one.
func TestSharedTransportSendsEveryDatagram(t *testing.T) {
	// (A kernel that refuses UDP_SEGMENT: batchudp's own test.)
	for _, mode := range []string{"gso", "plain"} {
		t.Run(mode, func(t *testing.T) {
			checkNoLeaks(t)
			tr, err := newSharedTransport(false)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.shutdown()
			tr.bc.SetGSO(mode != "plain")
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
			const n = 2500 // more than sendQueue
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
			if mode == "gso" && tr.w.Super == 0 {
				t.Fatal("no UDP_SEGMENT group sent")
			}
		})
	}
}
