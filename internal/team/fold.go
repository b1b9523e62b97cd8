package team

import "github.com/symheap/symheap/internal/core"

// CheckOp and Fold give the root package's multi-node collectives
// (internal/far) this package's checks and folding loops.

// CheckOp refuses unknown reduction operations and bitwise ones on
// floats, with the error Reduce returns.
func CheckOp[T Number](op Op) error { return checkOp[T](op) }

// Fold folds x into acc element by element (acc[i] = acc[i] op x[i]);
// len(x) >= len(acc), and op has passed CheckOp.
func Fold[T Number](acc, x []T, op Op) {
	if len(acc) == 0 {
		return
	}
	a, _ := core.SliceData(acc)
	b, _ := core.SliceData(x)
	combine[T](a, b, len(acc), op)
}
