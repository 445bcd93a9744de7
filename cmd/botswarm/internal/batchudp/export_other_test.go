//go:build !linux

package batchudp

func setGSO(*Conn, bool) {}
func plainRx(*Conn)      {}
func refuseGSO(*Conn)    {}
