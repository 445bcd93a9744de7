#include "textflag.h"

// func lines(p unsafe.Pointer, n uintptr)
// PREFETCHT0 from the line of p to the line of p+n-1.
TEXT ·lines(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	LEAQ -1(AX)(CX*1), CX
	ANDQ $~63, CX
loop:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	CMPQ AX, CX
	JLS loop
	// the last line, if the step from an unaligned p went past it
	PREFETCHT0 (CX)
	RET
