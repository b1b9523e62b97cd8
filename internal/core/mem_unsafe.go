package core

import (
	"sync/atomic"
	"unsafe"
)

// Generic views and primitives on memory, for the layers above.

// View returns the start of b (8-byte aligned, at least sizeof(T) bytes of
// shared memory laid out for T) as a *T. T must hold no Go pointers.
func View[T any](b []byte) *T {
	var z T
	if uintptr(len(b)) < unsafe.Sizeof(z) || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 != 0 {
		panic("core: view of a short or misaligned buffer")
	}
	return (*T)(unsafe.Pointer(unsafe.SliceData(b)))
}

// At returns p as a *T.
func At[T any](p Ptr) *T { return (*T)(p) }

// AddrOf returns the address of x.
func AddrOf[T any](x *T) Ptr { return Ptr(x) }

// OffsetIn returns where field f lies in the struct s it belongs to, in
// bytes from s's start (unsafe.Offsetof, for callers that do not import
// unsafe).
func OffsetIn[S, F any](s *S, f *F) uint64 { return uint64(uintptr(Ptr(f)) - uintptr(Ptr(s))) }

// Add returns p + n.
func Add(p Ptr, n uint64) Ptr { return unsafe.Add(p, n) }

// SliceData returns the address of s's first element and its size in bytes.
func SliceData[T any](s []T) (Ptr, uint64) {
	var z T
	return unsafe.Pointer(unsafe.SliceData(s)), uint64(len(s)) * uint64(unsafe.Sizeof(z))
}

// Overlap reports whether a and b share memory.
func Overlap[T any](a, b []T) bool {
	pa, na := SliceData(a)
	pb, nb := SliceData(b)
	x, y := uintptr(pa), uintptr(pb)
	return na > 0 && nb > 0 && x < y+uintptr(nb) && y < x+uintptr(na)
}

// SliceAt makes a []T of n elements at p (shared memory).
func SliceAt[T any](p Ptr, n int) []T { return unsafe.Slice((*T)(p), n) }

// SizeOf is unsafe.Sizeof for a type parameter.
func SizeOf[T any]() uint64 {
	var z T
	return uint64(unsafe.Sizeof(z))
}

// AlignOf is unsafe.Alignof for a type parameter.
func AlignOf[T any]() uint64 {
	var z T
	return uint64(unsafe.Alignof(z))
}

// Reinterpret views s as a slice of U, as many as fit in its bytes.
func Reinterpret[U, T any](s []T) []U {
	su, st := SizeOf[U](), SizeOf[T]()
	if len(s) == 0 || su == 0 {
		return nil
	}
	return unsafe.Slice((*U)(unsafe.Pointer(unsafe.SliceData(s))), uint64(len(s))*st/su)
}

// CopyBytes copies n bytes from src to dst, as copy does (overlap
// included): two word loads then two word stores for 8 to 16 bytes (a
// transfer of a word or two is the latency that matters most, and the
// call to memmove was a good share of it: docs/bench/design-measurements.md,
// «internal/core, CopyBytes»), the runtime's memmove otherwise.
// Generic for the API's fast paths (see OwnOff), and small enough (inline
// cost 42 of 80) to be inlined into them: a branch to a call more, for
// the large copies of internal/memcopy, would not be (109), and every Put
// would pay a call. So the callers that copy large blocks test for
// memcopy.Large themselves and call memcopy.Move (rma.go).
//
// Memory order: every store of the copy is ordered before the caller's
// next store when CopyBytes returns, as ordinary stores are under TSO:
// the runtime's non-temporal loops (amd64, from 1 MiB) end with SFENCE,
// and memcopy.Move's REP MOVSB is not reordered with later stores. The
// completion rules of the root package (Put, Quiet, Fence, Barrier:
// rma.go) rely on that.
func CopyBytes[T any](dst, src Ptr, n uint64) {
	if n-8 <= 8 { // 8 <= n <= 16
		a := *(*uint64)(src)
		b := *(*uint64)(unsafe.Add(src, n-8))
		*(*uint64)(dst) = a
		*(*uint64)(unsafe.Add(dst, n-8)) = b
		return
	}
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
}

// Bytes views n bytes at p.
func Bytes(p Ptr, n uint64) []byte { return unsafe.Slice((*byte)(p), n) }

// Within returns the offset of p in region r, and whether p lies in it
// (at its end or beyond: false). It compares addresses as integers.
func Within(r []byte, p Ptr) (uint64, bool) {
	off := uint64(uintptr(p) - uintptr(unsafe.Pointer(unsafe.SliceData(r)))) // wraps when below
	return off, off < uint64(len(r))
}

// AtOff returns the address of byte off of region r (off <= len(r)).
func AtOff(r []byte, off uint64) Ptr { return unsafe.Add(unsafe.Pointer(unsafe.SliceData(r)), off) }

// Bump adds one to a statistics counter that only this process writes:
// a plain load and store. An atomic increment (any sync/atomic write is a
// locked instruction on amd64) costs the hot paths more than the count is
// worth. Readers (symheap stat) load the word atomically, and an aligned
// 8-byte store is never torn on the 64-bit targets symheap runs on. Two
// goroutines of one PE may lose an increment between them, which a
// statistic can afford.
func Bump(c *atomic.Uint64) {
	p := (*uint64)(unsafe.Pointer(c))
	*p++
}

// SetPlain stores v into a word that a later sequentially consistent
// store publishes: an ordinary store, ordered before the publishing one
// by x86-64 TSO and by the release semantics of arm64's STLR.
func SetPlain(w *atomic.Uint64, v uint64) {
	*(*uint64)(unsafe.Pointer(w)) = v
}

// WordAddr returns the address of an atomic word, for the futex syscall.
func WordAddr(w *atomic.Uint32) Ptr { return unsafe.Pointer(w) }

// Word is the integer types the atomics work on.
type Word interface {
	~int32 | ~int64 | ~uint32 | ~uint64
}

// The typed atomic primitives. Each is one sync/atomic operation on a word
// in shared memory, sequentially consistent, and therefore a full fence
// on amd64 (LOCK-prefixed or XCHG) and arm64 (acquire-release forms). The
// size switch is resolved at compile time for each instantiation.

func Load[T Word](p *T) T {
	if unsafe.Sizeof(*p) == 4 {
		return T(atomic.LoadUint32((*uint32)(unsafe.Pointer(p))))
	}
	return T(atomic.LoadUint64((*uint64)(unsafe.Pointer(p))))
}

func Store[T Word](p *T, v T) {
	if unsafe.Sizeof(*p) == 4 {
		atomic.StoreUint32((*uint32)(unsafe.Pointer(p)), uint32(v))
		return
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(p)), uint64(v))
}

func Swap[T Word](p *T, v T) T {
	if unsafe.Sizeof(*p) == 4 {
		return T(atomic.SwapUint32((*uint32)(unsafe.Pointer(p)), uint32(v)))
	}
	return T(atomic.SwapUint64((*uint64)(unsafe.Pointer(p)), uint64(v)))
}

// CAS stores new if *p == old and returns the value it found.
func CAS[T Word](p *T, old, new T) T {
	for {
		if unsafe.Sizeof(*p) == 4 {
			if atomic.CompareAndSwapUint32((*uint32)(unsafe.Pointer(p)), uint32(old), uint32(new)) {
				return old
			}
		} else if atomic.CompareAndSwapUint64((*uint64)(unsafe.Pointer(p)), uint64(old), uint64(new)) {
			return old
		}
		// Failed: report what is there now, unless it changed back to
		// old in between (then try again: the answer must be a value
		// the word held while the swap was refused).
		if cur := Load(p); cur != old {
			return cur
		}
	}
}

// FetchAdd adds v and returns the previous value.
func FetchAdd[T Word](p *T, v T) T {
	if unsafe.Sizeof(*p) == 4 {
		return T(atomic.AddUint32((*uint32)(unsafe.Pointer(p)), uint32(v)) - uint32(v))
	}
	return T(atomic.AddUint64((*uint64)(unsafe.Pointer(p)), uint64(v)) - uint64(v))
}

func FetchAnd[T Word](p *T, v T) T {
	if unsafe.Sizeof(*p) == 4 {
		return T(atomic.AndUint32((*uint32)(unsafe.Pointer(p)), uint32(v)))
	}
	return T(atomic.AndUint64((*uint64)(unsafe.Pointer(p)), uint64(v)))
}

func FetchOr[T Word](p *T, v T) T {
	if unsafe.Sizeof(*p) == 4 {
		return T(atomic.OrUint32((*uint32)(unsafe.Pointer(p)), uint32(v)))
	}
	return T(atomic.OrUint64((*uint64)(unsafe.Pointer(p)), uint64(v)))
}

// FetchXor has no single instruction that returns the old value: a
// compare-and-swap loop.
func FetchXor[T Word](p *T, v T) T {
	for {
		old := Load(p)
		if unsafe.Sizeof(*p) == 4 {
			if atomic.CompareAndSwapUint32((*uint32)(unsafe.Pointer(p)), uint32(old), uint32(old^v)) {
				return old
			}
		} else if atomic.CompareAndSwapUint64((*uint64)(unsafe.Pointer(p)), uint64(old), uint64(old^v)) {
			return old
		}
	}
}

// FullFence orders every load and store before it against every one
// after it: an atomic read-modify-write of a private word (LOCK XADD on
// amd64; LDADDAL on arm64).
func FullFence() {
	var w atomic.Uint32
	w.Add(1)
}
