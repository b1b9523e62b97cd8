// Package errs holds symheap's sentinel errors in one place. The public
// packages re-export them (symheap.ErrOutOfMemory is errs.ErrOutOfMemory),
// so errors.Is works whichever package a caller imports.
package errs

import "errors"

var (
	ErrOutOfMemory  = errors.New("out of memory")
	ErrNotSymmetric = errors.New("address not in the symmetric heap")
	ErrBadPE        = errors.New("no such PE")
	ErrBadAlign     = errors.New("bad alignment")
	ErrPointerType  = errors.New("element type holds pointers")
	ErrBadFree      = errors.New("bad free")
	ErrDiverged     = errors.New("PEs made different collective calls")
	ErrPeerLost     = errors.New("a PE of the job is gone")
	ErrTruncated    = errors.New("message truncated")
	ErrBadOp        = errors.New("operation not defined for this type")
	ErrClosed       = errors.New("PE is closed")
	ErrBadArg       = errors.New("bad argument")
	ErrBadConfig    = errors.New("bad configuration")
	ErrSegment      = errors.New("shared segment unusable")
	ErrNotSupported = errors.New("not supported here")
)
