package symheap

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/memcopy"
	"github.com/symheap/symheap/internal/transport"

	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/unix"
)

// One-sided access (RMA).
//
// Every PE maps every partition, so a put is a CPU copy from the caller's
// memory into the target's copy of a symmetric object, and a get is the
// reverse; there is no transport, no progress engine and no helper thread.
// The symmetric side of a transfer is located by its offset in the
// symmetric heap, and the other PE's copy is that offset in its partition
// (core.Target): correct with or without the same-address mapping.
//
// # Completion: Put, NBI, Fence and Quiet
//
// A copy is done, as far as this PE goes, when the CPU has executed its
// stores. Three things remain, and the routines divide them as OpenSHMEM
// 1.5 does (a blocking put completes locally; quiet completes remotely):
//
//   - order among this PE's stores: on amd64 (TSO) other CPUs see them in
//     program order anyway; on arm64 only a barrier orders them;
//   - order between this PE's stores and its later loads, which the CPU
//     may let pass the stores still in its store buffer: only a full fence
//     (a locked instruction) prevents it;
//   - waking a PE asleep in WaitUntil on the data (wait.go).
//
// The routines:
//
//  1. Put, IPut: the copy, then the wake-up step: load the target's
//     sleepers count and, only if it is non-zero, bump its signal word and
//     FutexWake it. No fence: a waiter that goes to sleep makes every
//     writer's stores visible to itself with an asymmetric fence
//     (membarrier, wait.go), so the common path makes no syscall, executes
//     no locked instruction and writes no shared cache line but the data.
//     (Where membarrier is not available a put fences instead.) On return
//     src may be reused, and the data reach the target by themselves
//     within nanoseconds.
//  2. PutNBI: the copy only; even the wake-up step waits for the next
//     completion point. A sleeper still re-reads its condition every
//     shmsync.SleepSlice, so an NBI put that is never quieted is seen.
//  3. Get, IGet, GetNBI: the copy; dst holds the data on return. GetNBI is
//     therefore complete at once, which OpenSHMEM allows.
//  4. Quiet: completes every put, NBI put, atomic and Ptr store this PE
//     made: they are visible to every PE, ordered before this PE's later
//     stores and before its later loads made through the API, and PEs
//     waiting for them are woken (the wake-up step for every PE with
//     sleepers). Barrier and ClearLock begin with it; every collective
//     allocation completes puts the same way.
//  5. Fence: the same as Quiet. OpenSHMEM's fence only orders puts to
//     each PE; with stores into one coherent memory, the cheapest ordering
//     is completion itself.
//
// # Quiet's fence, owed to the next load
//
// On amd64 the first two points cost Quiet nothing but the store-to-load
// order, and that order matters only to a load that comes after the Quiet.
// So Quiet does not fence there: it records that a fence is owed
// (rmaLayer.owed), and the next operation of this PE that loads shared
// memory — Get, IGet, GetNBI, AtomicFetch, WaitUntil, Test — pays it
// first (the other atomics are full fences themselves; Barrier and the
// collective allocation calls begin with Quiet's part and owe the fence
// the same way). A put-heavy loop of Put and Quiet thus runs without
// a single locked instruction, as Open MPI's shmem_quiet over UCX does on
// x86 (UCX's CPU fences are compiler fences there), while a program that
// puts, quiets and then reads through the API still reads after its puts
// are visible everywhere, as OpenSHMEM requires (Dekker-style exchanges
// included). The one thing left to the program: a plain load through a
// slice (a local symmetric variable, a Ptr view) right after Quiet may
// still pass the Quiet's puts on amd64; an algorithm that needs that
// order reads with Test or AtomicFetch instead. Where this process could
// not register for membarrier, and on every other architecture, Quiet
// executes the fence itself.
//
// Copies that memcopy.Better takes (129 bytes to 1 KiB, where the CPU has
// 64-byte vector registers, and from 1 MiB; for a Get, memcopy.BetterLocal,
// up to 16 KiB) go through memcopy.Move:
// the first with ordinary 64-byte vector stores, the others with REP
// MOVSB or the runtime's memmove, which on amd64 may use non-temporal
// stores; x86 keeps those in order neither with each other
// nor with later ordinary stores. All are safe here: the stores of a REP
// MOVSB are not reordered with the stores after it, and the runtime ends
// every non-temporal loop with SFENCE. So by the time a Put returns its
// stores are ordered before this PE's later stores as ordinary ones are,
// and the argument above (TSO orders stores; Quiet owes only the
// store-to-load fence) holds for copies of every size.
//
// Atomics (atomic.go) are single sync/atomic operations on the target's
// word, themselves full fences, followed by the wake-up step.
//
// # Arguments
//
// Put and Get copy len(src) elements. The symmetric side (dst of a put,
// src of a get) must lie wholly in the symmetric heap (ErrNotSymmetric);
// it may be this PE's copy, as Malloc returned it, or any PE's (from Ptr).
// A destination shorter than src is ErrBadArg, a PE out of range ErrBadPE,
// an element type holding Go pointers ErrPointerType. Zero elements do
// nothing, after the PE and type checks. Strides of IPut and IGet count
// elements and must be at least 1. Put and Get test the common case (a
// basic element type, a transfer within this PE's own heap) in a few
// compares and leave the rest, and every error message, to a slow path
// (putSlow, getSlow) that repeats the checks in the order above.

// rmaLayer is one-sided access as this process runs it: the completion
// and wake-up protocol of puts and atomics (this file), the waits on a
// PE's signal word (wait.go), and the path to each PE (transport.go).
//
// Locks: none on the paths of puts, gets, atomics and waits, which use
// atomics only; mbMu serialises the one registration for membarrier.
// Its fields other than mb and owed are set in Init (and by useRemote
// before the PE is used) and read-only after.
type rmaLayer struct {
	ctl        []*control // every PE's control block (pe.ctl)
	stats      *core.Stats
	rank, npes int

	// mb says whether this process is registered for asymmetric fences
	// (membarrier): mbReady, puts need no fence; mbNone, they fence.
	mb   atomic.Int32
	mbMu sync.Mutex // serialises the registration

	// owed: a Quiet has skipped its full fence, which the next loading
	// operation of this PE must execute first (see "Quiet's fence" above).
	// Process-local: only this PE's own loads need the fence.
	owed atomic.Bool

	// The transport seam (transport.go).
	far    bool                  // some PE is reached through remote
	paths  []transport.Path      // by rank, when far
	remote transport.Remote      // the transport to far PEs, when far
	farErr atomic.Pointer[error] // the first error of a Quiet of remote, for the next Barrier
}

// lazyQuiet is whether Quiet may defer its fence (amd64's TSO keeps
// stores in order without it; see above).
const lazyQuiet = runtime.GOARCH == "amd64"

// States of rmaLayer.mb.
const (
	mbUnknown = 0
	mbReady   = 1
	mbNone    = 2
)

// Operation names, for errors.
const (
	opPut    = "Put"
	opGet    = "Get"
	opPutNBI = "PutNBI"
	opGetNBI = "GetNBI"
	opIPut   = "IPut"
	opIGet   = "IGet"
)

// Put copies src into PE target's copy of the symmetric object dst. On
// return src may be reused; the data are visible to every PE at the next
// Quiet at the latest (in practice at once), and a PE waiting for them in
// WaitUntil has been woken.
func Put[T any](pe *PE, dst, src []T, target int) error {
	if !basic[T]() || pe == nil || pe.closed.Load() || len(src) == 0 || len(dst) < len(src) || uint(target) >= uint(pe.npes) || pe.rma.far {
		return putSlow(pe, opPut, dst, src, target)
	}
	p, _ := core.SliceData(dst)
	off, ok := core.OwnOff[T](&pe.sp, p, uint64(len(src))*core.SizeOf[T]())
	if !ok {
		return putSlow(pe, opPut, dst, src, target)
	}
	sp, n := core.SliceData(src)
	if d := core.PeerAddr[T](&pe.sp, target, off); memcopy.Better[T](n) {
		memcopy.Move(d, sp, uintptr(n))
	} else {
		core.CopyBytes[T](d, sp, n)
	}
	// putDone, inlined by hand: this is the hot path.
	core.Bump(&pe.stats.Puts)
	if pe.rma.mb.Load() != mbReady {
		pe.rma.putFence()
	}
	pe.ctl[target].sig.wakeStep()
	return nil
}

// PutNBI is Put without the wake-up of waiters on target, which happens
// at this PE's next Quiet, Fence, Barrier or ClearLock.
func PutNBI[T any](pe *PE, dst, src []T, target int) error {
	if !basic[T]() || pe == nil || pe.closed.Load() || len(src) == 0 || len(dst) < len(src) || uint(target) >= uint(pe.npes) || pe.rma.far {
		return putSlow(pe, opPutNBI, dst, src, target)
	}
	p, _ := core.SliceData(dst)
	off, ok := core.OwnOff[T](&pe.sp, p, uint64(len(src))*core.SizeOf[T]())
	if !ok {
		return putSlow(pe, opPutNBI, dst, src, target)
	}
	sp, n := core.SliceData(src)
	if d := core.PeerAddr[T](&pe.sp, target, off); memcopy.Better[T](n) {
		memcopy.Move(d, sp, uintptr(n))
	} else {
		core.CopyBytes[T](d, sp, n)
	}
	core.Bump(&pe.stats.Puts)
	return nil
}

// Get copies PE source's copy of the symmetric object src into dst.
func Get[T any](pe *PE, dst, src []T, source int) error {
	if !basic[T]() || pe == nil || pe.closed.Load() || len(src) == 0 || len(dst) < len(src) || uint(source) >= uint(pe.npes) || pe.rma.far {
		return getSlow(pe, opGet, dst, src, source)
	}
	p, _ := core.SliceData(src)
	off, ok := core.OwnOff[T](&pe.sp, p, uint64(len(src))*core.SizeOf[T]())
	if !ok {
		return getSlow(pe, opGet, dst, src, source)
	}
	pe.rma.payFence()
	d, _ := core.SliceData(dst)
	s, n := core.PeerAddr[T](&pe.sp, source, off), uint64(len(src))*core.SizeOf[T]()
	if !memcopy.BetterLocal[T](n) {
		core.CopyBytes[T](d, s, n)
	} else {
		memcopy.Move(d, s, uintptr(n))
	}
	core.Bump(&pe.stats.Gets)
	return nil
}

// GetNBI is Get; the copy is made at once, so it is complete on return.
func GetNBI[T any](pe *PE, dst, src []T, source int) error {
	if !basic[T]() || pe == nil || pe.closed.Load() || len(src) == 0 || len(dst) < len(src) || uint(source) >= uint(pe.npes) || pe.rma.far {
		return getSlow(pe, opGetNBI, dst, src, source)
	}
	p, _ := core.SliceData(src)
	off, ok := core.OwnOff[T](&pe.sp, p, uint64(len(src))*core.SizeOf[T]())
	if !ok {
		return getSlow(pe, opGetNBI, dst, src, source)
	}
	pe.rma.payFence()
	d, _ := core.SliceData(dst)
	s, n := core.PeerAddr[T](&pe.sp, source, off), uint64(len(src))*core.SizeOf[T]()
	if !memcopy.BetterLocal[T](n) {
		core.CopyBytes[T](d, s, n)
	} else {
		memcopy.Move(d, s, uintptr(n))
	}
	core.Bump(&pe.stats.Gets)
	return nil
}

// IPut copies n elements, src[i*srcStride] to dst[i*dstStride] in PE
// target's copy of the symmetric object dst. Strides count elements and
// are at least 1.
func IPut[T any](pe *PE, dst, src []T, dstStride, srcStride, n, target int) error {
	r, err := stridedTarget(pe, opIPut, "dst", dst, src, dstStride, srcStride, n, target)
	if err == errFar {
		for i := range n {
			if err := farPut(pe, opIPut, dst[i*dstStride:], src[i*srcStride:i*srcStride+1], target); err != nil {
				return err
			}
		}
		return nil
	}
	if err != nil || n == 0 {
		return err
	}
	for i := 0; i < n; i++ {
		r[i*dstStride] = src[i*srcStride]
	}
	pe.rma.putDone(target)
	return nil
}

// IGet copies n elements, PE source's src[i*srcStride] to dst[i*dstStride],
// where src is a symmetric object. Strides count elements and are at
// least 1.
func IGet[T any](pe *PE, dst, src []T, dstStride, srcStride, n, source int) error {
	r, err := stridedTarget(pe, opIGet, "src", src, dst, srcStride, dstStride, n, source)
	if err == errFar {
		for i := range n {
			if err := farGet(pe, opIGet, dst[i*dstStride:], src[i*srcStride:i*srcStride+1], source); err != nil {
				return err
			}
		}
		return nil
	}
	if err != nil || n == 0 {
		return err
	}
	pe.rma.payFence()
	for i := 0; i < n; i++ {
		dst[i*dstStride] = r[i*srcStride]
	}
	core.Bump(&pe.stats.Gets)
	return nil
}

// Quiet completes every put, NBI put, atomic and store through a Ptr slice
// that this PE has made: they are visible to every PE, ordered before this
// PE's later stores and API loads, and PEs waiting on them are woken (see
// the package's notes on completion in rma.go).
func (pe *PE) Quiet() {
	if pe == nil || pe.closed.Load() {
		return
	}
	// quietAll, inlined by hand: this is the hot path.
	if st := &pe.rma; !lazyQuiet || st.mb.Load() != mbReady {
		pe.rma.putFence()
	} else if !st.owed.Load() {
		st.owed.Store(true)
	}
	pe.rma.wakeSleepers() // waiters fence for a put that did not (wait.go)
	if pe.rma.far {
		pe.rma.farComplete()
	}
}

// Fence orders this PE's puts to each target: with puts made by stores
// into one coherent memory it is the same as Quiet.
func (pe *PE) Fence() {
	if pe != nil && !pe.closed.Load() {
		pe.rma.quietAll()
	}
}

// quietAll is Quiet without the closed check, for Fence, Close and the
// barrier of a one-PE job.
func (r *rmaLayer) quietAll() {
	r.quietLocal()
	if r.far {
		r.farComplete()
	}
}

// quietLocal is quietAll for the stores of this node only: Close of a
// job that lost a PE completes nothing through the Remote (closeFar).
func (r *rmaLayer) quietLocal() {
	r.quietFence()
	r.wakeSleepers()
}

// quietFence is quietLocal's ordering without its wake-up step: the full
// fence, or, where puts need none, the debt of it to the next load.
func (r *rmaLayer) quietFence() {
	st := r
	switch {
	case !lazyQuiet || st.mb.Load() != mbReady:
		// Orders every store before it (puts, Ptr stores) before every
		// access after it, the sleepers loads after it included; pairs
		// with a waiter's sleepers increment followed by its condition
		// load (wait.go).
		r.putFence()
	case !st.owed.Load():
		// The fence is owed to the next load (payFence). The store is
		// itself a locked instruction, made only when the debt is new:
		// a loop of puts and Quiets pays it once. The sleepers loads
		// after it need no fence: waiters fence for them (wait.go).
		st.owed.Store(true)
	}
}

// wakeSleepers takes the wake-up step for every PE if anybody sleeps in
// the job. The caller has fenced after its stores (or waiters fence for
// it: wait.go).
func (r *rmaLayer) wakeSleepers() {
	// Seq-cst load; pairs with a waiter's increment of the job's count.
	if r.ctl[0].sleeping.Load() != 0 {
		r.wakeAll()
	}
}

// wakeAll takes the wake-up step for every PE.
func (r *rmaLayer) wakeAll() {
	for _, c := range r.ctl {
		c.sig.wakeStep()
	}
}

// payFence executes the full fence a Quiet owes, before an operation that
// loads shared memory; see "Quiet's fence" above.
func (r *rmaLayer) payFence() {
	if st := r; st.owed.Load() {
		st.owed.Store(false) // a locked instruction: the full fence
	}
}

// putDone finishes a blocking put to target: the wake-up step.
func (r *rmaLayer) putDone(target int) {
	core.Bump(&r.stats.Puts)
	if r.mb.Load() != mbReady {
		r.putFence()
	}
	r.ctl[target].sig.wakeStep()
}

// putFence is putDone's fence where there is no asymmetric one (or not
// yet: the first put registers): a full fence must order the data stores
// before the sleepers load in wake, as in Quiet.
func (r *rmaLayer) putFence() {
	r.membarrierReady()
	core.FullFence()
}

// wake wakes the PEs asleep on target's signal word, if any. The caller
// has made its stores, and either fenced or is covered by the waiters'
// asymmetric fence (wait.go).
func (r *rmaLayer) wake(target int) { r.ctl[target].sig.wakeStep() }

// wakeStep is the wake-up step on s: it wakes s's sleepers, if any.
// The caller has made its stores, and either fenced or is covered by the
// waiters' asymmetric fence (wait.go). Small enough to be inlined into
// the hot paths (Put, the atomics).
func (s *signal) wakeStep() {
	// Seq-cst load; pairs with a waiter's increment before its
	// asymmetric fence and condition check (wait.go). Zero: no waiter can
	// be asleep on a state older than our stores.
	if s.sleepers.Load() != 0 {
		s.wake()
	}
}

// wake bumps the signal word and wakes its sleepers.
func (s *signal) wake() { shmsync.Wake(&s.word, &s.sleepers) }

// membarrierReady registers this process for asymmetric fences once, and
// reports whether it is registered. Registration must come before the
// first put that skips the fence; putDone fences until it has.
func (r *rmaLayer) membarrierReady() bool {
	st := r
	switch st.mb.Load() {
	case mbReady:
		return true
	case mbNone:
		return false
	}
	st.mbMu.Lock()
	defer st.mbMu.Unlock()
	if st.mb.Load() == mbUnknown {
		if unix.MembarrierRegister() == nil {
			st.mb.Store(mbReady)
		} else {
			st.mb.Store(mbNone)
		}
	}
	return st.mb.Load() == mbReady
}

// rmaCheck makes the checks every transfer makes before looking at its
// buffers: the PE is open, the element type is plain data, the peer
// exists.
func rmaCheck[T any](pe *PE, op string, target int) error {
	if pe == nil || pe.closed.Load() {
		return pe.check()
	}
	if err := plainData[T](); err != nil {
		return err // names the type, and says symheap once
	}
	if target < 0 || target >= pe.npes {
		return fmt.Errorf("symheap: %s: %w", op, pe.checkPE(target))
	}
	return nil
}

// putSlow is the slow path of Put and PutNBI: element types other than
// the basic ones, zero-length transfers, and every error. It repeats the
// checks in order, returns the first that fails, and otherwise makes the
// transfer.
func putSlow[T any](pe *PE, op string, dst, src []T, target int) error {
	if err := rmaCheck[T](pe, op, target); err != nil {
		return err
	}
	if len(dst) < len(src) {
		return fmt.Errorf("symheap: %s of %d elements into a dst of %d: %w (dst must hold len(src) elements)", op, len(src), len(dst), ErrBadArg)
	}
	if len(src) == 0 {
		return nil
	}
	if pe.rma.route(target) == transport.Far {
		return farPut(pe, op, dst, src, target)
	}
	p, _ := core.SliceData(dst)
	n := uint64(len(src)) * core.SizeOf[T]()
	r, ok := core.Target[T](&pe.sp, p, n, target)
	if !ok {
		return pe.notSymmetric(op, "dst", p, n)
	}
	sp, _ := core.SliceData(src)
	if memcopy.Better[T](n) { // as the fast path: the target reads the bytes next
		memcopy.Move(r, sp, uintptr(n))
	} else {
		core.CopyBytes[T](r, sp, n)
	}
	if op == opPutNBI {
		core.Bump(&pe.stats.Puts)
	} else {
		pe.rma.putDone(target)
	}
	return nil
}

// getSlow is the slow path of Get and GetNBI (see putSlow).
func getSlow[T any](pe *PE, op string, dst, src []T, source int) error {
	if err := rmaCheck[T](pe, op, source); err != nil {
		return err
	}
	if len(dst) < len(src) {
		return fmt.Errorf("symheap: %s of %d elements into a dst of %d: %w (dst must hold len(src) elements)", op, len(src), len(dst), ErrBadArg)
	}
	if len(src) == 0 {
		return nil
	}
	if pe.rma.route(source) == transport.Far {
		return farGet(pe, op, dst, src, source)
	}
	p, _ := core.SliceData(src)
	n := uint64(len(src)) * core.SizeOf[T]()
	r, ok := core.Target[T](&pe.sp, p, n, source)
	if !ok {
		return pe.notSymmetric(op, "src", p, n)
	}
	pe.rma.payFence()
	dp, _ := core.SliceData(dst)
	memcopy.Move(dp, r, uintptr(n))
	core.Bump(&pe.stats.Gets)
	return nil
}

// stridedTarget checks an IPut or IGet and returns the target's copy of
// the span of the symmetric side sym that the transfer touches.
func stridedTarget[T any](pe *PE, op, what string, sym, local []T, symStride, localStride, n, target int) ([]T, error) {
	if err := rmaCheck[T](pe, op, target); err != nil {
		return nil, err
	}
	if err := strided(op, what, len(sym), len(local), symStride, localStride, n); err != nil || n == 0 {
		return nil, err
	}
	if pe.rma.route(target) == transport.Far {
		return nil, errFar
	}
	span := (n-1)*symStride + 1
	p, _ := core.SliceData(sym)
	r, ok := core.Target[T](&pe.sp, p, uint64(span)*core.SizeOf[T](), target)
	if !ok {
		return nil, pe.notSymmetric(op, what, p, uint64(span)*core.SizeOf[T]())
	}
	return core.SliceAt[T](r, span), nil
}

// strided checks the counts and strides of IPut and IGet.
func strided(op, what string, symLen, localLen, symStride, localStride, n int) error {
	other := "src"
	if what == "src" {
		other = "dst"
	}
	switch {
	case n < 0:
		return fmt.Errorf("symheap: %s of %d elements: %w (must be >= 0)", op, n, ErrBadArg)
	case symStride < 1 || localStride < 1:
		return fmt.Errorf("symheap: %s with strides %s %d, %s %d: %w (strides count elements and must be >= 1)", op, what, symStride, other, localStride, ErrBadArg)
	case n == 0:
		return nil
	case symLen == 0 || n-1 > (symLen-1)/symStride:
		return fmt.Errorf("symheap: %s of %d elements at stride %d needs a %s of %d elements, have %d: %w", op, n, symStride, what, (n-1)*symStride+1, symLen, ErrBadArg)
	case localLen == 0 || n-1 > (localLen-1)/localStride:
		return fmt.Errorf("symheap: %s of %d elements at stride %d needs a %s of %d elements, have %d: %w", op, n, localStride, other, (n-1)*localStride+1, localLen, ErrBadArg)
	}
	return nil
}

// basic reports whether T is one of the basic plain-data types, which
// the fast paths of Put and Get take without further checks: converting a
// nil *T to an interface costs no allocation, the type switch a few
// compares, and no call (so the caller keeps its arguments in registers).
func basic[T any]() bool {
	if core.AlignOf[T]() < ptrSize {
		// No room for a pointer (pointers are aligned to their size):
		// decided at compile time for each instantiation.
		return true
	}
	switch any((*T)(nil)).(type) {
	case *int8, *int16, *int32, *int64, *int, *uint8, *uint16, *uint32, *uint64, *uint, *uintptr,
		*float32, *float64, *complex64, *complex128, *bool:
		return true
	}
	return false
}

// ptrSize is the size and alignment of a pointer.
const ptrSize = 4 << (^uintptr(0) >> 63)

// plainData is checkPointerFree with a fast path for the basic types.
func plainData[T any]() error {
	if basic[T]() {
		return nil
	}
	return checkPointerFree[T]()
}
