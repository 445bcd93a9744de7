// Package gateway is the node's UDP front door: it owns the one socket,
// reads and writes it in batches (actors/udp: recvmmsg/sendmmsg), answers
// handshakes (replication/handshake: stateless cookies, one session per
// token, replies never larger than requests), opens a connection
// (actors/conn) per granted session and routes each datagram to its
// connection, and rejects everything else cheaply and countably.
//
// # Shape
//
//	reader goroutine ──datagrams of known connections, one post per shard per batch──▶ conn shards
//	reader goroutine ──*batch with the rest (handshakes, unknown connections, garbage)──▶ gateway actor
//	conn shards ──sendmmsg of each round's sealed datagrams──▶ socket
//	gateway actor ──handshake replies, NoConnection──▶ writer (bounded queue) ──▶ writer goroutine ──sendmmsg──▶ socket
//	connections ──Verified / Moved / Closed──▶ gateway actor
//
// The reader blocks in recvmmsg, so it is a plain goroutine. It routes the
// datagrams of known connections itself: it looks each one up in the
// routing tables (by source address, or by connection id in the long form)
// under one read lock per batch, stages it with its connection's shard and
// posts each shard its share of the batch at once. Only a batch with
// something else in it — a handshake, a datagram for no known connection,
// garbage — goes on to the gateway actor, which owns the handshake server
// and the rate limiter and is the only writer of the routing tables; it
// takes the datagrams the reader left. Before, every batch went through
// the actor, one goroutine hop more per datagram. The shards send their
// own datagrams (each with its own udp.Writer); handshake replies go
// through one writer goroutine with a bounded queue (full: drop and count
// — to the protocol that is packet loss, which it already handles).
//
// # The per-datagram decision (0 allocations)
//
//	handshake.Classify(first byte, length) → garbage: count, drop
//	short-form data      → route by source address
//	long form, Disconnect→ route by connection id
//	connect request / challenge response → per-/24 rate limit → handshake.Server.Handle
//	anything else a server never takes → count, drop
//	unroutable data      → NoConnection (9 bytes, smaller than any data packet), rate limited
//
// Decryption runs on the connection shards, not here (actors/conn explains
// why). A datagram is handed over without copying: the batch slot gets a
// fresh pooled buffer instead.
//
// # Load
//
// The handshake path is chosen per request from the gateway's real state:
// LoadFull when MaxConns connections (pending ones included) exist, or
// when draining with nowhere to send clients — new clients get
// Denied(ServerFull), a clear refusal; LoadHigh (every new
// client must first echo a stateless cookie) from ChallengeAt connections on,
// or when the reader's queue to the gateway is half full (the node is
// falling behind), or while it redirects its clients (RedirectAll: a
// newcomer is verified, then redirected); LoadNormal (one round trip)
// otherwise.
package gateway
