// Package session is one ghostwire connection end to end, as pure code: the
// server end a connection (actors/conn) drives and the client end the client library
// and the bot swarm drive. It puts the replication layers — packet notify,
// events, the move stream and control object, ghosts — inside the protected
// packets of an established handshake session, and adds what a connection
// needs around them: send rate and byte budget, acks, keepalive, timeout,
// graceful close with reasons, NAT rebinding, and on the client the whole
// handshake state machine. Nothing here opens a socket, starts a goroutine or
// reads a clock: now (virtual time since an arbitrary epoch) is passed in, and
// every call returns the datagram to send.
//
// # Datagram
//
// Every datagram after the handshake is one protected packet (see
// docs/protocol.md §7.18 for the bits):
//
//	notify header (cleartext, padded to a byte) ‖ AEAD(payload) ‖ 16-byte tag
//	client → server payload: moves | events
//	server → client payload: control object | events | ghosts
//
// The AEAD nonce is the notify sequence number, so every packet — ack-only
// and keepalive included — consumes one. In the loss-free steady state the
// header is 3 bytes: 19 bytes of header and tag per packet.
//
// # Server
//
//	srv, _ := session.NewServer(grant.Session(), cfg, handler, now)
//	moved, err := srv.Receive(now, pkt, from)     // handler.Move / handler.Event run inside
//	srv.SetControl(applied, state)                // from the zone, once per tick
//	pkt, err := srv.Poll(now, buf[:0], table)     // the next datagram due, if any
//	fates = srv.PopGhostFates(fates[:0])          // → table.OnFate
//	timer.Reset(srv.NextDeadline(now) - now)
//
// The ghost section comes from a GhostWriter: a *ghost.Table in the same
// owner, or a GhostRelay carrying sections a ghost manager elsewhere packed
// (docs/protocol.md §7.18, Ghost sections across actors).
//
// # Client
//
//	c, _ := session.NewClient(token, server, session.DefaultClientConfig(), handler, time.Now(), now)
//	out, err := c.Poll(now, buf[:0])              // connect requests, then data
//	err = c.Receive(now, pkt)
//	for c.InputDue(now) { c.Input(move.Move{Forward: move.Axis(stick)}) }
//	c.SendEvent(lane, payload)
//	views = c.View(now, views[:0])                // interpolated ghosts
//	me := c.Control()                             // predicted control object
//
// Both ends are not safe for concurrent use: one owner each.
package session
