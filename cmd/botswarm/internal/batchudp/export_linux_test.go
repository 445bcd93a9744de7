//go:build linux

package batchudp

import (
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

func setGSO(c *Conn, on bool) { c.gso = on }

// plainRx turns UDP_GRO off again (TestEveryDatagramArrivesIntact then
// wants no super-datagram at that receiver).
func plainRx(c *Conn) { c.DisableGRO() }

// refuseGSO makes every send that carries UDP_SEGMENT fail as an old
// kernel's would.
func refuseGSO(c *Conn) {
	write := c.write
	c.write = func(ms []ipv4.Message, flags int) (int, error) {
		for i, m := range ms {
			if m.OOB != nil {
				if i == 0 {
					return 0, unix.EIO
				}
				return write(ms[:i], flags)
			}
		}
		return write(ms, flags)
	}
}
