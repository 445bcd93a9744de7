//go:build !linux

package batchudp

func setGSO(*Conn, bool) {}
func plainRx(c *Conn)    { c.DisableGRO() }
func refuseGSO(*Conn)    {}
