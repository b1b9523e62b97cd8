package symheap

import "github.com/symheap/symheap/internal/errs"

// Sentinel errors. Every error symheap returns wraps one of these with the
// detail a user needs to act; test for them with errors.Is.
var (
	ErrOutOfMemory  = errs.ErrOutOfMemory  // a heap is full; the message names the size and the variable that raises it
	ErrNotSymmetric = errs.ErrNotSymmetric // an address is not in the symmetric heap
	ErrBadPE        = errs.ErrBadPE        // a PE number out of range
	ErrBadAlign     = errs.ErrBadAlign     // an alignment of 0 or not a power of two, or a misaligned atomic
	ErrPointerType  = errs.ErrPointerType  // an element type that holds Go pointers
	ErrBadFree      = errs.ErrBadFree      // double free, foreign or interior pointer
	ErrDiverged     = errs.ErrDiverged     // PEs made different collective calls (allocations, calls of different kinds, or one call with different sizes or roots)
	ErrPeerLost     = errs.ErrPeerLost     // a PE died or stopped answering
	ErrTruncated    = errs.ErrTruncated    // a receive buffer shorter than the message
	ErrBadOp        = errs.ErrBadOp        // a bitwise reduction on floating-point data
	ErrClosed       = errs.ErrClosed       // use after Close
	ErrBadArg       = errs.ErrBadArg       // an argument out of its domain (negative sizes, short buffers, ...)
	ErrBadConfig    = errs.ErrBadConfig    // a malformed environment variable or Config field
	ErrSegment      = errs.ErrSegment      // the job's shared segment cannot be made, joined or used (Init; the message says why)
	ErrNotSupported = errs.ErrNotSupported // the operation needs something this job or machine lacks (the message says what)
)
