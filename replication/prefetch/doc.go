// Package prefetch asks the CPU to bring memory into its caches ahead of
// use, without waiting for it: a loaded node's per-connection state has
// left the caches by the connection's next turn, and each of its lines,
// touched one after another, costs a trip to memory. Fetched one turn
// ahead, while the turn before works, those trips overlap that work.
//
// A prefetch is a hint: it never faults, whatever the address, and does
// nothing on architectures without the instruction here.
package prefetch
