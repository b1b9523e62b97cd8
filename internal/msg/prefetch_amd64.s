//go:build !race

#include "textflag.h"

// func prefetchW(p *atomic.Uint64)
TEXT ·prefetchW(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ p+0(FP), AX
	// PREFETCHW (AX): 0F 0D /1 (the Go assembler has no mnemonic for it).
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	RET
