//go:build !race

#include "textflag.h"
#include "go_asm.h"

// func repMovsb(dst, src unsafe.Pointer, n uintptr)
TEXT ·repMovsb(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	CLD
	REP;	MOVSB
	RET

// func cpuid(leaf, sub uint32) (a, b, c, d uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL	leaf+0(FP), AX
	MOVL	sub+4(FP), CX
	CPUID
	MOVL	AX, a+8(FP)
	MOVL	BX, b+12(FP)
	MOVL	CX, c+16(FP)
	MOVL	DX, d+20(FP)
	RET

// CLEAN_UPPER zeroes the vector registers the copy used (a zeroing idiom
// each, which the core handles at rename). Upper halves left non-zero in
// Z16-Z31 are beyond VZEROUPPER's reach, and while they are, the 32-byte
// AVX code that runs after (the runtime's memmove from 257 bytes) runs
// slower: Get and Put of 2-4 KiB took 8-12% longer after a copy by this
// routine, and as long as before once these lines were in.
#define CLEAN_UPPER \
	VPXORQ	Z16, Z16, Z16; \
	VPXORQ	Z17, Z17, Z17; \
	VPXORQ	Z18, Z18, Z18; \
	VPXORQ	Z19, Z19, Z19; \
	VPXORQ	Z20, Z20, Z20; \
	VPXORQ	Z21, Z21, Z21; \
	VPXORQ	Z22, Z22, Z22; \
	VPXORQ	Z23, Z23, Z23; \
	VPXORQ	Z24, Z24, Z24

// func Move(dst, src unsafe.Pointer, n uintptr)
//
// The vector copy below when useVec is set, Small <= n <= LocalMax or
// Large <= n < vecBelow, and the blocks are apart; every other copy goes
// on to moveGo, with the same arguments (a tail jump).
TEXT ·Move(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), BX
	CMPB	·useVec(SB), $0
	JEQ	other
	LEAQ	-const_Small(BX), AX
	CMPQ	AX, $(const_LocalMax-const_Small)
	JHI	large
apart:
	MOVQ	DI, AX
	SUBQ	SI, AX
	CMPQ	AX, BX
	JCS	other // dst - src < n: dst starts inside src
	MOVQ	SI, AX
	SUBQ	DI, AX
	CMPQ	AX, BX
	JCS	other // src starts inside dst

// The vector copy: n bytes, n >= Small, between blocks that do not
// overlap, with EVEX-encoded vector registers 16 to 31 (AVX-512F):
// their upper halves are not the ones VZEROUPPER clears, so the SSE code
// that runs after (the runtime's) pays no transition.
//
//   129-256 B   four 64-byte moves, two from each end
//   257 B up    the last 256 bytes loaded first (kept in Z20-Z23), one
//               64-byte move at the start, then 256 bytes a round from the
//               destination's first 64-byte boundary (aligned stores),
//               and the saved 256 bytes stored last. Rounds and ends
//               overlap by less than 256 bytes: harmless, since the
//               blocks are apart.
vector:
	CMPQ	BX, $256
	JA	above256
	VMOVDQU64	(SI), Z16
	VMOVDQU64	64(SI), Z17
	VMOVDQU64	-128(SI)(BX*1), Z18
	VMOVDQU64	-64(SI)(BX*1), Z19
	VMOVDQU64	Z16, (DI)
	VMOVDQU64	Z17, 64(DI)
	VMOVDQU64	Z18, -128(DI)(BX*1)
	VMOVDQU64	Z19, -64(DI)(BX*1)
	CLEAN_UPPER
	RET

above256:
	VMOVDQU64	-256(SI)(BX*1), Z20
	VMOVDQU64	-192(SI)(BX*1), Z21
	VMOVDQU64	-128(SI)(BX*1), Z22
	VMOVDQU64	-64(SI)(BX*1), Z23
	LEAQ	-256(DI)(BX*1), R9
	VMOVDQU64	(SI), Z24
	VMOVDQU64	Z24, (DI)
	// CX = 64 - DI%64: the bytes up to the next 64-byte boundary (1-64,
	// all copied by the move above).
	MOVQ	DI, AX
	ANDQ	$63, AX
	MOVQ	$64, CX
	SUBQ	AX, CX
	ADDQ	CX, DI
	ADDQ	CX, SI
	SUBQ	CX, BX
	// BX = bytes from DI to the start of the saved last 256 (may be
	// negative: no round).
	SUBQ	$256, BX
	JBE	last
round:
	VMOVDQU64	(SI), Z16
	VMOVDQU64	64(SI), Z17
	VMOVDQU64	128(SI), Z18
	VMOVDQU64	192(SI), Z19
	VMOVDQA64	Z16, (DI)
	VMOVDQA64	Z17, 64(DI)
	VMOVDQA64	Z18, 128(DI)
	VMOVDQA64	Z19, 192(DI)
	ADDQ	$256, SI
	ADDQ	$256, DI
	SUBQ	$256, BX
	JA	round
last:
	VMOVDQU64	Z20, (R9)
	VMOVDQU64	Z21, 64(R9)
	VMOVDQU64	Z22, 128(R9)
	VMOVDQU64	Z23, 192(R9)
	CLEAN_UPPER
	RET

// From Large up to vecBelow (0 but on AMD) the vector copy as well.
large:
	CMPQ	BX, ·vecBelow(SB)
	JCC	other // n >= vecBelow
	CMPQ	BX, $const_Large
	JCC	apart // Large <= n < vecBelow

other:
	CMPQ	BX, $const_Large
	JCS	memmove
	JMP	·moveGo(SB)
memmove:
	JMP	runtime·memmove(SB)

// func ntMove(dst, src unsafe.Pointer, n uintptr)
//
// Copies n >= 256 bytes between blocks that do not overlap with
// non-temporal (streaming) stores, which write whole lines to memory
// without reading them into the cache first, and ends with SFENCE, which
// orders those weakly ordered stores before every later store of the
// caller (package doc, "Memory order"):
//
//   the first 64 bytes and the last 128 bytes with ordinary moves (the
//   last ones loaded first, stored last); in between, 128 bytes a round
//   from the destination's first 64-byte boundary, 16-byte loads and
//   MOVNTDQ stores, so that each round fills two whole lines of the
//   destination. The ends overlap the rounds by less than 128 bytes, with
//   the same bytes: harmless, since the blocks are apart.
TEXT ·ntMove(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), BX
	LEAQ	-128(DI)(BX*1), R9
	LEAQ	-128(SI)(BX*1), R10
	MOVOU	(SI), X0
	MOVOU	16(SI), X1
	MOVOU	32(SI), X2
	MOVOU	48(SI), X3
	MOVOU	X0, (DI)
	MOVOU	X1, 16(DI)
	MOVOU	X2, 32(DI)
	MOVOU	X3, 48(DI)
	// CX = 64 - DI%64: the bytes up to the next 64-byte boundary (1-64,
	// all copied above).
	MOVQ	DI, AX
	ANDQ	$63, AX
	MOVQ	$64, CX
	SUBQ	AX, CX
	ADDQ	CX, DI
	ADDQ	CX, SI
	SUBQ	CX, BX
	// BX = bytes from DI to the start of the saved last 128.
	SUBQ	$128, BX
	JBE	ntLast
ntRound:
	MOVOU	(SI), X0
	MOVOU	16(SI), X1
	MOVOU	32(SI), X2
	MOVOU	48(SI), X3
	MOVOU	64(SI), X4
	MOVOU	80(SI), X5
	MOVOU	96(SI), X6
	MOVOU	112(SI), X7
	MOVNTO	X0, (DI)
	MOVNTO	X1, 16(DI)
	MOVNTO	X2, 32(DI)
	MOVNTO	X3, 48(DI)
	MOVNTO	X4, 64(DI)
	MOVNTO	X5, 80(DI)
	MOVNTO	X6, 96(DI)
	MOVNTO	X7, 112(DI)
	ADDQ	$128, SI
	ADDQ	$128, DI
	SUBQ	$128, BX
	JA	ntRound
ntLast:
	MOVOU	(R10), X0
	MOVOU	16(R10), X1
	MOVOU	32(R10), X2
	MOVOU	48(R10), X3
	MOVOU	64(R10), X4
	MOVOU	80(R10), X5
	MOVOU	96(R10), X6
	MOVOU	112(R10), X7
	MOVOU	X0, (R9)
	MOVOU	X1, 16(R9)
	MOVOU	X2, 32(R9)
	MOVOU	X3, 48(R9)
	MOVOU	X4, 64(R9)
	MOVOU	X5, 80(R9)
	MOVOU	X6, 96(R9)
	MOVOU	X7, 112(R9)
	SFENCE
	RET
