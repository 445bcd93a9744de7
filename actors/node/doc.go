// Package node assembles one zoned process: the embedded (or external) NATS
// connection with its JetStream key-value buckets, the protoactor actor
// system with the gateway and zone actors, and the HTTP endpoints for health,
// readiness and metrics.
//
// cmd/zoned is a thin flag parser over this package; tests and botswarm start
// a whole in-process world through it (node.Start, then Node.Stop).
//
// Shutdown order matters and is fixed here: stop accepting clients and tell
// connected ones (gateway), stop the zones, then the actor system, then NATS,
// then HTTP — so nothing is left running and no client waits for a timeout.
package node
