//go:build !race

#include "textflag.h"

// func prefetchW(p *postLine)
TEXT ·prefetchW(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ p+0(FP), AX
	// PREFETCHW (AX): 0F 0D /1 (the Go assembler has no mnemonic for it).
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	RET

// func prefetchR(p *postLine)
TEXT ·prefetchR(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET
