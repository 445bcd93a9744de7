// Package swarm runs botswarm's bots: each one a replication/session.Client
// with its own UDP socket (the server routes clients by source address, so
// bots cannot share one), a scenario mover, an optional netsim link per
// direction, and the invariant checks — moves acknowledged exactly once and
// in order, echoed events intact and in order, peer ghosts where those bots
// really are, handoff hitches.
//
// Bots are spread over a few workers. A worker owns its bots outright (no
// locks on their state), their sockets (one epoll set on Linux, polled
// through the Go runtime's poller) and a min-heap of wake-up times, so there
// is no goroutine or timer per bot. The only state shared between workers is
// each bot's published trajectory (truth rings of atomics, read for view
// accuracy) and the metrics shards.
//
//	sw, _ := swarm.New(cfg)
//	col := sw.Run(ctx)               // until cfg.Duration, drain, disconnect
//	r := metrics.Build(col, cfgForReport, metrics.Options{EchoExpected: true})
package swarm
