// Package cluster makes one world of many zoned processes: zone leases
// with fencing epochs in JetStream KV (Leases), and the bridge that carries
// the zone actors' and connections' messages between processes as protobuf
// over core NATS (Bridge). Inside one process nothing changes: zones and
// connections still talk by actor messages; a zone owned elsewhere is
// represented here by a proxy actor under the zone's own name, so senders
// cannot tell. docs/cluster.md has the subjects, messages and failure cases.
package cluster
