//go:build prefetchload

#include "textflag.h"

// prefetchRange as plain loads, for cache simulators that ignore prefetch
// instructions (valgrind's cachegrind and callgrind): built with
// -tags prefetchload, their counts show which of a datagram's misses the
// prefetch takes ahead of the handling (in warmAhead) and which it
// leaves. Never for a server: a load waits for its line.

// func prefetchRange(p, n uintptr)
TEXT ·prefetchRange(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	ADDQ AX, CX
	ANDQ $~63, AX
loop:
	CMPQ AX, CX
	JAE done
	MOVB (AX), DX
	ADDQ $64, AX
	JMP loop
done:
	RET
