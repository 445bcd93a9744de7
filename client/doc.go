// Package client connects a Go game client (or a bot) to a ghostwire server.
//
// You need a connect token — a few hundred bytes your backend minted for
// this player (handshake.IssueToken, or `zonectl token`) and handed to the
// game over HTTPS — and the server's address, one of the addresses the token
// lists. Then:
//
//	s, err := client.Dial(ctx, "203.0.113.5:7777", token)
//	if err != nil { ... }              // refused (errors.As *session.DeniedError), timed out, ...
//	defer s.Close(context.Background())
//
//	for frame := range gameLoop {
//		s.SetInput(move.Move{Forward: move.Axis(stickY), Strafe: move.Axis(stickX),
//			Yaw: move.YawFromRadians(heading)})   // sampled 30 times a second
//		me := s.Control()                         // your character, predicted: draw it here
//		others = s.View(others[:0])               // everyone else, smoothed, 100 ms behind
//		for len(s.Events()) > 0 { handle(<-s.Events()) }
//		if chat != "" { s.SendEvent(0, []byte(chat)) }
//	}
//
// What the pieces mean:
//
//   - Input. SetInput holds the player's current input; the session samples it
//     at the input rate (30 Hz by default) into numbered moves and sends each
//     one several times until the server confirms it, so a lost packet loses no
//     input. Games with their own fixed tick use WithManualInput and SendMove.
//   - Control. The object you control moves the moment you give input
//     (prediction, with the same movement code the server runs, move.Walk by
//     default). When the server disagrees — a wall, a teleport — Control jumps to
//     the server's answer replayed with your newer input; ControlOffset tells you
//     how far, so you can blend instead of snapping.
//   - View. Other entities (ghosts) arrive as the server can afford to send
//     them; View draws each one a little in the past, between two states you
//     actually received, so motion stays smooth through jitter and loss.
//   - Events. SendEvent sends bytes that arrive exactly once and in order on
//     their lane (eight independent lanes: a lost packet on lane 0 never delays
//     lane 1). SendUnordered arrives exactly once in any order;
//     SendUnguaranteed maybe, at most once — for things that are stale in a
//     moment anyway. Events() delivers what the server sent.
//   - Stats. Round-trip time, jitter, loss and byte counts, for a network
//     indicator or your telemetry.
//   - Redirects. When the node you play on drains (a rolling deploy), the
//     server sends a Redirect to another node's gateway with a fresh token;
//     the Session follows it by itself and stays the same Session: input,
//     Control and View go on (View keeps drawing what the old connection
//     showed until the new one has it). Moves and ordered events (SendEvent)
//     the old node had not confirmed are sent again, and the player's zone
//     drops the ones it had applied: each is applied exactly once, in order
//     (docs/protocol.md §7.19, §7.20). Events the server sent while the
//     session switched can be lost. Stats.Redirects counts redirects;
//     OnRedirect reports each one.
//   - Failover. When the node you play on dies (no Redirect comes: the
//     server just goes silent), a Session made with WithFailover asks your
//     token source (your login backend) for a fresh token listing the
//     cluster's gateways, connects to another one and goes on as the same
//     Session, the player resuming from its saved state. Moves sent
//     meanwhile are dropped; SendEvent returns ErrFailingOver until it is
//     connected again. Ordered events the dead node had not reported
//     applied are sent again, and the zone that restored the player drops
//     the ones its saved state covers. Stats.Failovers counts them.
//
// Everything on the wire is encrypted and authenticated with the keys in
// your token; a token opens one session only (dial again with a new token).
// Each Session runs one goroutine that owns its socket; Close (or a server
// disconnect, or a timeout) stops it. Methods are safe for concurrent use.
//
// For thousands of simulated clients on a few sockets (a bot swarm), use the
// pure replication/session.Client directly: it has no goroutine and no socket
// (Poll, Receive, NextDeadline).
package client
