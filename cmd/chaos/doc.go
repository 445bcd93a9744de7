// Command chaos is the resilience proof of docs/cluster.md: it starts three
// real zoned processes on loopback (node n1 hosts NATS, or every node joins
// a standalone nats-server with --external-nats), runs botswarm across their
// gateways, and at a fixed interval SIGTERMs, SIGKILLs or SIGSTOPs a random
// node other than the NATS host (restarting it under the same node id, or
// SIGCONTing it after longer than the lease TTL). With --external-nats it
// can restart the NATS server itself; with --nats-cluster (three clustered
// servers, every bucket on all three) it can SIGKILL the server leading the
// zones bucket and start it again.
//
// While it runs, a recorder watches the zones and players KV buckets and
// keeps every write with the server's timestamp (the buckets keep one
// revision per key, so the history exists only if someone records it).
// Afterwards the audit (audit.go, pure: it reads only the recording and
// the event list) checks that no two nodes ever owned a zone at one epoch,
// that no epoch went backwards, that no node wrote a lease or a player
// record for a zone after another node had claimed it (the fence a paused
// node must respect), and that every zone of a killed or paused node was
// owned again within --failover-limit. botswarm's own invariants (moves
// acknowledged exactly once) and its disconnect counts come from its JSON
// report.
//
// Everything is bounded: the number of events, every wait, the run's
// length. `make chaos` runs the long version; TestChaosShort (a drain, a
// SIGKILL, a SIGSTOP) runs in `make test`.
package main
