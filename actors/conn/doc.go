// Package conn runs a gateway's client connections: one Conn per client, the
// owner of that client's replication/session.Server (notify, events, the
// move stream, the control object, keepalive, timeout, graceful close) and of
// its ghost manager (actors/ghostmgr), which packs the ghost section of every
// data packet at the moment the packet is built. The gateway opens a Conn for
// each granted handshake and routes the client's datagrams to it; the Conn
// decrypts them, forwards the player's moves and events to its zone, and
// seals the packets its session says are due.
//
// # Shards, not an actor per connection
//
// A Pool spreads its connections over a few shards (GOMAXPROCS by default),
// each one goroutine that owns its connections outright. A shard's round
//
//  1. takes every event posted to it since the last round in one swap under
//     a mutex: the gateway's datagrams (a whole recvmmsg batch per shard in
//     one post), the zones' Control, Output, Redirect, Kick and ViewReady
//     (a local zone's tick posts its Controls for a shard's connections
//     in one PostControls: the Join names the Conn as its msg.ControlPort);
//  2. handles them, one connection at a time;
//  3. pumps every connection that had an event or whose deadline (a min-heap
//     of Server.NextDeadlineWith) is due: the session seals all of that
//     connection's due datagrams at once, straight into the round's send
//     buffers (a pump after a datagram, before the send slot opens, asks
//     Server.Due and does not Poll: most of them). A zone tick's Control
//     opens the session's send slot
//     (session.Server.SetControl), so each tick's update leaves in the
//     round it arrived in. A local zone publishes the tick's view first
//     and sets Control.View (the connection joins with
//     msg.Join.ViewWithControl): the Control carries the view's nudge
//     and goes out with it, one message per player per tick. From a zone
//     that nudges with a ViewReady instead (a cluster link), the
//     connection holds the
//     Control until the same tick's view is there too (at most 5 ms), so
//     that packet carries the tick's ghosts as well. A pump visits the
//     connection's ghost table once a send: handle only notes that a view
//     waits in its slot (ghostmgr.Manager.Take; the pump takes the
//     newest there, and a zone tick that comes first reuses the waiting
//     one for its own view, so a lagging player holds one view), and the
//     ghost fates of the datagrams received wait in the session while no
//     send is due;
//     the pump that sends applies the fates, then the view, then packs,
//     back to back on the same ghosts (applied as they came, each pass
//     found the table cold again on a server with a thousand tables);
//     steps 2 and 3 ask the CPU for the next connections' state a few
//     events or pumps ahead (replication/prefetch: prefetchEvents,
//     prefetchPumps), so that a connection's lines, gone from the caches
//     by its turn, come while the ones before it work;
//  4. sends the round's datagrams with one sendmmsg per WriteBatch.
//
// Then it sleeps until something is posted or the next deadline, but never
// wakes for a deadline sooner than Quantum (1 ms) after the previous round
// began, so send slots that fall close together are served by one round and
// leave in one system call. There is no mailbox, goroutine or time.Timer per
// connection and no actor message per packet: an actor per connection cost
// a goroutine start (and a stack grown by copying) for almost every message,
// a timer goroutine per wake-up, a second actor for the ghost manager and
// two messages per packet between them — more than half of the server's CPU
// per player. Zones still address a connection by its PID: it is a small
// actor.Process that posts to the connection's shard, resolved by its pool
// (pids.go) rather than protoactor's process registry, whose sharded maps
// cost ≈ 250 B a connection at a node's size.
//
// What a connection needs only within one call is the shard's: its
// sessions share one session.Scratch (the writer a packet is built in, the
// buffers a datagram is opened and decoded in), which a shard may reuse
// because it runs one connection at a time — 56 bytes fewer a connection,
// and no trip to a free list every shard locks, per datagram.
//
// # Why decryption runs here
//
// The gateway is one actor on one core: it only classifies a datagram by its
// first byte and length and looks up the connection (≈ 20 ns,
// BenchmarkRejectGarbage). The AEAD open and seal run on the shards, which
// use every core, and touch state only the connection owns (replay window,
// notify window, keys).
//
// # Queues and their policies
//
//	datagrams in     ≤ Config.MaxInbound (8) queued per connection; the gateway drops newer ones (drop-newest, counted)
//	datagrams out    sent by the shard in sendmmsg batches of WriteBatch (64) as its round fills one, the rest at
//	                 the round's end (a refused datagram is counted; to notify it is loss). A zone tick's
//	                 Controls arrive together, so most leave in full batches (at 1,000 players on a busy
//	                 host, 70 % of the flushes, ≈ 57 datagrams a sendmmsg; on a quiet one the profile puts
//	                 7/8 of sendmmsg's time in full batches): the system call's cost is the kernel's per datagram
//	events to client session event sender's bounded lanes; full → drop and count (EventsDropped)
//	controls         one waiting per connection: a newer Control merges into it (coalesce, ControlsSuperseded)
//	views            msg.ViewSlot: the newest view supersedes
//	input to zone    one *msg.Input per datagram that carried new moves or events, sent at the end
//	                 of the round's events: a zone's inputs of one round in one *msg.Inputs
//
// # Lifecycle
//
//	opened (pending: address unproven, sends nothing)
//	  → first authenticated packet: Verified to the gateway, Join to the zone
//	  → connected: packets both ways
//	  → Close / Kick / Shutdown / peer Disconnect / timeout: draining (Disconnect copies)
//	  → done: Leave to the zone, Closed to the gateway, which stops the connection
//
// A joined connection whose zone does not answer — no Control within
// lookupAgainAfter (1 s) of its Join, or none for zoneSilentAfter (3 s)
// after it had — looks the player's record up again (Config.Resume) and
// joins the zone it names. It checks at the end of each datagram and when
// its deadline wakes it (the session's keepalive files one at least once a
// second), so a player whose client is quiet is placed again too. The
// answer to such a relook gives the connection the record's epoch, lower
// or not, for its Controls and its Redirects both: a restore refused by
// its record (a newer owner) must not leave the real owner's Controls
// dropped as an older owner's, nor a record read before a Commit's write
// landed the new owner's Redirects dropped as stale.
//
// A connection whose handling panics is stopped, never restarted (a
// restarted session would reuse its keys from a fresh state); the gateway
// learns it as an actor.Terminated.
package conn
