//go:build linux

package batchudp

import (
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

func setGSO(c *Conn, on bool) { c.gso = on }

// plainRx turns UDP_GRO off again.
func plainRx(c *Conn) {
	rc, _ := c.uc.SyscallConn()
	_ = rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 0) })
	c.gro = false
}

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
