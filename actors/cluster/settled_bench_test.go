package cluster

// checkpointsSettled counts the checkpoints the writers are done with:
// written, or not rewritten because unchanged.
func checkpointsSettled(p *Players) uint64 { return p.Checkpoints.Load() + p.Unchanged.Load() }
