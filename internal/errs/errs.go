// Package errs holds symheap's sentinel errors in one place. The public
// packages re-export them (symheap.ErrOutOfMemory is errs.ErrOutOfMemory),
// so errors.Is works whichever package a caller imports.
package errs

import "errors"

var (
	ErrOutOfMemory  = errors.New("symheap: out of memory")
	ErrNotSymmetric = errors.New("symheap: address not in the symmetric heap")
	ErrBadPE        = errors.New("symheap: no such PE")
	ErrBadAlign     = errors.New("symheap: bad alignment")
	ErrPointerType  = errors.New("symheap: element type holds pointers")
	ErrBadFree      = errors.New("symheap: bad free")
	ErrDiverged     = errors.New("symheap: PEs made different collective allocations")
	ErrPeerLost     = errors.New("symheap: a PE of the job is gone")
	ErrTruncated    = errors.New("symheap: message truncated")
	ErrBadOp        = errors.New("symheap: operation not defined for this type")
	ErrClosed       = errors.New("symheap: PE is closed")
	ErrBadArg       = errors.New("symheap: bad argument")
	ErrBadConfig    = errors.New("symheap: bad configuration")
	ErrSegment      = errors.New("symheap: shared segment unusable")
	ErrNotSupported = errors.New("symheap: not supported here")
)
