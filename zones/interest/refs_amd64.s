//go:build amd64

#include "textflag.h"

// func bucketRefs4(out *ghost.ViewRef, set *Entry, n int, bySlot *slotPrio, nslots int, x, z, falloff, far, far2 float32, off uint32, buckets *[1 << 11]ghost.ViewRef) (done, nfar int)
//
// Viewer.BucketRefsFolded's loop, four members at a time: the same
// float32 operations a lane (SUBPS, MULPS, ADDPS round as SUBSS, MULSS,
// ADDSS; MAXPS(f, far) is f if f > far, else far — the loop's floor,
// NaN included), the four slotPrio records read whole and transposed,
// the far offset's mask the sign of far2 − d2 as there, counted
// (MOVMSKPS, POPCNT) rather than summed, and each reference its bucket
// ORed into the slot (+ offset) written first. A group with a slot at or
// past nslots ends the loop before it writes anything.
TEXT ·bucketRefs4(SB), NOSPLIT, $0-88
	MOVQ	out+0(FP), DI
	MOVQ	set+8(FP), SI
	MOVQ	n+16(FP), CX
	MOVQ	bySlot+24(FP), R8
	MOVQ	buckets+64(FP), R9
	MOVSS	x+40(FP), X8
	SHUFPS	$0x00, X8, X8
	MOVSS	z+44(FP), X9
	SHUFPS	$0x00, X9, X9
	MOVSS	falloff+48(FP), X10
	SHUFPS	$0x00, X10, X10
	MOVSS	far+52(FP), X11
	SHUFPS	$0x00, X11, X11
	MOVSS	far2+56(FP), X12
	SHUFPS	$0x00, X12, X12
	MOVL	off+60(FP), AX
	MOVL	AX, X13
	PSHUFD	$0x00, X13, X13
	MOVQ	nslots+32(FP), AX
	MOVL	AX, X14
	PSHUFD	$0x00, X14, X14
	MOVL	$0x3f800000, AX // 1.0
	MOVL	AX, X7
	SHUFPS	$0x00, X7, X7
	XORQ	DX, DX  // i
	XORQ	R10, R10 // nfar
	CMPQ	CX, $0
	JLE	done

group:
	// sl = key << 1 >> 9, every lane below nslots (both below 2^31).
	MOVOU	(SI)(DX*4), X0
	PSLLL	$1, X0
	PSRLL	$9, X0
	MOVO	X14, X1
	PCMPGTL	X0, X1
	MOVMSKPS	X1, AX
	CMPL	AX, $15
	JNE	done

	// The four records (16 bytes each): offsets sl*16.
	MOVO	X0, X1
	PSLLL	$4, X1
	MOVQ	X1, AX
	PSHUFD	$0xEE, X1, X1
	MOVQ	X1, BX
	MOVL	AX, R11
	SHRQ	$32, AX
	MOVL	BX, R12
	SHRQ	$32, BX
	MOVUPS	(R8)(R11*1), X1 // x0 z0 f0 w0
	MOVUPS	(R8)(AX*1), X2  // x1 z1 f1 w1
	MOVUPS	(R8)(R12*1), X3 // x2 z2 f2 w2
	MOVUPS	(R8)(BX*1), X4  // x3 z3 f3 w3
	MOVAPS	X1, X5
	UNPCKLPS	X2, X5 // x0 x1 z0 z1
	MOVAPS	X3, X6
	UNPCKLPS	X4, X6 // x2 x3 z2 z3
	UNPCKHPS	X2, X1 // f0 f1 w0 w1
	UNPCKHPS	X4, X3 // f2 f3 w2 w3
	MOVAPS	X5, X2
	MOVLHPS	X6, X2 // x0 x1 x2 x3
	MOVHLPS	X5, X6 // z0 z1 z2 z3
	MOVHLPS	X1, X3 // w0 w1 w2 w3

	// d2 = dx*dx + dz*dz
	SUBPS	X8, X2
	SUBPS	X9, X6
	MULPS	X2, X2
	MULPS	X6, X6
	ADDPS	X6, X2

	// p = wf * max(1 - d2*falloff, far), its bucket bits(p) >> 21
	MOVAPS	X2, X4
	MULPS	X10, X4
	MOVAPS	X7, X5
	SUBPS	X4, X5
	MAXPS	X11, X5
	MULPS	X3, X5
	PSRLL	$21, X5

	// o = off where far2 - d2 < 0: counted, and added to the slot.
	MOVAPS	X12, X4
	SUBPS	X2, X4
	MOVMSKPS	X4, AX
	POPCNTL	AX, AX
	ADDQ	AX, R10
	PSRAL	$31, X4
	PAND	X13, X4
	PADDL	X4, X0
	MOVOU	X0, (DI)(DX*4)

	// out[i+k] |= buckets[bucket k]
	MOVQ	X5, AX
	PSHUFD	$0xEE, X5, X5
	MOVQ	X5, BX
	MOVL	AX, R11
	SHRQ	$32, AX
	MOVL	(R9)(R11*4), R11
	ORL	R11, (DI)(DX*4)
	MOVL	(R9)(AX*4), AX
	ORL	AX, 4(DI)(DX*4)
	MOVL	BX, R12
	SHRQ	$32, BX
	MOVL	(R9)(R12*4), R12
	ORL	R12, 8(DI)(DX*4)
	MOVL	(R9)(BX*4), BX
	ORL	BX, 12(DI)(DX*4)

	ADDQ	$4, DX
	CMPQ	DX, CX
	JLT	group

done:
	MOVQ	DX, done+72(FP)
	MOVQ	R10, nfar+80(FP)
	RET
