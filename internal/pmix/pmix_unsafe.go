//go:build ucx

package pmix

/*
#cgo pkg-config: pmix
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <pmix.h>

static pmix_proc_t me;

// The rank of the first process the launcher reported gone, or -1; and
// the event's status. Written by PMIx's event thread, read by Go.
static volatile int64_t lost_rank = -1;
static volatile int32_t lost_status;

static int sh_init(void) {
	int rc = PMIx_Init(&me, NULL, 0);
	return rc;
}
static int sh_rank(void) { return (int)me.rank; }
static const char *sh_nspace(void) { return me.nspace; }

// sh_get reads key of proc rank (of this job's namespace) into *v, which
// the caller releases (PMIX_VALUE_RELEASE) on success.
static int sh_get(uint32_t rank, const char *key, pmix_value_t **v) {
	pmix_proc_t p;
	PMIX_PROC_CONSTRUCT(&p);
	memcpy(p.nspace, me.nspace, PMIX_MAX_NSLEN + 1);
	p.rank = rank;
	return PMIx_Get(&p, key, NULL, 0, v);
}

// sh_get_u64 reads a numeric key of proc rank (PMIX_RANK_WILDCARD for the
// job) as an unsigned integer, whatever integer type the launcher used.
static int sh_get_u64(uint32_t rank, const char *key, uint64_t *out) {
	pmix_value_t *v = NULL;
	int rc = sh_get(rank, key, &v);
	if (rc != PMIX_SUCCESS) return rc;
	switch (v->type) {
	case PMIX_UINT8: *out = v->data.uint8; break;
	case PMIX_UINT16: *out = v->data.uint16; break;
	case PMIX_UINT32: *out = v->data.uint32; break;
	case PMIX_UINT64: *out = v->data.uint64; break;
	case PMIX_INT: *out = (uint64_t)v->data.integer; break;
	case PMIX_PROC_RANK: *out = v->data.rank; break;
	case PMIX_SIZE: *out = v->data.size; break;
	default: rc = PMIX_ERR_BAD_PARAM;
	}
	PMIX_VALUE_RELEASE(v);
	return rc;
}

// sh_get_bytes reads a byte-object or string key of proc rank into a
// malloc'd buffer the caller frees.
static int sh_get_bytes(uint32_t rank, const char *key, char **buf, size_t *len) {
	pmix_value_t *v = NULL;
	int rc = sh_get(rank, key, &v);
	if (rc != PMIX_SUCCESS) return rc;
	if (v->type == PMIX_BYTE_OBJECT) {
		*len = v->data.bo.size;
		*buf = malloc(*len ? *len : 1);
		memcpy(*buf, v->data.bo.bytes, *len);
	} else if (v->type == PMIX_STRING) {
		*len = strlen(v->data.string);
		*buf = malloc(*len + 1);
		memcpy(*buf, v->data.string, *len + 1);
	} else {
		rc = PMIX_ERR_BAD_PARAM;
	}
	PMIX_VALUE_RELEASE(v);
	return rc;
}

static int sh_put(const char *key, void *data, size_t len) {
	pmix_value_t v;
	PMIX_VALUE_CONSTRUCT(&v);
	v.type = PMIX_BYTE_OBJECT;
	v.data.bo.bytes = data;
	v.data.bo.size = len;
	// PMIx_Put copies the value.
	return PMIx_Put(PMIX_GLOBAL, key, &v);
}

static int sh_fence(int collect) {
	pmix_info_t info;
	bool flag = true;
	PMIX_INFO_CONSTRUCT(&info);
	PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &flag, PMIX_BOOL);
	int rc = PMIx_Fence(NULL, 0, collect ? &info : NULL, collect ? 1 : 0);
	PMIX_INFO_DESTRUCT(&info);
	return rc;
}

static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *source,
		pmix_info_t info[], size_t ninfo, pmix_info_t *results, size_t nresults,
		pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata) {
	switch (status) {
	case PMIX_ERR_PROC_ABORTED: case PMIX_EVENT_PROC_TERMINATED: case PMIX_ERR_PROC_TERM_WO_SYNC:
	case PMIX_ERR_PROC_ABORTED_BY_SIG: case PMIX_ERR_PROC_KILLED_BY_CMD: case PMIX_PROC_TERMINATED: {
		int64_t r = -1;
		for (size_t i = 0; i < ninfo; i++) {
			if (0 == strncmp(info[i].key, PMIX_EVENT_AFFECTED_PROC, PMIX_MAX_KEYLEN) && info[i].value.type == PMIX_PROC) {
				r = info[i].value.data.proc->rank;
			}
		}
		if (r < 0 && source != NULL) r = source->rank;
		if (r >= 0 && r != (int64_t)me.rank && lost_rank < 0) {
			lost_status = status;
			__atomic_store_n(&lost_rank, r, __ATOMIC_SEQ_CST);
		}
		break;
	}
	default:
		break;
	}
	if (cbfunc != NULL) cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void sh_register_events(void) {
	// A default handler (no codes): every event the launcher reports.
	PMIx_Register_event_handler(NULL, 0, NULL, 0, on_event, NULL, NULL);
}

static int64_t sh_lost(int32_t *status) {
	int64_t r = __atomic_load_n(&lost_rank, __ATOMIC_SEQ_CST);
	*status = lost_status;
	return r;
}

static int sh_finalize(void) { return PMIx_Finalize(NULL, 0); }
static const char *sh_err(int rc) { return PMIx_Error_string(rc); }
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// ErrNoPMIx says the process was not started by a PMIx launcher.
var ErrNoPMIx = errors.New("pmix: no PMIx launcher")

// Available reports whether the environment names a PMIx server to
// connect to (the launcher sets these variables).
func Available() bool {
	return os.Getenv("PMIX_NAMESPACE") != "" && (os.Getenv("PMIX_SERVER_URI2") != "" ||
		os.Getenv("PMIX_SERVER_URI3") != "" || os.Getenv("PMIX_SERVER_URI4") != "" ||
		os.Getenv("PMIX_SERVER_URI21") != "" || os.Getenv("PMIX_SERVER_URI41") != "" || os.Getenv("PMIX_SERVER_URI") != "")
}

// Client is this process's connection to the launcher. Its methods are
// safe for concurrent use (PMIx serialises them itself).
type Client struct {
	Rank, Size int
	Namespace  string
	once       sync.Once
}

func pmixErr(what string, rc C.int) error {
	return fmt.Errorf("pmix: %s: %s (%d)", what, C.GoString(C.sh_err(rc)), int(rc))
}

// Init connects to the launcher's PMIx server.
func Init() (*Client, error) {
	if !Available() {
		return nil, ErrNoPMIx
	}
	if rc := C.sh_init(); rc != C.PMIX_SUCCESS {
		return nil, pmixErr("PMIx_Init", rc)
	}
	c := &Client{Rank: int(C.sh_rank()), Namespace: C.GoString(C.sh_nspace())}
	n, err := c.getU64(Wildcard, C.PMIX_JOB_SIZE)
	if err != nil {
		C.sh_finalize()
		return nil, err
	}
	c.Size = int(n)
	C.sh_register_events()
	return c, nil
}

// Wildcard names the job instead of one rank in Get.
const Wildcard = -1

func cRank(rank int) C.uint32_t {
	if rank == Wildcard {
		return C.PMIX_RANK_WILDCARD
	}
	return C.uint32_t(rank)
}

func (c *Client) getU64(rank int, key string) (uint64, error) {
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	var v C.uint64_t
	if rc := C.sh_get_u64(cRank(rank), k, &v); rc != C.PMIX_SUCCESS {
		return 0, pmixErr("PMIx_Get "+key, rc)
	}
	return uint64(v), nil
}

// NodeID returns the launcher's id of the node rank runs on.
func (c *Client) NodeID(rank int) (int, error) {
	v, err := c.getU64(rank, C.PMIX_NODEID)
	return int(v), err
}

// Hostname returns the name of the host rank runs on.
func (c *Client) Hostname(rank int) (string, error) {
	b, err := c.Get(rank, C.PMIX_HOSTNAME)
	return string(b), err
}

// Nodes returns an identifier of the node of every rank: the host names
// (PMIX_HOSTNAME) where the launcher gives them for every rank, else its
// node ids (PMIX_NODEID; Open MPI 4's launcher gives those only for the
// ranks of the asking process's own node).
func (c *Client) Nodes() ([]string, error) {
	out := make([]string, c.Size)
	var herr error
	for r := range out {
		h, err := c.Hostname(r)
		if err != nil {
			herr = err
			break
		}
		out[r] = "host:" + h
	}
	if herr == nil {
		return out, nil
	}
	for r := range out {
		id, err := c.NodeID(r)
		if err != nil {
			return nil, fmt.Errorf("pmix: the node of rank %d: neither %s (%v) nor %s (%v)", r, C.PMIX_HOSTNAME, herr, C.PMIX_NODEID, err)
		}
		out[r] = "id:" + strconv.Itoa(id)
	}
	return out, nil
}

// LocalRank returns this process's rank among the job's processes of its
// node.
func (c *Client) LocalRank() (int, error) {
	v, err := c.getU64(c.Rank, C.PMIX_LOCAL_RANK)
	return int(v), err
}

// LocalPeers returns the ranks of the job on this node, in increasing order.
func (c *Client) LocalPeers() ([]int, error) {
	b, err := c.Get(Wildcard, C.PMIX_LOCAL_PEERS)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Split(strings.TrimSpace(string(b)), ",") {
		r, err := strconv.Atoi(f)
		if err != nil || r < 0 || r >= c.Size {
			return nil, fmt.Errorf("pmix: %s = %q: not a list of ranks", C.PMIX_LOCAL_PEERS, b)
		}
		out = append(out, r)
	}
	return out, nil
}

// Put publishes key=val for the other processes (after Commit and Fence).
func (c *Client) Put(key string, val []byte) error {
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	d := C.CBytes(val)
	defer C.free(d)
	if rc := C.sh_put(k, d, C.size_t(len(val))); rc != C.PMIX_SUCCESS {
		return pmixErr("PMIx_Put "+key, rc)
	}
	return nil
}

// Commit sends the values Put so far to the launcher.
func (c *Client) Commit() error {
	if rc := C.PMIx_Commit(); rc != C.PMIX_SUCCESS {
		return pmixErr("PMIx_Commit", C.int(rc))
	}
	return nil
}

// Fence waits until every process of the job has reached it; collect
// makes every value committed before it readable by every process.
func (c *Client) Fence(collect bool) error {
	cl := C.int(0)
	if collect {
		cl = 1
	}
	if rc := C.sh_fence(cl); rc != C.PMIX_SUCCESS {
		return pmixErr("PMIx_Fence", rc)
	}
	return nil
}

// Get reads the value key that rank published (Wildcard: the job's).
func (c *Client) Get(rank int, key string) ([]byte, error) {
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	var buf *C.char
	var n C.size_t
	if rc := C.sh_get_bytes(cRank(rank), k, &buf, &n); rc != C.PMIX_SUCCESS {
		return nil, pmixErr("PMIx_Get "+key, rc)
	}
	defer C.free(unsafe.Pointer(buf))
	return C.GoBytes(unsafe.Pointer(buf), C.int(n)), nil
}

// Lost returns the first rank the launcher reported terminated or
// aborted, if any.
func (c *Client) Lost() (rank int, status string, ok bool) {
	var st C.int32_t
	r := C.sh_lost(&st)
	if r < 0 {
		return -1, "", false
	}
	return int(r), C.GoString(C.sh_err(C.int(st))), true
}

// Finalize disconnects from the launcher. Idempotent.
func (c *Client) Finalize() {
	c.once.Do(func() { C.sh_finalize() })
}
