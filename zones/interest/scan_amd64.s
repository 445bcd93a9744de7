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

// func scan4(out *Entry, bx, bz *float32, bkey *uint32, marks *uint8, runs *grid.Run, nruns int, x, z, enter2, leave2 float32, tok uint32) (o, kept int)
//
// scan.run over every run, four candidates at a time: the same float32
// operations in the same order a lane (SUBPS, MULPS, ADDPS round as SUBSS,
// MULSS, ADDSS; CMPPS LE is false on NaN as UCOMISS/SETAE), the kept keys
// packed to out in candidate order, o of them, kept of them marked. A
// run's last group reads up to 3 candidates and marks past its end and
// drops those lanes; every group writes 4 entries at out[o]. The run
// cursor and the runs' end live in the runs and nruns argument slots:
// every register is taken by the loop.
TEXT ·scan4(SB), NOSPLIT, $0-96
	MOVQ	out+0(FP), DI
	MOVQ	bx+8(FP), SI
	MOVQ	bz+16(FP), R8
	MOVQ	bkey+24(FP), R10
	MOVQ	marks+32(FP), R13
	MOVQ	runs+40(FP), CX
	MOVQ	nruns+48(FP), AX
	SHLQ	$3, AX
	ADDQ	CX, AX
	MOVQ	AX, nruns+48(FP) // the runs' end
	MOVSS	x+56(FP), X8
	SHUFPS	$0x00, X8, X8
	MOVSS	z+60(FP), X9
	SHUFPS	$0x00, X9, X9
	MOVSS	enter2+64(FP), X10
	SHUFPS	$0x00, X10, X10
	MOVSS	leave2+68(FP), X11
	SHUFPS	$0x00, X11, X11
	MOVL	tok+72(FP), AX
	IMULL	$0x01010101, AX
	MOVL	AX, X12
	PSHUFD	$0x00, X12, X12
	LEAQ	scanPack<>(SB), R9
	XORQ	R11, R11 // o
	XORQ	R12, R12 // kept

run:
	MOVQ	runs+40(FP), CX
	CMPQ	CX, nruns+48(FP)
	JGE	done
	MOVLQSX	0(CX), DX  // i = run.A
	MOVLQSX	4(CX), R14 // run.B
	ADDQ	$8, CX
	MOVQ	CX, runs+40(FP)
	CMPQ	DX, R14
	JGE	run

group:
	MOVUPS	(SI)(DX*4), X6 // x0 x1 x2 x3
	MOVUPS	(R8)(DX*4), X5 // z0 z1 z2 z3
	MOVUPS	(R10)(DX*4), X0 // k0 k1 k2 k3

	// d2 = dx*dx + dz*dz
	SUBPS	X8, X6
	SUBPS	X9, X5
	MULPS	X6, X6
	MULPS	X5, X5
	ADDPS	X5, X6

	// was: the candidate's mark is the update's token (a lane of ones).
	MOVL	(R13)(DX*1), AX
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
	MOVQ	R14, CX
	SUBQ	DX, CX
	CMPQ	CX, $4
	JGE	pack
	MOVBQZX	256(R9)(CX*1), CX
	ANDQ	CX, AX
	ANDQ	CX, BX

pack:
	// The kept keys to out[o:], in order.
	MOVQ	AX, CX
	SHLQ	$4, CX
	MOVOU	(R9)(CX*1), X14
	PSHUFB	X14, X0
	MOVOU	X0, (DI)(R11*4)
	POPCNTQ	AX, AX
	ADDQ	AX, R11
	POPCNTQ	BX, BX
	ADDQ	BX, R12

	ADDQ	$4, DX
	CMPQ	DX, R14
	JLT	group
	JMP	run

done:
	MOVQ	R11, o+80(FP)
	MOVQ	R12, kept+88(FP)
	RET
