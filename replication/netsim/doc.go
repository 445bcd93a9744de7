// Package netsim is a deterministic, seeded, virtual-time network simulator: it loses, delays,
// reorders, duplicates and rate-limits datagrams so that protocol code can be tested against a
// bad network without sockets, goroutines or a clock.
//
// Seed: 000_7c9fbcaaab74b117.txt § Simulating Real-World Conditions (Listing 7.14 and its Tip):
// a module between the socket and the game drops each packet with some probability, stamps the
// rest with "now + latency + jitter" and hands them on once the clock passes that stamp. This
// package adds burst loss (the Tip), explicit reordering, duplication and a bandwidth bottleneck
// with a finite queue, and it takes time as an argument instead of reading a clock.
//
// Walkthrough:
//
//	l, err := netsim.NewLink(netsim.Config{
//		Loss: 0.1, Latency: 100 * time.Millisecond, Jitter: 20 * time.Millisecond, Seed: 1,
//	})
//	for now := time.Duration(0); now < time.Minute; now += time.Millisecond {
//		l.Send(now, packet)                    // copied; dropped or scheduled
//		l.Deliver(now, func(p []byte) { … })   // everything due by now, in order
//	}
//	s := l.Stats()                              // Sent, Delivered, Dropped.Loss, …
//
// A Pipe is two Links, one per direction, on independent random streams. Use NextDelivery to
// jump the virtual clock to the next event instead of stepping it. SetConfig changes the
// impairment mid-run (for example a 95%-loss outage that ends) without resetting the random
// stream or the packets in flight.
//
// Determinism: each Link owns a math/rand/v2 PCG generator seeded from Config.Seed, so the same
// seed and the same calls give the same delivery trace, and enabling the simulator never moves
// the game's own random stream (SIM-1; 003_28a462e3d9fd091c.txt ch6).
//
// Cost: a min-heap over a slice holds pending packets; payloads live in pooled buffers, so Send
// and Deliver do not allocate in steady state. MaxInFlight bounds the memory a Link can hold.
package netsim
