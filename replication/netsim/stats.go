package netsim

// Stats counts what a Link did with its packets. At any moment
//
//	Sent + Duplicated == Delivered + Dropped.Total() + Pending()
type Stats struct {
	Sent           uint64 // packets passed to Send
	SentBytes      uint64 // payload bytes passed to Send
	Delivered      uint64 // copies handed to Deliver's callback, duplicates included
	DeliveredBytes uint64 // payload bytes of those copies
	Dropped        Drops  // packets that will never be delivered, by cause
	Duplicated     uint64 // extra copies created by Config.Duplicate
	// Reordered counts deliveries of a packet after a packet sent later had already been
	// delivered: the reordering the receiver observes, whatever caused it (jitter or Reorder).
	Reordered uint64
}

// Drops counts dropped packets by cause.
type Drops struct {
	Loss     uint64 // random loss (Config.Loss or Config.Burst)
	Queue    uint64 // tail-dropped by a full bottleneck queue (Config.QueueBytes)
	InFlight uint64 // the link already held Config.MaxInFlight packets
	TooBig   uint64 // longer than Config.MaxPacket
}

// Total returns the sum over all causes.
func (d Drops) Total() uint64 { return d.Loss + d.Queue + d.InFlight + d.TooBig }
