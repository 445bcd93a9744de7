//go:build amd64

#include "textflag.h"

// scanPack: for each 4-bit keep mask, the PSHUFB control that moves the
// kept lanes' dwords, in lane order, to the front of the register.
DATA scanPack<>+0x0(SB)/8, $0x8080808080808080
DATA scanPack<>+0x8(SB)/8, $0x8080808080808080
DATA scanPack<>+0x10(SB)/8, $0x8080808003020100
DATA scanPack<>+0x18(SB)/8, $0x8080808080808080
DATA scanPack<>+0x20(SB)/8, $0x8080808007060504
DATA scanPack<>+0x28(SB)/8, $0x8080808080808080
DATA scanPack<>+0x30(SB)/8, $0x706050403020100
DATA scanPack<>+0x38(SB)/8, $0x8080808080808080
DATA scanPack<>+0x40(SB)/8, $0x808080800b0a0908
DATA scanPack<>+0x48(SB)/8, $0x8080808080808080
DATA scanPack<>+0x50(SB)/8, $0xb0a090803020100
DATA scanPack<>+0x58(SB)/8, $0x8080808080808080
DATA scanPack<>+0x60(SB)/8, $0xb0a090807060504
DATA scanPack<>+0x68(SB)/8, $0x8080808080808080
DATA scanPack<>+0x70(SB)/8, $0x706050403020100
DATA scanPack<>+0x78(SB)/8, $0x808080800b0a0908
DATA scanPack<>+0x80(SB)/8, $0x808080800f0e0d0c
DATA scanPack<>+0x88(SB)/8, $0x8080808080808080
DATA scanPack<>+0x90(SB)/8, $0xf0e0d0c03020100
DATA scanPack<>+0x98(SB)/8, $0x8080808080808080
DATA scanPack<>+0xa0(SB)/8, $0xf0e0d0c07060504
DATA scanPack<>+0xa8(SB)/8, $0x8080808080808080
DATA scanPack<>+0xb0(SB)/8, $0x706050403020100
DATA scanPack<>+0xb8(SB)/8, $0x808080800f0e0d0c
DATA scanPack<>+0xc0(SB)/8, $0xf0e0d0c0b0a0908
DATA scanPack<>+0xc8(SB)/8, $0x8080808080808080
DATA scanPack<>+0xd0(SB)/8, $0xb0a090803020100
DATA scanPack<>+0xd8(SB)/8, $0x808080800f0e0d0c
DATA scanPack<>+0xe0(SB)/8, $0xb0a090807060504
DATA scanPack<>+0xe8(SB)/8, $0x808080800f0e0d0c
DATA scanPack<>+0xf0(SB)/8, $0x706050403020100
DATA scanPack<>+0xf8(SB)/8, $0xf0e0d0c0b0a0908
// Then, at +256, the lanes of a run's last group that are its
// candidates, by how many it has left (1–3), a byte each.
DATA scanPack<>+0x100(SB)/4, $0x07030100
GLOBL scanPack<>(SB), RODATA|NOPTR, $260

// func scan4(out *Entry, base *candidate, marks *uint8, runs *grid.Run, nruns int, x, z, enter2, leave2 float32, tok uint32) (o, kept int)
//
// scan.run over every run, four candidates at a time: the same float32
// operations in the same order a lane (SUBPS, MULPS, ADDPS round as SUBSS,
// MULSS, ADDSS; CMPPS LE is false on NaN as UCOMISS/SETAE), the kept keys
// packed to out in candidate order, o of them, kept of them marked. A
// run's last group reads up to 3 candidates and marks past its end and
// drops those lanes; every group writes 4 entries at out[o].
TEXT ·scan4(SB), NOSPLIT, $0-80
	MOVQ	out+0(FP), DI
	MOVQ	runs+24(FP), CX
	MOVQ	nruns+32(FP), R10
	SHLQ	$3, R10
	ADDQ	CX, R10 // the runs' end
	MOVSS	x+40(FP), X8
	SHUFPS	$0x00, X8, X8
	MOVSS	z+44(FP), X9
	SHUFPS	$0x00, X9, X9
	MOVSS	enter2+48(FP), X10
	SHUFPS	$0x00, X10, X10
	MOVSS	leave2+52(FP), X11
	SHUFPS	$0x00, X11, X11
	MOVL	tok+56(FP), AX
	IMULL	$0x01010101, AX
	MOVL	AX, X12
	PSHUFD	$0x00, X12, X12
	LEAQ	scanPack<>(SB), R9
	XORQ	R11, R11 // o
	XORQ	R12, R12 // kept

run:
	CMPQ	CX, R10
	JGE	done
	MOVLQSX	0(CX), DX  // i = run.A
	MOVLQSX	4(CX), R14 // run.B
	ADDQ	$8, CX
	CMPQ	DX, R14
	JGE	run
	MOVQ	DX, SI
	SHLQ	$4, SI
	ADDQ	base+8(FP), SI // &base[i]
	MOVQ	marks+16(FP), R8
	ADDQ	DX, R8 // &marks[i]

group:
	// Four 16-byte candidates {x, z, key, factor}, transposed.
	MOVUPS	0(SI), X0
	MOVUPS	16(SI), X1
	MOVUPS	32(SI), X2
	MOVUPS	48(SI), X3
	MOVAPS	X0, X4
	UNPCKLPS	X1, X4 // x0 x1 z0 z1
	MOVAPS	X2, X5
	UNPCKLPS	X3, X5 // x2 x3 z2 z3
	UNPCKHPS	X1, X0 // k0 k1 f0 f1
	UNPCKHPS	X3, X2 // k2 k3 f2 f3
	MOVAPS	X4, X6
	MOVLHPS	X5, X6 // x0 x1 x2 x3
	MOVHLPS	X4, X5 // z0 z1 z2 z3
	MOVLHPS	X2, X0 // k0 k1 k2 k3

	// d2 = dx*dx + dz*dz
	SUBPS	X8, X6
	SUBPS	X9, X5
	MULPS	X6, X6
	MULPS	X5, X5
	ADDPS	X5, X6

	// was: the candidate's mark is the update's token (a lane of ones).
	MOVL	(R8), AX
	MOVL	AX, X7
	PCMPEQB	X12, X7
	PUNPCKLBW	X7, X7
	PUNPCKLWL	X7, X7

	// keep = d2 <= enter2 | was & d2 <= leave2
	MOVAPS	X6, X13
	CMPPS	X10, X13, $2
	CMPPS	X11, X6, $2
	ANDPS	X7, X6
	ORPS	X6, X13
	ANDPS	X13, X7 // keep & was
	MOVMSKPS	X13, AX
	MOVMSKPS	X7, BX

	// A run's last group: only its candidates' lanes.
	MOVQ	R14, R13
	SUBQ	DX, R13
	CMPQ	R13, $4
	JGE	pack
	MOVBQZX	256(R9)(R13*1), R13
	ANDQ	R13, AX
	ANDQ	R13, BX

pack:
	// The kept keys to out[o:], in order.
	MOVQ	AX, R13
	SHLQ	$4, R13
	MOVOU	(R9)(R13*1), X14
	PSHUFB	X14, X0
	MOVOU	X0, (DI)(R11*4)
	POPCNTQ	AX, AX
	ADDQ	AX, R11
	POPCNTQ	BX, BX
	ADDQ	BX, R12

	ADDQ	$64, SI
	ADDQ	$4, R8
	ADDQ	$4, DX
	CMPQ	DX, R14
	JLT	group
	JMP	run

done:
	MOVQ	R11, o+64(FP)
	MOVQ	R12, kept+72(FP)
	RET
