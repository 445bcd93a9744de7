package hostcheck

// Chain runs n steps of one 64-bit linear congruential generator from x:
// each step waits for the last (a multiply and an add in one dependency
// chain), so a sibling thread's load on the core's execution ports does
// not slow it; a slower clock does.
//
//go:noinline
func Chain(x uint64, n int) uint64 {
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// Wide runs n steps of six independent add-and-xor chains from x: twelve
// simple operations a step that a core issues several a cycle, so it
// slows when a sibling thread takes the core's ports, as packing does.
//
//go:noinline
func Wide(x uint64, n int) uint64 {
	a, b, c, d, e, f := x, x+1, x+2, x+3, x+4, x+5
	for range n {
		a += b ^ 7
		b += c ^ 11
		c += d ^ 13
		d += e ^ 17
		e += f ^ 19
		f += a ^ 23
	}
	return a ^ b ^ c ^ d ^ e ^ f
}
