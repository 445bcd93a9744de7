// Package replication is the home of ghostwire's pure protocol cores: bit
// streams, packet notify, events, ghosts, moves and the network simulator.
//
// Everything below this directory is deterministic logic: it never imports
// sockets, actors or NATS, never starts goroutines and never reads the clock
// (time is passed in as a virtual time.Duration). That is what lets loss,
// latency, jitter, reordering and wraparound be tested exactly. The rule is
// enforced by TestLayering in this package.
package replication
