// Package udp is ghostwire's one UDP socket type: batched reads and writes
// (recvmmsg/sendmmsg through golang.org/x/net on Linux, one datagram per call
// elsewhere) behind a small interface, so the gateway, the client library and
// the bot swarm share it, and tests can swap in an in-memory twin.
//
// Seed: the book's ch. 4 tip (one preallocated receive buffer per socket) and
// wireguard-go's conn.Bind (batched UDP behind a small interface).
package udp
