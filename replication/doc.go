// Package replication is the home of ghostwire's pure protocol cores: the
// wire format and the per-connection state machines that the actors drive.
//
// Sub-packages, bottom-up:
//
//   - bitstream: bit-packed writer and reader over caller buffers (flags,
//     ranged ints, quantized floats, vectors, quaternions, strings, string
//     tables, Elias-gamma), one canonical LSB-first bit order.
//   - notify: the packet-notify protocol — sequence numbers, ack window and
//     every packet's delivered/dropped fate exactly once, in send order;
//     RTT, jitter and loss estimates.
//   - event: guaranteed-ordered lanes, guaranteed-unordered, unguaranteed
//     and staggered events over notify, resent only on dropped fates.
//   - move: the client's redundant move stream, the server's exactly-once
//     applier, the CRC-checked control object and client prediction.
//   - ghost: one connection's ghost table (scope, ids, dirty masks,
//     priorities, budgeted packing) and the client's mirror with
//     interpolation.
//   - handshake: connect tokens, stateless cookies, ChaCha20-Poly1305 packet
//     protection, the replay window and guard, the reply rate limiter.
//   - session (in progress): one connection's endpoint, both ends — a
//     handshake session plus notify, moves, events and ghosts assembled into
//     whole datagrams, with keepalive, timeout and disconnect.
//   - netsim: a deterministic, seeded, virtual-time network simulator for
//     tests, benchmarks and bots.
//
// The wire format of all of them is specified bit for bit in
// docs/protocol.md; the threat model of handshake is docs/security.md.
//
// Everything below this directory is deterministic logic: it never imports
// sockets, actors or NATS, never starts goroutines and never reads the clock
// (time is passed in as a virtual time.Duration). That is what lets loss,
// latency, jitter, reordering and wraparound be tested exactly. The rule is
// enforced by TestLayering in this package.
package replication
