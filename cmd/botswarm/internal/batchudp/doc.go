// Package batchudp moves UDP datagrams in batches with as few trips through
// the kernel as it can, for botswarm's fake server: on Linux, recvmmsg with
// UDP_GRO (a run of equal-size datagrams one sender sent as a UDP_SEGMENT
// super-datagram arrives whole and is cut up here) and sendmmsg with
// UDP_SEGMENT (the datagrams of one flush that share a size and an address
// leave as one super-datagram). On loopback both ends of a datagram's trip
// run on the sender's CPU, so a receiver with UDP_GRO also spares its
// peers the kernel's segmentation. Elsewhere, one datagram per call.
//
// The datagrams on the wire are the same either way; a receiver without
// UDP_GRO gets them one by one.
//
//	c, _ := batchudp.Listen("127.0.0.1:0")
//	b := batchudp.NewBatch(16, 0)
//	_ = c.ReadBatch(b)              // blocks for at least one
//	b.Each(func(p []byte, from netip.AddrPort) { … })
//	w := c.NewWriter(1024)
//	p := build(w.Slot())            // append a datagram to the slot's empty buffer
//	w.Commit(p, to)                 // flushes by itself when the queue is full
//	w.Flush()
package batchudp
