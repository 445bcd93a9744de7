// Package handshake is ghostwire's connection security, as pure code: connect
// tokens, the stateless cookie challenge, the replay guard that binds a token
// to one session, AEAD packet protection with a replay window, the framing of
// every handshake packet, and a per-prefix rate limiter for replies to
// strangers. It opens no socket, starts no goroutine and reads no clock: wall
// time (token expiry, cookie rotation) and virtual time (rate limits) are
// passed in, randomness is an injected io.Reader.
//
// The design follows netcode.io (connect tokens sealed with XChaCha20-Poly1305
// by a backend, replies never larger than requests, a token usable for one
// session: GHSA-v29p-3vj4-vg4f), WireGuard (cookie MACs under a rotating
// secret, the replay bitmap) and Torque (allocate nothing for a client before
// it proves itself; checklist SEC-3, SEC-10, SEC-13, CL-9, CL-11, D-11).
//
// # Walkthrough
//
// A backend that shares the token key with the zone servers mints a token and
// gives it to the client over HTTPS:
//
//	tok, _ := handshake.IssueToken(key, handshake.TokenParams{
//		PlayerID: 42, ProtocolID: proto, Expiry: time.Minute, Timeout: 10 * time.Second,
//		ServerAddrs: []netip.AddrPort{zone},
//	}, time.Now(), crand.Reader)
//
// The client sends connect requests until the server answers:
//
//	c, _ := handshake.NewClient(tok, zone)
//	req, _ := c.AppendRequest(buf[:0]) // 1200 bytes; resend on a timer
//	err := c.HandleReply(reply)        // Challenge: resend AppendRequest; Accepted: connected
//	sess, _ := c.Session()
//
// The gateway filters every datagram by its first byte and length, rate-limits
// replies to strangers, and hands connect requests to the Server:
//
//	kind, err := handshake.Classify(pkt)          // garbage: drop and count, ~ns, 0 allocs
//	if kind is a request && limiter.Allow(src.Addr(), mono) {
//		out, grant, err := srv.Handle(out[:0], pkt, src, wall, load) // len(out) ≤ len(pkt)
//		// send out if non-empty; on grant: sess, _ := grant.Session(), start the connection
//	}
//
// load is LoadNormal (one round trip: granted at once), LoadHigh (two round
// trips: cookie first, nothing opened or allocated before the client proves
// its address) or LoadFull. Every protected packet after that:
//
//	out, _ := sess.Seal(out[:0], hdr, payload, seq)        // hdr = notify header, in the clear
//	pt, moved, err := sess.Open(pt[:0], hdr, ct, seq, src) // replay-checked, then authenticated
//	srv.Consume(grant.Claims.ID)                           // once the session is connected or gone
//
// A goroutine that runs many sessions (a connection shard) passes one
// Scratch of its own to SealWith and OpenWith instead: the nonce and
// associated data are built there, not in every Session.
//
// docs/protocol.md §7 (handshake)
// gives every layout byte by byte; docs/security.md
// the threat model.
package handshake
