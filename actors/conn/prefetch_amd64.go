package conn

// prefetchRange asks the CPU to bring every cache line of the n bytes at
// p into its caches (PREFETCHT0), without waiting for any: a hint, never a
// fault, whatever the address. p is an address, not a pointer: nothing is
// kept or read.
func prefetchRange(p, n uintptr)
