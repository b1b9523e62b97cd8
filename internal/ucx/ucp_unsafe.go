//go:build ucx

package ucx

/*
#cgo pkg-config: ucx
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <poll.h>
#include <time.h>
#include <ucp/api/ucp.h>

// Per-peer endpoint failure, written by UCX's error callback (called from
// ucp_worker_progress, under the Go side's lock), read by Go under it.
// Set once, by sh_set_peers (Open): the process's one Worker owns them.
static ucs_status_t *ep_failed;
static int ep_npeers;

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status) {
	intptr_t r = (intptr_t)arg;
	if (r >= 0 && r < ep_npeers && ep_failed[r] == UCS_OK) ep_failed[r] = status;
}

// ep_err_mode is the error handling mode of every endpoint (sh_set_peers).
static ucp_err_handling_mode_t ep_err_mode = UCP_ERR_HANDLING_MODE_PEER;

// sh_init makes a context and a worker. It touches none of the globals
// above, so that sh_describe (symheap info) may run beside a live Worker.
static ucs_status_t sh_init(ucp_context_h *ctx, ucp_worker_h *w) {
	ucp_config_t *cfg;
	ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
	if (st != UCS_OK) return st;
	ucp_params_t p;
	memset(&p, 0, sizeof p);
	p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
	p.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64 | UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
	p.mt_workers_shared = 0;
	st = ucp_init(&p, cfg, ctx);
	ucp_config_release(cfg);
	if (st != UCS_OK) return st;
	ucp_worker_params_t wp;
	memset(&wp, 0, sizeof wp);
	wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
	wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
	st = ucp_worker_create(*ctx, &wp, w);
	if (st != UCS_OK) { ucp_cleanup(*ctx); return st; }
	return UCS_OK;
}

// sh_set_peers sizes the failure table and sets the error handling mode of
// the endpoints of the process's Worker (Open).
static void sh_set_peers(int npeers, int peer_errors) {
	ep_err_mode = peer_errors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
	free(ep_failed);
	ep_failed = calloc(npeers, sizeof *ep_failed);
	ep_npeers = npeers;
}

static ucs_status_t sh_ep_create(ucp_worker_h w, const void *addr, intptr_t rank, ucp_ep_h *ep) {
	ucp_ep_params_t p;
	memset(&p, 0, sizeof p);
	p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
	p.address = addr;
	p.err_mode = ep_err_mode;
	p.err_handler.cb = ep_err_cb;
	p.err_handler.arg = (void *)rank;
	return ucp_ep_create(w, &p, ep);
}

static ucs_status_t sh_ep_failed(int rank) { return ep_failed[rank]; }

// How long a wait polls before it sleeps on the event descriptor: a few
// round trips over TCP.
#define SPIN_MS 0.2

static double now_ms(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// sh_pace is one step of a wait for a request (sh_wait, sh_tag_wait):
// it progresses the worker, spinning while progress finds work (a peer's
// next operation may follow) and for SPIN_MS after, then sleeps on the
// event descriptor for up to a millisecond. It returns 0 once end (in
// ms) has passed.
static int sh_pace(ucp_worker_h w, int efd, double end, double *spin_end) {
	if (ucp_worker_progress(w) != 0) {
		*spin_end = now_ms() + SPIN_MS;
		return 1;
	}
	double t = now_ms();
	if (t > end) return 0;
	// Spin while the answer may be a network round trip away, then
	// sleep on the event descriptor.
	if (t < *spin_end) return 1;
	if (efd >= 0 && ucp_worker_arm(w) == UCS_OK) {
		struct pollfd pfd = { .fd = efd, .events = POLLIN };
		poll(&pfd, 1, 1);
	}
	return 1;
}

// sh_wait waits until req completes, progressing the worker (sh_pace).
// It returns UCS_INPROGRESS when slice_ms ran out first; the request then
// stays with the caller. On completion it frees req and returns its
// status.
static ucs_status_t sh_wait(ucp_worker_h w, int efd, void *req, int slice_ms) {
	double end = now_ms() + slice_ms, spin_end = now_ms() + SPIN_MS;
	for (;;) {
		ucs_status_t st = ucp_request_check_status(req);
		if (st != UCS_INPROGRESS) { ucp_request_free(req); return st; }
		if (!sh_pace(w, efd, end, &spin_end)) return UCS_INPROGRESS;
	}
}

// sh_param starts a request's parameters: with the local buffer's memory
// handle when the caller has one (symheap's registration cache), so that
// UCX does not look the buffer up in a cache of its own.
static void sh_param(ucp_request_param_t *p, ucp_mem_h memh) {
	p->op_attr_mask = 0;
	if (memh != NULL) {
		p->op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
		p->memh = memh;
	}
}

static ucs_status_ptr_t sh_put(ucp_ep_h ep, const void *buf, size_t n, uint64_t raddr, ucp_rkey_h rkey, ucp_mem_h memh) {
	ucp_request_param_t p;
	sh_param(&p, memh);
	return ucp_put_nbx(ep, buf, n, raddr, rkey, &p);
}

static ucs_status_ptr_t sh_get(ucp_ep_h ep, void *buf, size_t n, uint64_t raddr, ucp_rkey_h rkey, ucp_mem_h memh) {
	ucp_request_param_t p;
	sh_param(&p, memh);
	return ucp_get_nbx(ep, buf, n, raddr, rkey, &p);
}

// sh_amo posts an atomic on a size-byte word. For a fetching op, result
// receives the old value (for CSWAP it holds the compare value on entry).
static ucs_status_ptr_t sh_amo(ucp_ep_h ep, int op, int size, uint64_t *val, uint64_t *result, uint64_t raddr, ucp_rkey_h rkey) {
	ucp_request_param_t p;
	p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
	p.datatype = ucp_dt_make_contig(size);
	if (result != NULL) {
		p.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
		p.reply_buffer = result;
	}
	return ucp_atomic_op_nbx(ep, (ucp_atomic_op_t)op, val, 1, raddr, rkey, &p);
}

static ucs_status_ptr_t sh_flush(ucp_worker_h w) {
	ucp_request_param_t p;
	p.op_attr_mask = 0;
	return ucp_worker_flush_nbx(w, &p);
}

static ucs_status_ptr_t sh_tag_send(ucp_ep_h ep, const void *buf, size_t n, uint64_t tag, ucp_mem_h memh) {
	ucp_request_param_t p;
	sh_param(&p, memh);
	return ucp_tag_send_nbx(ep, buf, n, tag, &p);
}

// sh_tag_recv posts a receive. It always returns a request (or an
// error): a receive that UCX 1.13 completes at once, from its unexpected
// queue, leaves the receive information's length unset, so the length
// comes from testing the request instead.
static ucs_status_ptr_t sh_tag_recv(ucp_worker_h w, void *buf, size_t n, uint64_t tag, uint64_t mask) {
	ucp_request_param_t p;
	p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
	return ucp_tag_recv_nbx(w, buf, n, tag, mask, &p);
}

// sh_tag_wait is sh_wait for a receive: it reports the message's tag and
// length before freeing the request.
static ucs_status_t sh_tag_wait(ucp_worker_h w, int efd, void *req, int slice_ms, uint64_t *tag, size_t *len) {
	double end = now_ms() + slice_ms, spin_end = now_ms() + SPIN_MS;
	for (;;) {
		ucp_tag_recv_info_t info;
		ucs_status_t st = ucp_tag_recv_request_test(req, &info);
		if (st != UCS_INPROGRESS) {
			*tag = info.sender_tag;
			*len = info.length;
			ucp_request_free(req);
			return st;
		}
		if (!sh_pace(w, efd, end, &spin_end)) return UCS_INPROGRESS;
	}
}

// A standing receive of one 8-byte message (Watch), tested with
// sh_watched: 1 and the value once it arrived.
static void *watch_req;
static uint64_t watch_buf;

static ucs_status_t sh_watch(ucp_worker_h w, uint64_t tag, uint64_t mask) {
	ucp_request_param_t p;
	p.op_attr_mask = 0;
	ucs_status_ptr_t r = ucp_tag_recv_nbx(w, &watch_buf, 8, tag, mask, &p);
	if (UCS_PTR_IS_ERR(r)) return UCS_PTR_STATUS(r);
	watch_req = r; // NULL: completed at once
	return UCS_OK;
}

static int sh_watched(uint64_t *val) {
	if (watch_req != NULL) {
		if (ucp_request_check_status(watch_req) == UCS_INPROGRESS) return 0;
		ucp_request_free(watch_req);
		watch_req = NULL;
	}
	*val = watch_buf;
	return 1;
}

static void sh_watch_cancel(ucp_worker_h w) {
	if (watch_req == NULL) return;
	ucp_request_cancel(w, watch_req);
	for (int i = 0; i < 100 && ucp_request_check_status(watch_req) == UCS_INPROGRESS; i++) ucp_worker_progress(w);
	ucp_request_free(watch_req);
	watch_req = NULL;
}

// sh_announce sends the 8-byte value to ep without waiting: the message
// goes out with later progress, or not at all if the peer is gone.
static void sh_announce(ucp_ep_h ep, uint64_t tag, uint64_t val) {
	uint64_t *buf = malloc(8); // left to the message: one per announcement
	*buf = val;
	ucp_request_param_t p;
	p.op_attr_mask = 0;
	ucs_status_ptr_t r = ucp_tag_send_nbx(ep, buf, 8, tag, &p);
	if (r != NULL && !UCS_PTR_IS_ERR(r)) ucp_request_free(r);
}

// sh_probe_wait waits until a message matching tag under mask has
// arrived and reports its tag and length, leaving it queued; it returns 0
// when slice_ms ran out first.
static int sh_probe_wait(ucp_worker_h w, int efd, uint64_t tag, uint64_t mask, int slice_ms, uint64_t *stag, size_t *len) {
	double end = now_ms() + slice_ms, spin_end = now_ms() + SPIN_MS;
	for (;;) {
		ucp_tag_recv_info_t info;
		if (ucp_tag_probe_nb(w, tag, mask, 0, &info) != NULL) {
			*stag = info.sender_tag;
			*len = info.length;
			return 1;
		}
		if (ucp_worker_progress(w) != 0) {
			spin_end = now_ms() + SPIN_MS;
			continue;
		}
		double t = now_ms();
		if (t > end) return 0;
		if (t < spin_end) continue;
		if (efd >= 0 && ucp_worker_arm(w) == UCS_OK) {
			struct pollfd pfd = { .fd = efd, .events = POLLIN };
			poll(&pfd, 1, 1);
		}
	}
}

// sh_recv_match waits, as sh_probe_wait, for a message matching tag under
// mask, and receives it into buf if it is at most limit bytes: 1, with
// its tag and length. A message that does not qualify stays queued: 2,
// with its tag and length. 0: slice_ms ran out first. A negative value is
// a failed receive's status.
static int sh_recv_match(ucp_worker_h w, int efd, uint64_t tag, uint64_t mask, void *buf, size_t limit,
			 int slice_ms, uint64_t *stag, size_t *n) {
	if (!sh_probe_wait(w, efd, tag, mask, slice_ms, stag, n))
		return 0;
	if (*n > limit)
		return 2;
	ucp_request_param_t p;
	p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
	ucs_status_ptr_t r = ucp_tag_recv_nbx(w, buf, *n, *stag, ~(uint64_t)0, &p);
	if (UCS_PTR_IS_ERR(r))
		return (int)UCS_PTR_STATUS(r);
	uint64_t t;
	size_t got;
	ucs_status_t st;
	while ((st = sh_tag_wait(w, efd, r, 1000, &t, &got)) == UCS_INPROGRESS) {
	}
	if (st != UCS_OK)
		return (int)st;
	*n = got;
	return 1;
}

// sh_try_probe reports a queued message matching tag under mask, without
// progressing the worker (so that several probes in a row see one queue).
static int sh_try_probe(ucp_worker_h w, uint64_t tag, uint64_t mask, uint64_t *stag, size_t *len) {
	ucp_tag_recv_info_t info;
	if (ucp_tag_probe_nb(w, tag, mask, 0, &info) == NULL) return 0;
	*stag = info.sender_tag;
	*len = info.length;
	return 1;
}

// sh_req_test reports a request's status (and, for a receive, the
// message's length), freeing it once complete.
static ucs_status_t sh_req_test(void *req, int recv, size_t *len) {
	ucs_status_t st;
	if (recv) {
		ucp_tag_recv_info_t info;
		st = ucp_tag_recv_request_test(req, &info);
		if (st != UCS_INPROGRESS) *len = info.length;
	} else {
		st = ucp_request_check_status(req);
	}
	if (st != UCS_INPROGRESS) ucp_request_free(req);
	return st;
}

// sh_wait_event progresses the worker; if there was nothing to do it
// spins a little, then sleeps on the event descriptor for at most 1 ms.
static void sh_wait_event(ucp_worker_h w, int efd) {
	double spin_end = now_ms() + SPIN_MS;
	while (now_ms() < spin_end) {
		if (ucp_worker_progress(w) != 0) return;
	}
	if (efd >= 0 && ucp_worker_arm(w) == UCS_OK) {
		struct pollfd pfd = { .fd = efd, .events = POLLIN };
		poll(&pfd, 1, 1);
	}
	ucp_worker_progress(w);
}

static ucs_status_ptr_t sh_ep_close(ucp_ep_h ep) {
	ucp_request_param_t p;
	p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
	p.flags = UCP_EP_CLOSE_FLAG_FORCE;
	return ucp_ep_close_nbx(ep, &p);
}

static ucs_status_t sh_mem_map(ucp_context_h ctx, void *addr, size_t n, ucp_mem_h *memh) {
	ucp_mem_map_params_t p;
	memset(&p, 0, sizeof p);
	p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
	p.address = addr;
	p.length = n;
	return ucp_mem_map(ctx, &p, memh);
}

static ucs_status_t sh_mem_map_at(ucp_context_h ctx, uintptr_t addr, size_t n, ucp_mem_h *memh) {
	return sh_mem_map(ctx, (void *)addr, n, memh);
}

// sh_poll sleeps until the event descriptor is readable or ms pass.
static int sh_poll(int efd, int ms) {
	struct pollfd pfd = { .fd = efd, .events = POLLIN };
	return poll(&pfd, 1, ms);
}

// sh_describe prints the context's resources (transports and devices)
// into a malloc'd string the caller frees.
static char *sh_describe(void) {
	ucp_context_h ctx;
	ucp_worker_h w;
	ucs_status_t st = sh_init(&ctx, &w);
	if (st != UCS_OK) return NULL;
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (f != NULL) {
		ucp_context_print_info(ctx, f);
		fclose(f);
	}
	ucp_worker_destroy(w);
	ucp_cleanup(ctx);
	return buf;
}

// sh_ep_info prints an endpoint's configuration (its lanes, and for each
// operation the message sizes at which each protocol takes over) into a
// malloc'd string the caller frees.
static char *sh_ep_info(ucp_ep_h ep) {
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (f == NULL) return NULL;
	ucp_ep_print_info(ep, f);
	fclose(f);
	return buf;
}

static int sh_is_err(ucs_status_ptr_t p) { return UCS_PTR_IS_ERR(p); }
static ucs_status_t sh_status(ucs_status_ptr_t p) { return UCS_PTR_STATUS(p); }
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/symheap/symheap/internal/transport"
)

// Atomic operations (UCP's ucp_atomic_op_t).
const (
	OpAdd   = C.UCP_ATOMIC_OP_ADD
	OpSwap  = C.UCP_ATOMIC_OP_SWAP
	OpCSwap = C.UCP_ATOMIC_OP_CSWAP
	OpAnd   = C.UCP_ATOMIC_OP_AND
	OpOr    = C.UCP_ATOMIC_OP_OR
	OpXor   = C.UCP_ATOMIC_OP_XOR
)

// The errors of operations on peers are the transport's (every transport
// reports them alike).
var (
	ErrPeer    = transport.ErrPeer
	ErrTimeout = transport.ErrTimeout
)

// PeerError is the failure of an operation on one peer.
type PeerError = transport.PeerError

func peerError(peer int, op string, err error) *PeerError {
	return &PeerError{Peer: peer, Op: "ucx: " + op, Err: err}
}

// Status is a UCS status as an error.
type Status int

func (s Status) Error() string { return "ucx: " + C.GoString(C.ucs_status_string(C.ucs_status_t(s))) }

func statusErr(what string, st C.ucs_status_t) error {
	if st == C.UCS_OK {
		return nil
	}
	return fmt.Errorf("%s: %w", what, Status(st))
}

// Version is the UCX library's version.
func Version() string { return C.GoString(C.ucp_get_version_string()) }

// Describe lists the transports and devices a worker of this process
// would use (UCP's resources, after UCX_TLS and UCX_NET_DEVICES), one per
// line: "tcp/eth0", "self/memory0", ...
func Describe() ([]string, error) {
	s := C.sh_describe()
	if s == nil {
		return nil, errors.New("ucx: ucp_init failed")
	}
	defer C.free(unsafe.Pointer(s))
	var out []string
	for _, l := range strings.Split(C.GoString(s), "\n") {
		// "#     resource 0  :  md 0  dev 0  flags -- tcp/eth0"
		if i := strings.Index(l, "resource"); i >= 0 {
			f := strings.Fields(l)
			if len(f) > 0 && strings.Contains(f[len(f)-1], "/") {
				out = append(out, f[len(f)-1])
			}
		}
	}
	return out, nil
}

// EndpointInfo is the configuration of the endpoint to peer as UCX
// prints it (ucp_ep_print_info), making the endpoint if there is none
// yet: its lanes and, for each operation, the sizes at which one protocol
// hands over to the next, as in
//
//	tag_send: 0..<egr/short>..8185..<egr/zcopy>..20553..<rndv>..(inf)
//
// The sizes depend on the transports, the error handling mode (Open) and
// UCX's version and settings (UCX_RNDV_THRESH, ...), so tests that must
// cover every protocol read them here rather than hard-code them.
func (w *Worker) EndpointInfo(peer int) (string, error) {
	w.lock()
	defer w.mu.Unlock()
	ps, err := w.ep(peer)
	if err != nil {
		return "", err
	}
	s := C.sh_ep_info(ps.ep)
	if s == nil {
		return "", fmt.Errorf("ucx: print the endpoint to peer %d: out of memory", peer)
	}
	defer C.free(unsafe.Pointer(s))
	return C.GoString(s), nil
}

// Peer is what a process published about itself: its worker address and,
// for each region it registered, the base address and the packed key.
type Peer struct {
	Addr  []byte
	Bases []uint64
	Rkeys [][]byte
}

type peerState struct {
	info  Peer
	addr  unsafe.Pointer // C copy of info.Addr, for the endpoint
	ep    C.ucp_ep_h
	rkeys []C.ucp_rkey_h
	// ready: the endpoint is made, every key unpacked and the endpoint
	// settled (settle); only then is anything posted on it. An ep() that
	// fails part way leaves it false, and the next one goes on from there.
	ready bool
}

// scratchWords is the size of Worker.scratch: words 0 and 1 are an
// atomic's operand and result (Atomic), word 2 receives settle's get.
const scratchWords = 3

// Worker is one process's UCP context and worker.
type Worker struct {
	mu       sync.Mutex
	ctx      C.ucp_context_h
	w        C.ucp_worker_h
	efd      C.int
	peers    []peerState
	mems     []C.ucp_mem_h
	scratch  *C.uint64_t // scratchWords words of C memory: an atomic's operand and result, settle's word
	pins     runtime.Pinner
	closed   bool
	watch    bool         // a standing receive is posted (Watch)
	peerMode bool         // the endpoints have UCX's peer error handling (Open)
	dirty    bool         // operations were posted since the last Flush
	last     atomic.Int64 // when a call other than Sleep last took the worker (ns of clock)
	slice    atomic.Int64 // when the PE's calls last passed through the Go scheduler (ns of clock; see touch)
	// Timeout bounds a blocking operation on one peer; past it the
	// operation fails with ErrPeer and ErrTimeout. 0: no bound.
	Timeout time.Duration
	// Announced, if set, turns the value a peer announced (Watch) into
	// the error that ends the waits; it may also not return.
	Announced func(v uint64) error
	// Lost reports a peer known lost by other means (a launcher's
	// event, a liveness check): a blocking wait on it ends with its error.
	Lost func(peer int) error
}

// quietFor is how long after the PE's last call into the worker Sleep
// leaves the progress to the PE's own calls.
const quietFor = 2 * time.Millisecond

// lock takes the worker for a call of the PE (not the progress goroutine)
// and notes when.
func (w *Worker) lock() {
	w.touch()
	w.mu.Lock()
}

// touch notes a call of the PE, and passes through the Go scheduler
// (runtime.Gosched) once every sliceFor. A PE that waits on other nodes
// spends its time in calls into C, and its goroutine never leaves its
// time slice: after 10 ms the runtime's monitor takes its P away in
// mid-call, and since the goroutine then continues on the other P
// without a new time slice, takes that one too at every tick (each a
// thread woken and the goroutine moved). A yield before that starts a new
// slice. With it a fetch-add to another fake host takes as long as from
// C, and took longer without (measured:
// docs/bench/design-measurements.md, «internal/ucx, Worker.touch»).
//
// It runs on every call, so it reads the monotonic clock only (time.Now
// reads the wall clock too) and stores last only when it moved by
// lastStep, which Sleep's quietFor does not notice.
func (w *Worker) touch() {
	now := clock()
	if now-w.last.Load() > int64(lastStep) {
		w.last.Store(now)
	}
	if now-w.slice.Load() > int64(sliceFor) {
		w.slice.Store(now)
		runtime.Gosched()
	}
}

// clock is the monotonic time since the package started, in ns.
func clock() int64 { return int64(time.Since(clockBase)) }

var clockBase = time.Now()

// lastStep is touch's granularity of Worker.last.
const lastStep = 50 * time.Microsecond

// sliceFor is how long a PE's calls go between two yields (touch): well
// under the runtime's forced preemption, 10 ms.
const sliceFor = 2 * time.Millisecond

// Open creates the context and worker for a job of npeers processes.
// With peerErrors the endpoints have UCX's peer error handling
// (UCP_ERR_HANDLING_MODE_PEER): a peer that is lost fails the operations
// to it, and the waits report it. Without, UCX 1.13 moves large tagged
// messages over TCP with a zero-copy rendezvous instead of active
// messages that the receiver copies out (a window of 1 MiB messages
// between two fake hosts moves much faster; measured:
// docs/bench/design-measurements.md, «internal/ucx, peer error
// handling»), but the loss of a peer is undefined: the process may crash
// in UCX.
func Open(npeers int, peerErrors bool) (*Worker, error) {
	w := &Worker{peers: make([]peerState, npeers), efd: -1}
	pe := C.int(0)
	if peerErrors {
		pe = 1
	}
	if st := C.sh_init(&w.ctx, &w.w); st != C.UCS_OK {
		return nil, statusErr("ucx: ucp_init", st)
	}
	C.sh_set_peers(C.int(npeers), pe)
	w.peerMode = peerErrors
	if st := C.ucp_worker_get_efd(w.w, &w.efd); st != C.UCS_OK {
		w.efd = -1
	}
	w.scratch = (*C.uint64_t)(C.calloc(scratchWords, 8))
	return w, nil
}

// PeerErrors reports whether the endpoints have UCX's peer error handling
// (Open).
func (w *Worker) PeerErrors() bool { return w.peerMode }

// Address returns the worker's address, for the peers' endpoints.
func (w *Worker) Address() ([]byte, error) {
	w.lock()
	defer w.mu.Unlock()
	var a *C.ucp_address_t
	var n C.size_t
	if st := C.ucp_worker_get_address(w.w, &a, &n); st != C.UCS_OK {
		return nil, statusErr("ucx: worker address", st)
	}
	defer C.ucp_worker_release_address(w.w, a)
	return C.GoBytes(unsafe.Pointer(a), C.int(n)), nil
}

// RegisterBytes registers b (Register); an empty b registers nothing and
// returns no key.
func (w *Worker) RegisterBytes(b []byte) (rkey []byte, err error) {
	if len(b) == 0 {
		return nil, nil
	}
	return w.Register(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
}

// Register registers n bytes at p (memory outside the Go heap: a shared
// mapping) as the next region and returns its packed remote key.
func (w *Worker) Register(p unsafe.Pointer, n uintptr) (rkey []byte, err error) {
	w.lock()
	defer w.mu.Unlock()
	var memh C.ucp_mem_h
	if st := C.sh_mem_map(w.ctx, p, C.size_t(n), &memh); st != C.UCS_OK {
		return nil, statusErr(fmt.Sprintf("ucx: register %d bytes at %p", n, p), st)
	}
	var buf unsafe.Pointer
	var size C.size_t
	if st := C.ucp_rkey_pack(w.ctx, memh, &buf, &size); st != C.UCS_OK {
		C.ucp_mem_unmap(w.ctx, memh)
		return nil, statusErr("ucx: pack remote key", st)
	}
	defer C.ucp_rkey_buffer_release(buf)
	w.mems = append(w.mems, memh)
	return C.GoBytes(buf, C.int(size)), nil
}

// Mem is a registration of local memory with UCX (ucp_mem_map) that
// operations on a buffer inside it name, so that UCX does not look the
// buffer up itself. The zero Mem names none.
type Mem struct{ h C.ucp_mem_h }

// MemMap registers n bytes at addr, memory of this process that stays
// mapped until MemUnmap (the registration cache sees to that).
func (w *Worker) MemMap(addr, n uintptr) (Mem, error) {
	w.lock()
	defer w.mu.Unlock()
	if w.closed {
		return Mem{}, errors.New("ucx: register memory: worker closed")
	}
	var memh C.ucp_mem_h
	// The address is an integer the cache keeps: it goes to C as one.
	if st := C.sh_mem_map_at(w.ctx, C.uintptr_t(addr), C.size_t(n), &memh); st != C.UCS_OK {
		return Mem{}, statusErr(fmt.Sprintf("ucx: register %d bytes at %#x", n, addr), st)
	}
	return Mem{memh}, nil
}

// MemUnmap releases a registration of MemMap. After Close it does
// nothing: closing the context released every registration.
func (w *Worker) MemUnmap(m Mem) error {
	w.lock()
	defer w.mu.Unlock()
	if w.closed || m.h == nil {
		return nil
	}
	return statusErr("ucx: deregister memory", C.ucp_mem_unmap(w.ctx, m.h))
}

// SetPeer records what peer published. Its endpoint is made on first use.
func (w *Worker) SetPeer(peer int, info Peer) {
	w.lock()
	defer w.mu.Unlock()
	w.peers[peer].info = info
}

// ep returns the endpoint to peer, making it (and unpacking the peer's
// keys) on first use, and settling it (settle) before anything else is
// posted on it. Called with mu held.
func (w *Worker) ep(peer int) (*peerState, error) {
	ps := &w.peers[peer]
	if ps.ep != nil {
		if st := C.sh_ep_failed(C.int(peer)); st != C.UCS_OK {
			return nil, peerError(peer, "connection", Status(st))
		}
		if ps.ready {
			return ps, nil
		}
	} else {
		if len(ps.info.Addr) == 0 {
			return nil, fmt.Errorf("ucx: peer %d published no address", peer)
		}
		ps.addr = C.CBytes(ps.info.Addr)
		if st := C.sh_ep_create(w.w, ps.addr, C.intptr_t(peer), &ps.ep); st != C.UCS_OK {
			C.free(ps.addr)
			ps.ep = nil
			return nil, statusErr(fmt.Sprintf("ucx: endpoint to peer %d", peer), st)
		}
	}
	for i := len(ps.rkeys); i < len(ps.info.Rkeys); i++ {
		var rkey C.ucp_rkey_h
		b := C.CBytes(ps.info.Rkeys[i])
		st := C.ucp_ep_rkey_unpack(ps.ep, b, &rkey)
		C.free(b)
		if st != C.UCS_OK {
			return nil, statusErr(fmt.Sprintf("ucx: remote key %d of peer %d", i, peer), st)
		}
		ps.rkeys = append(ps.rkeys, rkey)
	}
	if err := w.settle(peer, ps); err != nil {
		return nil, err
	}
	ps.ready = true
	return ps, nil
}

// settle completes a new endpoint's wireup before anything else goes to
// the peer: it reads 8 bytes of the peer's first region and waits for
// them. Called with mu held, by ep only.
//
// Why: UCX 1.13's TCP transport (uct_tcp_ep_progress_am_rx) handles the
// messages of a connection in a loop, and a wireup request among them
// makes the receiving worker create its endpoint back, whose TCP lanes
// take over the very connection being read (uct_tcp_ep_replace_ep moves
// its receive buffer to the new lane when unread bytes follow the
// request). The loop then releases the buffer it no longer has: a NULL
// dereference at -8 (SIGSEGV in ucp_worker_progress, addr
// 0xfffffffffffffff8). UCX 1.14 checks for the move (commit 3dd0828ee9,
// "fixed issue in TCP wireup initialization"); 1.13 does not, so the
// unread bytes must not be there: nothing may follow the wireup request
// on the connection until the peer has handled it. A flush or a put right
// after the endpoint was made was such bytes (the cluster tests' rma
// check: a PE whose partner, just out of a barrier, put to it and flushed
// while it still slept in the barrier's second meeting).
//
// The get does it: over TCP UCX performs it in software, and its request
// waits in UCX until the peer's wireup reply gives this side the peer's
// endpoint (the reply carries the data); the peer replies from the very
// handler that makes its endpoint. So when the get completes, the peer's
// endpoint exists and every later message takes a connection that no
// handler will replace. Both sides settling at once is safe too: each
// side's get waits for the other's reply, so neither sends anything
// behind its request. Over a transport with hardware RMA the get does not
// wait for the wireup, but there the TCP fault does not arise either.
//
// A peer that registered no region has nothing to read: its endpoint is
// taken as it is (symheap's PEs always register two).
func (w *Worker) settle(peer int, ps *peerState) error {
	if len(ps.rkeys) == 0 || len(ps.info.Bases) == 0 {
		return nil
	}
	word := unsafe.Add(unsafe.Pointer(w.scratch), 2*8)
	req := C.sh_get(ps.ep, word, 8, C.uint64_t(ps.info.Bases[0]), ps.rkeys[0], nil)
	if err := w.wait(req, peer, "connect"); err != nil {
		// A get still in flight writes only scratch word 2, which nothing
		// else reads; the next ep settles anew.
		return err
	}
	return nil
}

// wait completes a request of an operation on peer (-1: the worker's),
// under mu, slice by slice, checking between slices that the peer lives.
func (w *Worker) wait(req C.ucs_status_ptr_t, peer int, what string) error {
	if req == nil {
		return nil
	}
	if C.sh_is_err(req) != 0 {
		return w.peerErr(peer, what, C.sh_status(req))
	}
	start := time.Now()
	for {
		st := C.sh_wait(w.w, w.efd, unsafe.Pointer(req), 1)
		if st != C.UCS_INPROGRESS {
			if st != C.UCS_OK {
				return w.peerErr(peer, what, st)
			}
			return nil
		}
		if err := w.stuck(peer, what, start); err != nil {
			return err
		}
	}
}

// Watch posts a standing receive for one 8-byte message whose tag matches
// tag under mask: a peer's announcement (Announce). Once it has arrived,
// every wait on a peer ends with a PeerError naming the announced value
// as the peer, and Watched reports it.
func (w *Worker) Watch(tag, mask uint64) error {
	w.lock()
	defer w.mu.Unlock()
	if st := C.sh_watch(w.w, C.uint64_t(tag), C.uint64_t(mask)); st != C.UCS_OK {
		return statusErr("ucx: post a receive", st)
	}
	w.watch = true
	return nil
}

// Watched reports the announced value, once it has arrived.
func (w *Worker) Watched() (uint64, bool) {
	w.lock()
	defer w.mu.Unlock()
	if !w.closed {
		C.ucp_worker_progress(w.w)
	}
	return w.watched()
}

// watched is Watched with mu held.
func (w *Worker) watched() (uint64, bool) {
	if !w.watch || w.closed {
		return 0, false
	}
	var v C.uint64_t
	if C.sh_watched(&v) == 0 {
		return 0, false
	}
	return uint64(v), true
}

// Connect makes and settles (ep) the endpoints to peers now.
func (w *Worker) Connect(peers []int) error {
	w.lock()
	defer w.mu.Unlock()
	for _, p := range peers {
		if _, err := w.ep(p); err != nil {
			return err
		}
	}
	return nil
}

// Announce sends val with tag to each of peers, without waiting for
// delivery (a peer that is gone does not hold it up); with flush it then
// waits, at most Timeout, until the messages have left. Only over
// endpoints made and settled before (Connect, or an earlier operation):
// a peer whose endpoint would be made now is skipped. The PEs that
// announce are those that found a peer failing; an endpoint they made
// now, to a PE that may leave at once, could fail with its wireup reply
// queued, and UCX 1.13 asserts that no such reply is ever dropped
// (ucp_request_send_state_ff: "got REP message"), aborting the process.
func (w *Worker) Announce(peers []int, tag, val uint64, flush bool) {
	w.lock()
	defer w.mu.Unlock()
	for _, p := range peers {
		if p < 0 || p >= len(w.peers) || !w.peers[p].ready {
			continue
		}
		if ps, err := w.ep(p); err == nil {
			C.sh_announce(ps.ep, C.uint64_t(tag), C.uint64_t(val))
		}
	}
	for range 100 {
		if C.ucp_worker_progress(w.w) == 0 {
			break
		}
	}
	if flush {
		w.dirty = true
		w.wait(C.sh_flush(w.w), -1, "flush")
	}
}

// stuck is the check between slices of a wait: the peer (or, for
// worker-wide waits, any peer) was reported lost, or the wait has lasted
// Timeout.
func (w *Worker) stuck(peer int, what string, start time.Time) error {
	if v, ok := w.watched(); ok {
		if w.Announced != nil {
			return w.Announced(v)
		}
		return peerError(int(v), what, errors.New("announced lost by another peer"))
	}
	if peer >= 0 {
		if st := C.sh_ep_failed(C.int(peer)); st != C.UCS_OK {
			return w.peerErr(peer, what, st)
		}
	}
	if w.Lost != nil {
		if err := w.Lost(peer); err != nil {
			return err
		}
	}
	if w.Timeout > 0 && time.Since(start) > w.Timeout {
		who := "a peer"
		if peer >= 0 {
			who = fmt.Sprintf("peer %d", peer)
		}
		return peerError(peer, what, fmt.Errorf("%s has not answered for %v: %w", who, w.Timeout, ErrTimeout))
	}
	return nil
}

func (w *Worker) peerErr(peer int, what string, st C.ucs_status_t) error {
	return peerError(peer, what, Status(st))
}

// Failed returns the first peer whose connection failed, if any.
func (w *Worker) Failed() (peer int, err error) {
	w.lock()
	defer w.mu.Unlock()
	for p := range w.peers {
		if st := C.sh_ep_failed(C.int(p)); st != C.UCS_OK {
			return p, peerError(p, "connection", Status(st))
		}
	}
	return -1, nil
}

// Put writes src to address raddr of peer's region. It returns when src
// may be reused (nbi false) or at once, src then being read until the next
// Flush (nbi true).
func (w *Worker) Put(peer, region int, raddr uint64, src []byte, nbi bool, m Mem) error {
	w.lock()
	defer w.mu.Unlock()
	ps, err := w.ep(peer)
	if err != nil {
		return err
	}
	w.dirty = true
	req := C.sh_put(ps.ep, unsafe.Pointer(unsafe.SliceData(src)), C.size_t(len(src)), C.uint64_t(raddr), ps.rkeys[region], m.h)
	if req == nil || C.sh_is_err(req) != 0 {
		return w.wait(req, peer, "put")
	}
	if nbi {
		// UCX still reads src: pin it until the next Flush, and let the
		// flush complete the request.
		w.pins.Pin(unsafe.SliceData(src))
		C.ucp_request_free(unsafe.Pointer(req))
		return nil
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(unsafe.SliceData(src))
	return w.wait(req, peer, "put")
}

// Get reads len(dst) bytes at address raddr of peer's region into dst.
func (w *Worker) Get(dst []byte, peer, region int, raddr uint64, m Mem) error {
	w.lock()
	defer w.mu.Unlock()
	ps, err := w.ep(peer)
	if err != nil {
		return err
	}
	req := C.sh_get(ps.ep, unsafe.Pointer(unsafe.SliceData(dst)), C.size_t(len(dst)), C.uint64_t(raddr), ps.rkeys[region], m.h)
	if req != nil && C.sh_is_err(req) == 0 {
		var pin runtime.Pinner
		defer pin.Unpin()
		pin.Pin(unsafe.SliceData(dst))
	}
	return w.wait(req, peer, "get")
}

// Atomic performs op on the size-byte word at raddr of peer's region. With
// fetch it waits for the old value and returns it; without, it returns
// once the operation is posted (complete at the next Flush). For OpCSwap,
// v is the new value and cmp the expected one (fetch is implied).
func (w *Worker) Atomic(op, peer, region int, raddr uint64, size int, v, cmp uint64, fetch bool) (uint64, error) {
	w.lock()
	defer w.mu.Unlock()
	ps, err := w.ep(peer)
	if err != nil {
		return 0, err
	}
	s := unsafe.Slice((*uint64)(unsafe.Pointer(w.scratch)), scratchWords)
	// The operand goes in the buffer; for CSWAP the buffer holds the
	// expected value and the reply buffer the new one on entry (UCP:
	// "Result=Y; if (X==Y) then Y=Z", X the buffer, Z the reply buffer).
	s[0], s[1] = v, 0
	if op == OpCSwap {
		s[0], s[1] = cmp, v
	}
	var res *C.uint64_t
	if fetch || op == OpCSwap {
		res = (*C.uint64_t)(unsafe.Pointer(&s[1]))
	}
	if size == 4 {
		// The 4-byte operands and result sit in the first half of their
		// words (little-endian).
		s[0], s[1] = s[0]&0xffffffff, s[1]&0xffffffff
	}
	w.dirty = w.dirty || res == nil
	req := C.sh_amo(ps.ep, C.int(op), C.int(size), (*C.uint64_t)(unsafe.Pointer(&s[0])), res, C.uint64_t(raddr), ps.rkeys[region])
	if err := w.wait(req, peer, "atomic"); err != nil {
		return 0, err
	}
	if res == nil {
		return 0, nil
	}
	if size == 4 {
		return s[1] & 0xffffffff, nil
	}
	return s[1], nil
}

// Fence orders the operations posted before it before those posted after
// it, to each peer.
func (w *Worker) Fence() error {
	w.lock()
	defer w.mu.Unlock()
	return statusErr("ucx: fence", C.ucp_worker_fence(w.w))
}

// Flush completes every operation posted so far, at its target.
func (w *Worker) Flush() error {
	w.lock()
	defer w.mu.Unlock()
	if !w.dirty {
		return nil // nothing posted since the last flush: nothing to complete
	}
	err := w.wait(C.sh_flush(w.w), -1, "flush")
	if err == nil {
		w.pins.Unpin()
		w.dirty = false
	}
	return err
}

// Progress advances the worker's communication and reports whether it did
// anything.
func (w *Worker) Progress() bool {
	w.touch()
	if !w.mu.TryLock() {
		return false // somebody else progresses now
	}
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	return C.ucp_worker_progress(w.w) != 0
}

// Sleep is the progress goroutine's step. It progresses until there is
// nothing to do, then sleeps on the worker's event descriptor until
// communication arrives or d passes; it reports a peer's announcement
// (Watch) once it has arrived. It never waits for the worker's lock: a
// PE that holds it progresses the worker itself, and a goroutine queued
// on the lock would be handed it at the PE's next unlock, parking the PE.
func (w *Worker) Sleep(d time.Duration) (announced uint64, ok bool) {
	// The PE's own calls progress the worker while they run, and for a
	// moment after: stay out of their way (on a machine with a core per
	// PE the extra thread would compete with them for a core).
	// A PE busy with operations that do not wait (puts in a loop) still
	// learns of an announcement: one progress and a look, if the lock is
	// free, without counting as the PE's call.
	if idle := time.Duration(clock() - w.last.Load()); idle < quietFor {
		time.Sleep(quietFor - idle)
		if !w.mu.TryLock() {
			return 0, false
		}
		defer w.mu.Unlock()
		if w.closed {
			return 0, false
		}
		C.ucp_worker_progress(w.w)
		return w.watched()
	}
	if !w.mu.TryLock() {
		time.Sleep(quietFor)
		return 0, false
	}
	if w.closed {
		w.mu.Unlock()
		return 0, false
	}
	for C.ucp_worker_progress(w.w) != 0 {
	}
	if v, ok := w.watched(); ok {
		w.mu.Unlock()
		return v, true
	}
	armed := w.efd >= 0 && C.ucp_worker_arm(w.w) == C.UCS_OK
	w.mu.Unlock()
	if armed {
		C.sh_poll(w.efd, C.int(d/time.Millisecond))
	} else if w.efd < 0 {
		time.Sleep(d)
	}
	return 0, false
}

// Send sends buf to peer with tag, and returns when buf may be reused.
// A large message completes only when the receiver takes it, so Timeout
// does not apply; check, if not nil, runs without the lock between slices
// of the wait, and its error ends it.
func (w *Worker) Send(peer int, tag uint64, buf []byte, check func() error, m Mem) error {
	w.lock()
	defer w.mu.Unlock()
	ps, err := w.ep(peer)
	if err != nil {
		return err
	}
	req := C.sh_tag_send(ps.ep, unsafe.Pointer(unsafe.SliceData(buf)), C.size_t(len(buf)), C.uint64_t(tag), m.h)
	if req == nil {
		return nil
	}
	if C.sh_is_err(req) != 0 {
		return w.peerErr(peer, "send", C.sh_status(req))
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(unsafe.SliceData(buf))
	for {
		st := C.sh_wait(w.w, w.efd, unsafe.Pointer(req), 1)
		if st != C.UCS_INPROGRESS {
			if st != C.UCS_OK {
				return w.peerErr(peer, "send", st)
			}
			return nil
		}
		err := w.stuck(peer, "send", time.Now())
		if err == nil && check != nil {
			w.mu.Unlock()
			err = check()
			w.lock()
		}
		if err != nil {
			return err // the request stays with UCX: the job is broken
		}
		w.mu.Unlock()
		runtime.Gosched()
		w.lock()
	}
}

// Req is a non-blocking send or receive (SendNB, RecvNB).
// Its fields change under the Worker's mu only (Test), which every access
// holds.
type Req struct {
	p    unsafe.Pointer // the UCX request, until complete; nil: complete
	recv bool
	n    int
	err  error
	pin  runtime.Pinner
}

// SendNB starts sending buf to peer with tag. buf must not change until
// the request is complete (Test). A nil *Req (and nil error): the send
// completed at once.
func (w *Worker) SendNB(peer int, tag uint64, buf []byte, m Mem) (*Req, error) {
	w.lock()
	defer w.mu.Unlock()
	ps, err := w.ep(peer)
	if err != nil {
		return nil, err
	}
	p := C.sh_tag_send(ps.ep, unsafe.Pointer(unsafe.SliceData(buf)), C.size_t(len(buf)), C.uint64_t(tag), m.h)
	switch {
	case p == nil:
		return nil, nil // complete at once (buf may be reused): nothing to make
	case C.sh_is_err(p) != 0:
		return nil, w.peerErr(peer, "send", C.sh_status(p))
	}
	r := &Req{n: len(buf), p: unsafe.Pointer(p)}
	r.pin.Pin(unsafe.SliceData(buf))
	return r, nil
}

// TryProbe reports a queued message matching tag under mask, without
// receiving it and without progressing the worker.
func (w *Worker) TryProbe(tag, mask uint64) (stag uint64, n int, ok bool) {
	w.lock()
	defer w.mu.Unlock()
	var st C.uint64_t
	var l C.size_t
	if C.sh_try_probe(w.w, C.uint64_t(tag), C.uint64_t(mask), &st, &l) == 0 {
		return 0, 0, false
	}
	return uint64(st), int(l), true
}

// RecvNB starts receiving the message with exactly tag (found by
// TryProbe) into buf.
func (w *Worker) RecvNB(buf []byte, tag uint64) (*Req, error) {
	w.lock()
	defer w.mu.Unlock()
	r := &Req{recv: true}
	p := C.sh_tag_recv(w.w, unsafe.Pointer(unsafe.SliceData(buf)), C.size_t(len(buf)), C.uint64_t(tag), C.uint64_t(^uint64(0)))
	switch {
	case C.sh_is_err(p) != 0:
		return nil, statusErr("ucx: receive", C.sh_status(p))
	default:
		r.p = unsafe.Pointer(p)
		if len(buf) > 0 {
			r.pin.Pin(unsafe.SliceData(buf))
		}
	}
	return r, nil
}

// Test reports whether r is complete, with the received length (a
// receive) and its error. A nil r is a send SendNB completed at once.
func (w *Worker) Test(r *Req, peer int) (done bool, n int, err error) {
	if r == nil {
		return true, 0, nil // a send SendNB completed at once
	}
	// r.p is read and cleared under mu: two goroutines may test one
	// request (a Wait beside a Test), and the one that finds it complete
	// frees it.
	w.lock()
	defer w.mu.Unlock()
	if r.p == nil {
		return true, r.n, r.err
	}
	var l C.size_t
	recv := C.int(0)
	if r.recv {
		recv = 1
	}
	st := C.sh_req_test(r.p, recv, &l)
	if st == C.UCS_INPROGRESS {
		return false, 0, nil
	}
	r.p = nil
	r.pin.Unpin()
	if r.recv {
		r.n = int(l)
	}
	if st != C.UCS_OK {
		r.err = peerError(peer, "message", Status(st))
	}
	return true, r.n, r.err
}

// WaitEvent progresses the worker, or waits a little (at most about a
// millisecond) for communication to arrive.
func (w *Worker) WaitEvent() {
	w.lock()
	defer w.mu.Unlock()
	if !w.closed {
		C.sh_wait_event(w.w, w.efd)
	}
}

// Check reports a known failure of peer (-1: any announcement only), as
// the waits of this package do between slices.
func (w *Worker) Check(peer int) error {
	w.lock()
	defer w.mu.Unlock()
	return w.stuck(peer, "message", time.Now())
}

// Probe waits until a message whose tag matches tag under mask has
// arrived, and returns its tag and length, leaving it for Recv. from and
// check are as for Recv.
func (w *Worker) Probe(tag, mask uint64, from int, check func() error) (uint64, int, error) {
	w.lock()
	defer w.mu.Unlock()
	if from >= 0 {
		if _, err := w.ep(from); err != nil {
			return 0, 0, err
		}
	}
	for {
		var stag C.uint64_t
		var n C.size_t
		if C.sh_probe_wait(w.w, w.efd, C.uint64_t(tag), C.uint64_t(mask), 1, &stag, &n) != 0 {
			return uint64(stag), int(n), nil
		}
		err := w.between(from, check)
		if err != nil {
			return 0, 0, err
		}
		w.mu.Unlock()
		runtime.Gosched()
		w.lock()
	}
}

// Outcomes of RecvMatch: transport.Match.
const (
	MatchNone     = transport.MatchNone
	MatchReceived = transport.MatchReceived
	MatchOther    = transport.MatchOther
)

// RecvMatch waits up to about a millisecond, progressing the worker, for
// a message whose tag matches tag under mask, and receives it into buf
// if it fits and is at most max bytes (an eager message, which is
// complete on arrival). It returns the outcome, and the message's tag and
// length unless MatchNone; a failed receive's error names from. One call
// into C for a small message's whole wait and receive.
func (w *Worker) RecvMatch(buf []byte, tag, mask uint64, max, from int) (outcome transport.Match, stag uint64, n int, err error) {
	w.lock()
	defer w.mu.Unlock()
	var t C.uint64_t
	var l C.size_t
	rc := C.sh_recv_match(w.w, w.efd, C.uint64_t(tag), C.uint64_t(mask), unsafe.Pointer(unsafe.SliceData(buf)),
		C.size_t(min(len(buf), max)), 1, &t, &l)
	if rc < 0 {
		return MatchNone, 0, 0, peerError(from, "receive", Status(rc))
	}
	return transport.Match(rc), uint64(t), int(l), nil
}

// between is what a wait for a message does between two slices: it asks
// whether the peer it waits for is stuck, then runs check without the
// lock. Called with the lock held, which it holds again on return.
func (w *Worker) between(from int, check func() error) error {
	err := w.stuck(from, "receive", time.Now())
	if err == nil && check != nil {
		w.mu.Unlock()
		err = check()
		w.lock()
	}
	return err
}

// Recv receives into buf the first message whose tag matches tag under
// mask, and returns its length and tag. from names the peer the message is
// expected from (-1: any), whose failure ends the wait. A sender may take
// its time (it may wait for others), so Timeout does not apply; check,
// if not nil, runs without the lock between slices of the wait, and its
// error ends it.
func (w *Worker) Recv(buf []byte, tag, mask uint64, from int, check func() error) (int, uint64, error) {
	w.lock()
	if from >= 0 {
		// An endpoint of our own to the sender: its connection's failure
		// is what ends the wait if the sender dies.
		if _, err := w.ep(from); err != nil {
			w.mu.Unlock()
			return 0, 0, err
		}
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	if len(buf) > 0 {
		pin.Pin(unsafe.SliceData(buf))
	}
	req := C.sh_tag_recv(w.w, unsafe.Pointer(unsafe.SliceData(buf)), C.size_t(len(buf)), C.uint64_t(tag), C.uint64_t(mask))
	if C.sh_is_err(req) != 0 {
		w.mu.Unlock()
		return 0, 0, peerError(from, "receive", Status(C.sh_status(req)))
	}
	for {
		var stag C.uint64_t
		var n C.size_t
		st := C.sh_tag_wait(w.w, w.efd, unsafe.Pointer(req), 1, &stag, &n)
		if st != C.UCS_INPROGRESS {
			w.mu.Unlock()
			if st != C.UCS_OK {
				return int(n), uint64(stag), peerError(from, "receive", Status(st))
			}
			return int(n), uint64(stag), nil
		}
		err := w.between(from, check)
		if err != nil {
			// A peer that sent the message and then left (its Close
			// after the last barrier) fails the check of a wait whose
			// message is on its way: let it land before giving up, and
			// take it if it did, before or during the cancel.
			st = C.sh_tag_wait(w.w, w.efd, unsafe.Pointer(req), landMs, &stag, &n)
			if st == C.UCS_INPROGRESS {
				C.ucp_request_cancel(w.w, unsafe.Pointer(req))
				for st == C.UCS_INPROGRESS {
					st = C.sh_tag_wait(w.w, w.efd, unsafe.Pointer(req), 100, &stag, &n)
				}
			}
			w.mu.Unlock()
			if st == C.UCS_OK {
				return int(n), uint64(stag), nil
			}
			return 0, 0, err
		}
		// Let the progress goroutine and the PE's other calls in between
		// slices.
		w.mu.Unlock()
		runtime.Gosched()
		w.lock()
	}
}

// landMs is how long a receive whose wait failed its check progresses
// the worker before it cancels (Recv): time for a message its peer sent
// before it left to be taken from the connection.
const landMs = 20

// Close releases endpoints, registrations, the worker and the context.
func (w *Worker) Close() {
	w.lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	if w.watch {
		C.sh_watch_cancel(w.w)
	}
	for i := range w.peers {
		ps := &w.peers[i]
		for _, rk := range ps.rkeys {
			C.ucp_rkey_destroy(rk)
		}
		if ps.ep != nil {
			req := C.sh_ep_close(ps.ep)
			if req != nil && C.sh_is_err(req) == 0 {
				for j := 0; j < 100 && C.sh_wait(w.w, w.efd, unsafe.Pointer(req), 10) == C.UCS_INPROGRESS; j++ {
				}
			}
			C.free(ps.addr)
		}
	}
	w.pins.Unpin()
	for _, m := range w.mems {
		C.ucp_mem_unmap(w.ctx, m)
	}
	C.ucp_worker_destroy(w.w)
	C.ucp_cleanup(w.ctx)
	C.free(unsafe.Pointer(w.scratch))
}

// addressOf is the address of b's first byte, as a peer names it.
func addressOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
