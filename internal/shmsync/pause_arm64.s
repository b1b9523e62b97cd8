#include "textflag.h"

// func Pause()
TEXT ·Pause(SB), NOSPLIT|NOFRAME, $0-0
	YIELD
	RET
