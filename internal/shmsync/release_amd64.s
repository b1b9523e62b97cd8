//go:build !race

#include "textflag.h"

// func storeRelease32(w *atomic.Uint32, v uint32)
TEXT ·storeRelease32(SB), NOSPLIT, $0-12
	MOVQ w+0(FP), AX
	MOVL v+8(FP), BX
	MOVL BX, 0(AX)
	RET

// func storeRelease64(w *atomic.Uint64, v uint64)
TEXT ·storeRelease64(SB), NOSPLIT, $0-16
	MOVQ w+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, 0(AX)
	RET
