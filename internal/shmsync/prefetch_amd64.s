//go:build !race

#include "textflag.h"

// func PrefetchW(p unsafe.Pointer)
TEXT ·PrefetchW(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ p+0(FP), AX
	// PREFETCHW (AX): 0F 0D /1 (the Go assembler has no mnemonic for it).
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	RET

// func PrefetchR(p unsafe.Pointer)
TEXT ·PrefetchR(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET
