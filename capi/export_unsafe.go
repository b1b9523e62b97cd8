//go:build symheap_capi

// Command capi is libsymheap, the OpenSHMEM 1.5 library for C programs,
// built only by `make build`:
//
//	go build -buildmode=c-shared -tags symheap_capi -o .bin/libsymheap.so ./capi
//	go build -buildmode=c-archive -tags symheap_capi -o .bin/libsymheap.a ./capi
//
// Every file here carries the symheap_capi build tag, so the module's
// default build (go build ./..., go vet ./..., go test ./...) never sees
// cgo. The C files are the library (shmem_internal.h has the fast path's
// design, static.c the static data's, coll.c the collectives'); this file
// hosts the Go runtime's side: joining the job, the symmetric allocator,
// barriers, teams and global exit, exported to C.
package main

/*
#cgo CFLAGS: -O2 -std=gnu11 -I${SRCDIR}/../include -Wall -Wno-unused-function
#include <stdlib.h>
#include <string.h>
#include "shmem_internal.h"
#include "shmemi_go.h"

static void shmemi_call_combine(shmemi_combine_fn f, void *acc, const void *x, size_t n) { f(acc, x, n); }
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/cabi"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/transport"
)

func main() {}

var (
	mu     sync.Mutex // guards teams
	pe     *symheap.PE
	remote cabi.Remote // the PEs on other nodes (far.c); nil on one node
	teams  = map[int]*symheap.Team{}
	next   = 1 // the next team id; 0 is the world
)

// setErr copies err into the C buffer buf of n bytes (NUL-terminated).
func setErr(buf *C.char, n C.size_t, err error) {
	if buf == nil || n == 0 {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	m := copy(b[:len(b)-1], err.Error())
	b[m] = 0
}

func clearErr(buf *C.char, n C.size_t) {
	if buf != nil && n > 0 {
		*buf = 0
	}
}

//export symheapc_go_init
func symheapc_go_init(l *C.struct_shmemi_layout, errbuf *C.char, n C.size_t) C.int {
	// The formats the C sources were compiled with (shmemi_formats.h)
	// must be the runtime's: a header left stale (make build refuses one,
	// a plain go build does not) would read the wrong words.
	if sum, err := cabi.Sum(); err != nil || sum != uint64(C.SHMEMI_FORMATS_SUM) {
		if err == nil {
			err = fmt.Errorf("symheap: libsymheap was built with a capi/shmemi_formats.h (formats %#x) that is not the runtime's (%#x): run go generate ./capi/gen and build it again", uint64(C.SHMEMI_FORMATS_SUM), sum)
		}
		setErr(errbuf, n, err)
		return 1
	}
	cabi.Hosted = true
	// The static data's window (static.c), published for the other C
	// PEs at Init.
	if fd := C.shmemi_static_fd(); fd >= 0 {
		cabi.Static = cabi.StaticWindow{PID: int64(os.Getpid()), FD: int64(fd), Size: uint64(l.static_size),
			Mem: unsafe.Slice((*byte)(unsafe.Pointer(l.static_lo)), int(l.static_size))}
	}
	p, err := symheap.Init(symheap.Config{})
	if err != nil {
		setErr(errbuf, n, err)
		return 1
	}
	pe = p
	teams[0] = p.World()
	startHooks(p)
	cabi.BeforeExit = func() { C.shmemi_flush_stdio() }
	d := cabi.Describe(p)
	if d.Far {
		// A job on several nodes: the operations on the PEs of other
		// nodes go through the runtime's multi-node layer (far.c). The
		// map is C memory, which C keeps.
		remote = cabi.Far(p)
		m := (*C.uchar)(C.calloc(C.size_t(d.NPEs), 1))
		if m == nil || remote == nil {
			p.Close()
			setErr(errbuf, n, errors.New("symheap: Init: out of memory for the map of the PEs on other nodes"))
			return 1
		}
		nodes := (*C.int)(C.calloc(C.size_t(d.NPEs), C.size_t(unsafe.Sizeof(C.int(0)))))
		if nodes == nil {
			p.Close()
			setErr(errbuf, n, errors.New("symheap: Init: out of memory for the map of the PEs' nodes"))
			return 1
		}
		far := unsafe.Slice((*byte)(unsafe.Pointer(m)), d.NPEs)
		for _, q := range d.FarPEs {
			far[q] = 1
		}
		nd := unsafe.Slice((*C.int)(nodes), d.NPEs)
		for q, k := range d.NodeOf {
			nd[q] = C.int(k)
		}
		l.far_pe, l.node_of = m, nodes
	}
	// Addresses in the shared segment, never in Go memory: C may keep them.
	l.base = (*C.char)(d.Base)
	l.wbase = (*C.char)(d.WBase)
	l.part_off, l.part_stride, l.heap_size = C.uint64_t(d.PartOff), C.uint64_t(d.PartStride), C.uint64_t(d.HeapSize)
	l.cb_base = (*C.char)(d.CBBase)
	l.cb_stride = C.uint64_t(d.CBStride)
	l.stat_puts = (*C.uint64_t)(d.StatPuts)
	l.stat_gets = (*C.uint64_t)(d.StatGets)
	l.stat_atomics = (*C.uint64_t)(d.StatAt)
	l.me, l.npes = C.int(d.Rank), C.int(d.NPEs)
	l.mb_ready, l.same_address, l.protected_ = cbool(d.MembarrierReady), cbool(d.SameAddress), cbool(d.Protected)
	l.post_relaxed = cbool(d.PostRelaxed)
	l.polls, l.yields, l.yield_ns = C.int(d.Polls), C.int(d.Yields), C.int64_t(d.YieldNs)
	l.long_yield_ns, l.long_yield_memory_ns = C.int64_t(d.LongYieldNs), C.int64_t(shmsync.LongYieldMemory)
	l.long_yield_share, l.long_yield_window = C.int(shmsync.LongYieldShare), C.int(shmsync.LongYieldWindow)
	l.hand_over_ns, l.place_every_ns = C.int64_t(d.HandOverNs), C.int64_t(shmsync.PlaceEvery)
	l.settle = C.int(d.Settle)
	l.calls = C.uint64_t(d.Calls)
	l.barrier = C.uint64_t(d.Barrier)
	l.barrier_rounds = C.int(d.BarrierRounds)
	l.stat_sym_allocs = (*C.uint64_t)(d.StatSymAllocs)
	l.stat_sym_frees = (*C.uint64_t)(d.StatSymFrees)
	// symalloc.c publishes allocation records of this PE too.
	cabi.ShareRecords(p, (*[2]uint64)(unsafe.Pointer(&C.shmemi_rec_nums[0])))
	l.cblock = (*C.char)(d.CBlock)
	l.go_pes = C.int(d.GoPEs)
	path := unsafe.Slice((*byte)(unsafe.Pointer(&l.seg_path[0])), len(l.seg_path))
	path[copy(path[:len(path)-1], d.SegPath)] = 0
	return 0
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

//export symheapc_go_finalize
func symheapc_go_finalize(errbuf *C.char, n C.size_t) C.int {
	if err := pe.Close(); err != nil {
		setErr(errbuf, n, err)
		return 1
	}
	return 0
}

//export symheapc_go_global_exit
func symheapc_go_global_exit(code C.int) {
	pe.GlobalExit(int(code))
}

//export symheapc_go_pe_alive
func symheapc_go_pe_alive(p C.int) C.int {
	return cbool(pe.Accessible(int(p)))
}

//export symheapc_go_malloc
func symheapc_go_malloc(kind C.int, size, align C.size_t, hints C.long, flush *C.uint64_t, nflush C.int, errbuf *C.char, n C.size_t) unsafe.Pointer {
	clearErr(errbuf, n)
	if !giveBack(flush, nflush, errbuf, n) {
		return nil
	}
	if size == 0 {
		return nil // OpenSHMEM: a size of zero gives NULL, and no barrier
	}
	var s []byte
	var err error
	switch kind {
	case cabi.MallocPlain:
		s, err = symheap.Malloc[byte](pe, int(size))
	case cabi.MallocCalloc:
		s, err = symheap.Calloc[byte](pe, int(size))
	case cabi.MallocAlign:
		s, err = symheap.Align[byte](pe, uintptr(align), int(size))
	default:
		s, err = symheap.MallocWithHints[byte](pe, int(size), symheap.Hints(hints))
	}
	if err != nil {
		setErr(errbuf, n, err)
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(s))
}

//export symheapc_go_realloc
func symheapc_go_realloc(p unsafe.Pointer, size C.size_t, flush *C.uint64_t, nflush C.int, errbuf *C.char, n C.size_t) unsafe.Pointer {
	clearErr(errbuf, n)
	if !giveBack(flush, nflush, errbuf, n) {
		return nil
	}
	var old []byte
	if p != nil {
		old = unsafe.Slice((*byte)(p), 1)
	}
	s, err := symheap.Realloc(pe, old, int(size))
	if err != nil {
		setErr(errbuf, n, err)
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(s))
}

// giveBack hands the allocator the blocks of the C library's cache
// (symalloc.c), whose Frees it exchanged already. False: the error is in
// errbuf.
func giveBack(offs *C.uint64_t, k C.int, errbuf *C.char, n C.size_t) bool {
	if k <= 0 {
		return true
	}
	if err := cabi.FreeExchanged(pe, unsafe.Slice((*uint64)(unsafe.Pointer(offs)), int(k))); err != nil {
		setErr(errbuf, n, err)
		return false
	}
	return true
}

//export symheapc_go_free_exchanged
func symheapc_go_free_exchanged(offs *C.uint64_t, k C.int, errbuf *C.char, n C.size_t) C.int {
	clearErr(errbuf, n)
	if !giveBack(offs, k, errbuf, n) {
		return 1
	}
	return 0
}

//export symheapc_go_diverged
func symheapc_go_diverged(withOut C.int, errbuf *C.char, n C.size_t) {
	clearErr(errbuf, n)
	if err := cabi.Diverged(pe, withOut != 0); err != nil {
		setErr(errbuf, n, err)
	}
}

//export symheapc_go_free
func symheapc_go_free(p unsafe.Pointer, errbuf *C.char, n C.size_t) C.int {
	if p == nil {
		return 0
	}
	if err := symheap.Free(pe, unsafe.Slice((*byte)(p), 1)); err != nil {
		setErr(errbuf, n, err)
		return 1
	}
	return 0
}

//export symheapc_go_barrier_all
func symheapc_go_barrier_all(errbuf *C.char, n C.size_t) C.int {
	if err := pe.Barrier(); err != nil {
		setErr(errbuf, n, err)
		return 1
	}
	return 0
}

//export symheapc_go_check_peers
func symheapc_go_check_peers(errbuf *C.char, n C.size_t) C.int {
	if err := cabi.CheckPeers(pe); err != nil {
		setErr(errbuf, n, err)
		return 1
	}
	return 0
}

//export symheapc_go_differs
func symheapc_go_differs(mine, theirs C.uint64_t, q C.int, errbuf *C.char, n C.size_t) {
	clearErr(errbuf, n)
	if err := cabi.Differs(pe, uint64(mine), uint64(theirs), int(q)); err != nil {
		setErr(errbuf, n, err)
	}
}

//export symheapc_go_place
func symheapc_go_place() C.int {
	return cbool(shmsync.Place())
}

func team(id C.int) *symheap.Team {
	mu.Lock()
	defer mu.Unlock()
	return teams[int(id)]
}

//export symheapc_go_team_sync
func symheapc_go_team_sync(id C.int, errbuf *C.char, n C.size_t) C.int {
	if err := team(id).Sync(); err != nil {
		setErr(errbuf, n, err)
		return 1
	}
	return 0
}

//export symheapc_go_team_sync_in_call
func symheapc_go_team_sync_in_call(id C.int, errbuf *C.char, n C.size_t) C.int {
	if err := cabi.SyncInCall(team(id)); err != nil {
		setErr(errbuf, n, err)
		return 1
	}
	return 0
}

//export symheapc_go_team_split
func symheapc_go_team_split(parent, start, stride, size C.int, world *C.int, errbuf *C.char, n C.size_t) C.int {
	t, err := team(parent).Split(int(start), int(stride), int(size))
	if err != nil {
		setErr(errbuf, n, err)
		return -2
	}
	if t == nil {
		return -1
	}
	w := unsafe.Slice((*C.int)(world), t.Size())
	for r := range w {
		w[r] = C.int(t.WorldRank(r))
	}
	mu.Lock()
	defer mu.Unlock()
	id := next
	next++
	teams[id] = t
	return C.int(id)
}

//export symheapc_go_team_destroy
func symheapc_go_team_destroy(id C.int, errbuf *C.char, n C.size_t) C.int {
	t := team(id)
	if err := t.Destroy(); err != nil {
		setErr(errbuf, n, err)
		return 1
	}
	mu.Lock()
	delete(teams, int(id))
	mu.Unlock()
	return 0
}

// The team collectives of a job with Go PEs (coll.c, go_collective):
// the runtime's, so that Go and C PEs take the same steps. dst and src
// are n bytes (fcollect: src n, dst n times the team's size) in this
// PE's symmetric heap.
const (
	collBroadcast = iota
	collFCollect
	collAllToAll
)

//export symheapc_go_collective
func symheapc_go_collective(kind, id C.int, dst, src unsafe.Pointer, n C.size_t, root C.int, errbuf *C.char, en C.size_t) C.int {
	t := team(id)
	d, s := cbytes(dst, int(n)), cbytes(src, int(n))
	var err error
	switch kind {
	case collBroadcast:
		err = symheap.Broadcast(t, d, s, int(root))
	case collFCollect:
		err = symheap.FCollect(t, cbytes(dst, int(n)*t.Size()), s)
	default:
		err = symheap.AllToAll(t, d, s)
	}
	if err != nil {
		setErr(errbuf, en, err)
		return 1
	}
	return 0
}

//export symheapc_go_reduce
func symheapc_go_reduce(id C.int, dst, src unsafe.Pointer, n, size C.size_t, combine C.shmemi_combine_fn, errbuf *C.char, en C.size_t) C.int {
	err := cabi.ReduceFold(team(id), dst, src, int(n), uint64(size), func(acc, x unsafe.Pointer, k int) {
		C.shmemi_call_combine(combine, acc, x, C.size_t(k))
	})
	if err != nil {
		setErr(errbuf, en, err)
		return 1
	}
	return 0
}

// cbytes is the n bytes at p as a slice (nil for none: the collectives
// take null pointers with no elements).
func cbytes(p unsafe.Pointer, n int) []byte {
	if p == nil || n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

// A job on several nodes (far.c): the C library's operations on PEs of
// other nodes, on the runtime's multi-node layer. The C names of regions
// and atomics map to the transport's here, the one place both meet.

var farRegions = [...]int{C.SHMEMI_REGION_HEAP: int(transport.RegionHeap), C.SHMEMI_REGION_STATIC: int(transport.RegionStatic)}

var farAMOs = map[C.int]transport.AMO{
	C.SHMEMI_AMO_FETCH: transport.AMOFetch, C.SHMEMI_AMO_SET: transport.AMOSet, C.SHMEMI_AMO_SWAP: transport.AMOSwap,
	C.SHMEMI_AMO_CSWAP: transport.AMOCompareSwap, C.SHMEMI_AMO_FETCH_ADD: transport.AMOFetchAdd,
	C.SHMEMI_AMO_FETCH_AND: transport.AMOFetchAnd, C.SHMEMI_AMO_FETCH_OR: transport.AMOFetchOr,
	C.SHMEMI_AMO_FETCH_XOR: transport.AMOFetchXor, C.SHMEMI_AMO_ADD: transport.AMOAdd,
	C.SHMEMI_AMO_AND: transport.AMOAnd, C.SHMEMI_AMO_OR: transport.AMOOr, C.SHMEMI_AMO_XOR: transport.AMOXor,
}

// farFailed reports a far operation's error in errbuf: the callers
// format their message only on this path, so that a successful call
// allocates nothing.
func farFailed(err error, errbuf *C.char, n C.size_t, what string) C.int {
	setErr(errbuf, n, fmt.Errorf("symheap: %s: %w", what, err))
	return 1
}

//export symheapc_go_far_put
func symheapc_go_far_put(r, target C.int, off C.uint64_t, src unsafe.Pointer, k C.size_t, nbi C.int, errbuf *C.char, n C.size_t) C.int {
	err := remote.PutAt(farRegions[r], int(target), uint64(off), cbytes(src, int(k)), nbi != 0)
	if err != nil {
		return farFailed(err, errbuf, n, fmt.Sprintf("put of %d bytes to PE %d on another node", k, target))
	}
	return 0
}

//export symheapc_go_far_get
func symheapc_go_far_get(r C.int, dst unsafe.Pointer, source C.int, off C.uint64_t, k C.size_t, errbuf *C.char, n C.size_t) C.int {
	err := remote.GetAt(farRegions[r], cbytes(dst, int(k)), int(source), uint64(off))
	if err != nil {
		return farFailed(err, errbuf, n, fmt.Sprintf("get of %d bytes from PE %d on another node", k, source))
	}
	return 0
}

//export symheapc_go_far_amo
func symheapc_go_far_amo(r, amo, target C.int, off C.uint64_t, size C.int, v, cmp C.uint64_t, old *C.uint64_t, errbuf *C.char, n C.size_t) C.int {
	o, err := remote.AtomicAt(farRegions[r], uint8(farAMOs[amo]), int(target), uint64(off), int(size), uint64(v), uint64(cmp))
	*old = C.uint64_t(o)
	if err != nil {
		return farFailed(err, errbuf, n, fmt.Sprintf("atomic on PE %d on another node", target))
	}
	return 0
}

//export symheapc_go_far_fence
func symheapc_go_far_fence(errbuf *C.char, n C.size_t) C.int {
	if err := remote.Fence(); err != nil {
		return farFailed(err, errbuf, n, "fence of the operations on other nodes")
	}
	return 0
}

//export symheapc_go_far_quiet
func symheapc_go_far_quiet(errbuf *C.char, n C.size_t) C.int {
	if err := remote.Quiet(); err != nil {
		return farFailed(err, errbuf, n, "quiet of the operations on other nodes")
	}
	return 0
}
