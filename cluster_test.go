package symheap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/symheap/symheap/internal/transport"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/cluster"
	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/inspect"
)

// Tests across fake hosts (package internal/cluster): mpirun starts the
// test binary as the PEs of one job on two hosts of two PEs each, which
// share only the network; each PE runs TestClusterPE with the checks the
// parent names in SYMHEAP_CLUSTER_CHECKS.

const envClusterChecks = "SYMHEAP_CLUSTER_CHECKS"

// clusterJob runs checks in a job of hosts×perHost PEs and returns its
// result; it skips (or, with SYMHEAP_REQUIRE_CLUSTER=1, fails) where fake
// hosts cannot run.
func clusterJob(t *testing.T, tr string, hosts, perHost int, checks string, timeout time.Duration, env ...string) cluster.Result {
	return clusterJobWith(t, tr, cluster.Job{Hosts: hosts, PerHost: perHost, Timeout: timeout, Env: env}, checks)
}

// overTransports runs f in a subtest for each transport this build has
// (tcp in every build, ucx in the ucx build): the cluster tests run the
// same checks over each.
func overTransports(t *testing.T, f func(t *testing.T, tr string)) {
	for _, tr := range transport.Transports() {
		t.Run(tr.Name, func(t *testing.T) { f(t, tr.Name) })
	}
}

// transportEnv is what the PEs of a job over transport tr are started
// with: UCX with the launcher's PMIx; TCP with a rendezvous at a free
// port of this machine, which the job's first PE listens on.
func transportEnv(t *testing.T, tr string) []string {
	env := []string{"SYMHEAP_TRANSPORT=" + tr}
	if tr == "tcp" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		env = append(env, "SYMHEAP_BOOTSTRAP=rendezvous", "SYMHEAP_BOOT="+addr)
	}
	return env
}

func clusterJobWith(t *testing.T, tr string, j cluster.Job, checks string) cluster.Result {
	t.Helper()
	if err := cluster.Available(); err != nil {
		if os.Getenv("SYMHEAP_REQUIRE_CLUSTER") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	j.Env = append(append(j.Env, transportEnv(t, tr)...), envClusterChecks+"="+checks, "GOTRACEBACK=crash", "UCX_ERROR_SIGNALS=", "SHMEM_SYMMETRIC_SIZE=32m", "SYMHEAP_SHARED_SIZE=4m")
	j.Argv = append(j.Argv, exe, "-test.run=^TestClusterPE$", "-test.v", "-test.count=1")
	r := cluster.Run(context.Background(), j)
	t.Logf("%d×%d PEs, %v, checks %s:\n%s", j.Hosts, j.PerHost, r.Elapsed.Round(time.Millisecond), checks, r.Output)
	if len(r.Leftovers) > 0 {
		t.Errorf("segments left behind: %v", r.Leftovers)
	}
	return r
}

// clusterFailure says why job r failed: the line of a PE that found a
// case of the message matrix hung (matrixHang), which names the case, if
// one did; else the job's error.
func clusterFailure(r cluster.Result) string {
	for _, l := range strings.Split(string(r.Output), "\n") {
		if i := strings.Index(l, matrixHang); i >= 0 {
			return fmt.Sprintf("%s (job: %v)", strings.TrimSpace(l[i:]), r.Err)
		}
	}
	return fmt.Sprintf("job failed: %v", r.Err)
}

// TestCluster runs every family across two fake hosts of two PEs, with
// UCX's peer error handling, among them the matrix of messages across
// nodes (msgmatrix, cluster_msg_test.go).
func TestCluster(t *testing.T) {
	overTransports(t, func(t *testing.T, tr string) {
		r := clusterJob(t, tr, 2, 2, "placement,rma,atomics,mixed,wait,busy,barrier,alloc,diverge,collectives,locks,messages,nodemsg,anymsg,msgmatrix,msgprogress,teams,stat", 300*time.Second)
		if r.Err != nil {
			t.Fatal(clusterFailure(r))
		}
		if n := strings.Count(string(r.Output), "--- PASS: TestClusterPE"); n != 4 {
			t.Fatalf("%d of 4 PEs passed", n)
		}
	})
}

// TestClusterNoPeerErrors: with SYMHEAP_UCX_PEER_ERRORS=0 the endpoints
// between nodes are made without UCX's peer error handling, and every
// family that crosses nodes still works (messages of 0 B to 4 MiB among
// them: those above UCX's eager size take the zero-copy rendezvous that
// this mode allows), and so does the matrix of messages across nodes
// (msgmatrix), at this mode's protocol boundaries.
func TestClusterNoPeerErrors(t *testing.T) {
	if _, ok := transport.Lookup("ucx"); !ok {
		t.Skip("UCX's peer error handling: the ucx build only")
	}
	r := clusterJob(t, "ucx", 2, 2, "noerrmode,rma,atomics,barrier,alloc,collectives,messages,anymsg,msgmatrix,msgprogress", 300*time.Second, config.EnvUCXPeerErrors+"=0")
	if r.Err != nil {
		t.Fatal(clusterFailure(r))
	}
	if n := strings.Count(string(r.Output), "--- PASS: TestClusterPE"); n != 4 {
		t.Fatalf("%d of 4 PEs passed", n)
	}
}

// TestClusterBench: `symheap bench`, built as this test is (with -tags ucx
// for UCX) and started by mpirun with a PE on each of two fake hosts,
// runs the suite across nodes and prints every figure once.
func TestClusterBench(t *testing.T) {
	overTransports(t, testClusterBench)
}

func testClusterBench(t *testing.T, tr string) {
	if err := cluster.Available(); err != nil {
		if os.Getenv("SYMHEAP_REQUIRE_CLUSTER") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	bin := t.TempDir() + "/symheap"
	build := []string{"build", "-o", bin, "./cmd/symheap"}
	if tr == "ucx" {
		build = []string{"build", "-tags", "ucx", "-o", bin, "./cmd/symheap"}
	}
	if out, err := exec.Command("go", build...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(build, " "), err, out)
	}
	r := cluster.Run(context.Background(), cluster.Job{Hosts: 2, PerHost: 1, Timeout: 300 * time.Second,
		Argv: []string{bin, "bench", "--time", "30ms", "--rounds", "1", "--max-size", "1m"},
		Env:  append(transportEnv(t, tr), "UCX_ERROR_SIGNALS=", "SHMEM_SYMMETRIC_SIZE=32m", "SYMHEAP_SHARED_SIZE=4m")})
	t.Logf("symheap bench on 2 fake hosts, %v:\n%s", r.Elapsed.Round(time.Millisecond), r.Output)
	if r.Err != nil || len(r.Leftovers) > 0 {
		t.Fatalf("job: %v, segments left: %v", r.Err, r.Leftovers)
	}
	if !strings.Contains(string(r.Output), "2 PEs on 2 nodes") {
		t.Errorf("the bench does not say it ran on 2 nodes")
	}
	for _, m := range []string{"init_time 0", "put_lat 8", "get_lat 8", "fadd_lat 8", "barrier_lat 0", "malloc_lat 8", "put_bw 1048576", "pingpong_lat 8", "stream_bw 1048576"} {
		re := regexp.MustCompile(`(?m)^sym ` + m + ` ([0-9.]+)$`)
		if got := re.FindAllSubmatch(r.Output, -1); len(got) != 1 {
			t.Errorf("%d lines of %q, want 1", len(got), m)
		} else if v, err := strconv.ParseFloat(string(got[0][1]), 64); err != nil || v <= 0 {
			t.Errorf("%s: %s", m, got[0][1])
		}
	}
}

// TestClusterPE is one PE of a cluster job.
func TestClusterPE(t *testing.T) {
	checks := os.Getenv(envClusterChecks)
	if checks == "" {
		t.Skip("runs as a PE of TestCluster")
	}
	pe, err := Init(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := pe.Close(); err != nil && !(faultJob && errors.Is(err, ErrPeerLost)) {
			t.Error(err)
		}
	}()
	byName := map[string]func(*testing.T, *PE){}
	for _, c := range clusterChecks {
		byName[c.name] = c.fn
	}
	for _, name := range strings.Split(checks, ",") {
		fn, ok := byName[name]
		if !ok {
			t.Fatalf("no cluster check %q", name)
		}
		start := time.Now()
		fn(t, pe)
		t.Logf("PE %d: %s done in %v", pe.Rank(), name, time.Since(start).Round(time.Microsecond))
		if t.Failed() || faultJob {
			return
		}
		if err := pe.Barrier(); err != nil {
			t.Fatalf("barrier after %s: %v", name, err)
		}
	}
}

// faultJob: the job loses a PE on purpose; Close may report it.
var faultJob bool

var clusterChecks = []struct {
	name string
	fn   func(*testing.T, *PE)
}{
	{"placement", checkPlacement},
	{"rma", checkClusterRMA},
	{"atomics", checkClusterAtomics},
	{"mixed", checkMixedAtomics},
	{"wait", checkClusterWait},
	{"busy", checkBusyTarget},
	{"barrier", checkClusterBarrier},
	{"alloc", checkClusterAlloc},
	{"diverge", checkClusterDiverge},
	{"collectives", checkClusterCollectives},
	{"locks", checkClusterLocks},
	{"anymsg", checkClusterAnyMessages},
	{"messages", checkClusterMessages},
	{"nodemsg", checkClusterNodeMessages},
	{"msgmatrix", checkClusterMessageMatrix},
	{"msgprogress", checkClusterMsgProgress},
	{"stat", checkClusterStat},
	{"teams", checkClusterTeams},
	{"kill", func(t *testing.T, pe *PE) { checkFault(t, pe, syscall.SIGKILL) }},
	{"stop", func(t *testing.T, pe *PE) { checkFault(t, pe, syscall.SIGSTOP) }},
	{"exit", checkGlobalExit},
	{"othercall", checkClusterOtherCall},
	{"noerrmode", func(t *testing.T, pe *PE) {
		if pe.set.peerErrors {
			t.Errorf("%s=%q, but the endpoints have UCX's peer error handling", config.EnvUCXPeerErrors, os.Getenv(config.EnvUCXPeerErrors))
		}
	}},
}

// checkFault: PE 3 (host 1) sends itself sig while the others wait in
// barriers; every other PE, on both hosts, must report ErrPeerLost naming
// PE 3 and print how long it took.
func checkFault(t *testing.T, pe *PE, sig syscall.Signal) {
	faultJob = true
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if pe.Rank() == 3 {
		time.Sleep(200 * time.Millisecond)
		syscall.Kill(os.Getpid(), sig)
		time.Sleep(time.Minute)
		return
	}
	var err error
	for err == nil && time.Since(start) < time.Minute {
		err = pe.Barrier()
	}
	fmt.Printf("FAULT-REPORTED pe=%d after=%v: %v\n", pe.Rank(), time.Since(start).Round(time.Millisecond), err)
	if !errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), "PE 3") {
		t.Errorf("PE %d: %v, want ErrPeerLost naming PE 3", pe.Rank(), err)
	}
}

func TestClusterFaults(t *testing.T) { overTransports(t, testClusterFaults) }

func testClusterFaults(t *testing.T, tr string) {
	// Each PE prints how long it took to report the loss (the log has
	// it); a loss never reported is a job that does not end before its
	// timeout, which fails.
	for _, c := range []struct{ name string }{{"kill"}, {"stop"}} {
		t.Run(c.name, func(t *testing.T) {
			reported := regexp.MustCompile(`FAULT-REPORTED pe=(\d) after=(\S+): (.*)`)
			r := clusterJobWith(t, tr, cluster.Job{Hosts: 2, PerHost: 2, Timeout: 180 * time.Second,
				Env:     []string{"SYMHEAP_PEER_TIMEOUT=3s"},
				MPIArgs: []string{"--enable-recovery"},
				Until: func(out []byte) bool {
					return len(reported.FindAll(out, -1)) == 3 && bytes.Count(out, []byte("--- ")) >= 3
				}}, c.name)
			ms := reported.FindAllSubmatch(r.Output, -1)
			if len(ms) != 3 {
				t.Fatalf("%d of 3 PEs reported the lost PE", len(ms))
			}
			for _, m := range ms {
				if !strings.Contains(string(m[3]), "PE 3") {
					t.Errorf("PE %s: %s", m[1], m[3])
				}
			}
		})
	}
}

// checkClusterOtherCall: the PEs of node 0 call Malloc while those of
// node 1 call Barrier. Every PE must return ErrDiverged naming its call
// (node 0's leader and node 1's find the other node's call across the
// network; the others hear it from their leader), and then a Free and
// Close must return at once, with the divergence, instead of waiting.
func checkClusterOtherCall(t *testing.T, pe *PE) {
	faultJob = true
	buf, err := Malloc[int64](pe, 8)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var want string
	if pe.Node(pe.Rank()) == 0 {
		want = "Malloc"
		_, err = Malloc[byte](pe, 64)
	} else {
		want = "Barrier (call #"
		err = pe.Barrier()
	}
	fmt.Printf("DIVERGED-REPORTED pe=%d after=%v: %v\n", pe.Rank(), time.Since(start).Round(time.Millisecond), err)
	if !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), want) {
		t.Errorf("PE %d: %v, want ErrDiverged naming %s...)", pe.Rank(), err, want)
	}
	if ferr := Free(pe, buf); !errors.Is(ferr, ErrDiverged) {
		t.Errorf("PE %d: Free after the divergence: %v, want ErrDiverged", pe.Rank(), ferr)
	}
	if cerr := pe.Close(); !errors.Is(cerr, ErrDiverged) {
		t.Errorf("PE %d: Close after the divergence: %v, want ErrDiverged", pe.Rank(), cerr)
	}
}

// TestClusterOtherCall: PEs on two nodes in different collective calls
// fail on every PE with ErrDiverged, across the network too; the job ends
// (the bound is the job's timeout, so a hang fails the test) and leaves
// no segment.
func TestClusterOtherCall(t *testing.T) { overTransports(t, testClusterOtherCall) }

func testClusterOtherCall(t *testing.T, tr string) {
	reported := regexp.MustCompile(`DIVERGED-REPORTED pe=(\d) after=(\S+): (.*)`)
	r := clusterJobWith(t, tr, cluster.Job{Hosts: 2, PerHost: 2, Timeout: 180 * time.Second,
		Env: []string{"SYMHEAP_PEER_TIMEOUT=3s"}}, "othercall")
	ms := reported.FindAllSubmatch(r.Output, -1)
	if len(ms) != 4 {
		t.Fatalf("%d of 4 PEs reported the divergence (%v)", len(ms), r.Err)
	}
	for _, m := range ms {
		if !strings.Contains(string(m[3]), "different collective calls") {
			t.Errorf("PE %s: %s", m[1], m[3])
		}
	}
}

// checkPlacement: PEs 0,1 on node 0 and 2,3 on node 1 (mpirun maps by
// slot); Ptr reaches this node's PEs only; every PE is accessible.
func checkPlacement(t *testing.T, pe *PE) {
	if pe.Size() != 4 || pe.Nodes() != 2 {
		t.Fatalf("size %d, nodes %d; want 4 PEs on 2 nodes", pe.Size(), pe.Nodes())
	}
	me := pe.Rank()
	want := []int{me &^ 1, me | 1}
	if got := pe.NodePEs(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("NodePEs %v, want %v", got, want)
	}
	x, err := Malloc[int64](pe, 8)
	if err != nil {
		t.Fatal(err)
	}
	for p := range pe.Size() {
		if pe.Node(p) != p/2 {
			t.Errorf("Node(%d) = %d, want %d", p, pe.Node(p), p/2)
		}
		if !pe.Accessible(p) {
			t.Errorf("Accessible(%d) false", p)
		}
		if got := Ptr(pe, x, p); (got != nil) != (p/2 == me/2) {
			t.Errorf("Ptr to PE %d: %v, want nil exactly for PEs on the other node", p, got != nil)
		}
	}
	if err := Free(pe, x); err != nil {
		t.Fatal(err)
	}
}

func checkClusterRMA(t *testing.T, pe *PE) {
	n, me := pe.Size(), pe.Rank()
	const big = 4 << 20
	buf, err := Malloc[byte](pe, big)
	if err != nil {
		t.Fatal(err)
	}
	words, err := Calloc[int64](pe, 64)
	if err != nil {
		t.Fatal(err)
	}
	// Blocking puts of every size class into the next PE, gets back.
	next := (me + 1) % n
	for _, size := range []int{0, 1, 8, 100, 4096, 65536, big} {
		src := make([]byte, size)
		for i := range src {
			src[i] = byte(i*7 + me + size)
		}
		if err := Put(pe, buf, src, next); err != nil {
			t.Fatalf("Put %d B to PE %d: %v", size, next, err)
		}
		pe.Quiet()
		got := make([]byte, size)
		if err := Get(pe, got, buf[:size], next); err != nil {
			t.Fatalf("Get %d B from PE %d: %v", size, next, err)
		}
		if string(got) != string(src) {
			t.Fatalf("%d B put to PE %d and read back differ", size, next)
		}
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	// NBI puts of one word to every PE, then Quiet and barrier: each PE
	// finds every other's word.
	for p := range n {
		v := []int64{int64(me*100 + p)}
		if err := PutNBI(pe, words[me:me+1], v, p); err != nil {
			t.Fatal(err)
		}
	}
	pe.Quiet()
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	for p := range n {
		if words[p] != int64(p*100+me) {
			t.Errorf("word from PE %d: %d, want %d", p, words[p], p*100+me)
		}
	}
	// Strided: every other element.
	src := []int64{1, 2, 3, 4, 5, 6, 7, 8}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	if err := IPut(pe, words[16:], src, 2, 1, 8, next); err != nil {
		t.Fatal(err)
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if words[16+2*i] != int64(i+1) {
			t.Errorf("IPut: element %d = %d", 16+2*i, words[16+2*i])
		}
	}
	got := make([]int64, 8)
	if err := IGet(pe, got, words[16:], 1, 2, 8, next); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(src) {
		t.Errorf("IGet: %v", got)
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	Free(pe, words)
	Free(pe, buf)
}

func checkClusterAtomics(t *testing.T, pe *PE) {
	n, me := pe.Size(), pe.Rank()
	x, err := Calloc[int64](pe, 4)
	if err != nil {
		t.Fatal(err)
	}
	y, err := Calloc[uint32](pe, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	next := (me + 1) % n
	// Each PE works on its next PE's x[0] and y[0], alone.
	AtomicSet(pe, &x[0], 5, next)
	if v, _ := AtomicFetch(pe, &x[0], next); v != 5 {
		t.Errorf("fetch after set: %d", v)
	}
	if v, _ := AtomicSwap(pe, &x[0], 9, next); v != 5 {
		t.Errorf("swap returned %d", v)
	}
	if v, _ := AtomicCompareSwap(pe, &x[0], 8, 1, next); v != 9 {
		t.Errorf("failing cswap returned %d", v)
	}
	if v, _ := AtomicCompareSwap(pe, &x[0], 9, 12, next); v != 9 {
		t.Errorf("cswap returned %d", v)
	}
	if v, _ := AtomicFetchAdd(pe, &x[0], 3, next); v != 12 {
		t.Errorf("fetch-add returned %d", v)
	}
	AtomicAdd(pe, &x[0], 1, next)
	if v, _ := AtomicFetchAnd(pe, &x[0], 0xc, next); v != 16 {
		t.Errorf("fetch-and returned %d", v)
	}
	if v, _ := AtomicFetchOr(pe, &x[0], 3, next); v != 0 {
		t.Errorf("fetch-or returned %d", v)
	}
	AtomicXor(pe, &x[0], 1, next)
	AtomicOr(pe, &x[0], 0x10, next)
	AtomicAnd(pe, &x[0], 0x1e, next)
	pe.Quiet()
	if v, _ := AtomicFetch(pe, &x[0], next); v != 0x12 {
		t.Errorf("after xor/or/and: %#x, want 0x12", v)
	}
	AtomicSet(pe, &y[0], 0xfffffffe, next)
	if v, _ := AtomicFetchAdd(pe, &y[0], 3, next); v != 0xfffffffe {
		t.Errorf("32-bit fetch-add returned %#x", v)
	}
	if v, _ := AtomicFetch(pe, &y[0], next); v != 1 {
		t.Errorf("32-bit wrap: %#x", v)
	}
	if v, _ := AtomicCompareSwap(pe, &y[0], 1, 0xdeadbeef, next); v != 1 {
		t.Errorf("32-bit cswap returned %#x", v)
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	if y[0] != 0xdeadbeef || y[1] != 0 {
		t.Errorf("32-bit word %#x, next %#x", y[0], y[1])
	}
	Free(pe, y)
	Free(pe, x)
}

// checkMixedAtomics: every PE adds to PE 0's counter and increments it by
// compare-and-swap, under contention: PE 1 with CPU atomics (same node),
// PEs 2 and 3 through UCX. Nothing may be lost.
func checkMixedAtomics(t *testing.T, pe *PE) {
	const adds, cas = 3000, 300
	c, err := Calloc[int64](pe, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	for i := range adds {
		if i%2 == 0 {
			AtomicAdd(pe, &c[0], 1, 0)
		} else if _, err := AtomicFetchAdd(pe, &c[0], 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	for range cas {
		for {
			old, err := AtomicFetch(pe, &c[1], 0)
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := AtomicCompareSwap(pe, &c[1], old, old+1, 0); v == old {
				break
			}
		}
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	if pe.Rank() == 0 {
		if c[0] != int64(adds*pe.Size()) || c[1] != int64(cas*pe.Size()) {
			t.Errorf("counter %d (want %d), cas counter %d (want %d)", c[0], adds*pe.Size(), c[1], cas*pe.Size())
		}
	}
	Free(pe, c)
}

// checkClusterWait: a token goes round the ring 20 times, each hop a put
// of the next value that the receiver waits for with WaitUntil.
func checkClusterWait(t *testing.T, pe *PE) {
	n, me := pe.Size(), pe.Rank()
	tok, err := Calloc[int64](pe, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	for lap := range int64(20) {
		v := lap*int64(n) + int64(me) + 1
		if me != 0 || lap > 0 {
			if err := WaitUntil(pe, &tok[0], CmpGE, v-1); err != nil {
				t.Fatal(err)
			}
		}
		if err := Put(pe, tok, []int64{v}, (me+1)%n); err != nil {
			t.Fatal(err)
		}
		pe.Quiet()
	}
	if me == 0 {
		if err := WaitUntil(pe, &tok[0], CmpEQ, 20*int64(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	Free(pe, tok)
}

// checkBusyTarget: PE 0 computes without calling symheap while PE 2
// (other node) gets, puts and adds to PE 0's memory, then sets a flag in
// it; PE 0 computes until it sees the flag. Only the progress goroutine,
// woken by the transport, can have served the operations.
func checkBusyTarget(t *testing.T, pe *PE) {
	x, err := Calloc[int64](pe, 2) // [0]: the operations' word; [1]: PE 2's "done", on PE 0
	if err != nil {
		t.Fatal(err)
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	switch pe.Rank() {
	case 0:
		// Busy in its own code, no symheap call, until PE 2 says its
		// operations on this PE are done: only the progress goroutine can
		// have served them. (A PE that never learns it is a hang the
		// job's timeout catches; the bound here is a guard only.)
		guard := time.Now().Add(time.Minute)
		spins := 0
		for core.Load(&x[1]) == 0 && time.Now().Before(guard) { // an atomic load of its own memory
			spins++
		}
		if core.Load(&x[1]) == 0 {
			t.Errorf("PE 2's 300 operations on this PE did not complete while it was busy (%d spins)", spins)
		}
	case 2:
		start := time.Now()
		for i := range 100 {
			if _, err := AtomicFetchAdd(pe, &x[0], 1, 0); err != nil {
				t.Fatal(err)
			}
			if err := Put(pe, x[:1], []int64{int64(i)}, 0); err != nil {
				t.Fatal(err)
			}
			got := []int64{0}
			if err := Get(pe, got, x[:1], 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := AtomicSet(pe, &x[1], 1, 0); err != nil {
			t.Fatal(err)
		}
		t.Logf("300 operations on a busy PE: %v", time.Since(start))
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	Free(pe, x)
}

// checkClusterBarrier: 200 barriers, each after a put to the next PE of
// the round number: after the barrier, every PE holds its round.
func checkClusterBarrier(t *testing.T, pe *PE) {
	n, me := pe.Size(), pe.Rank()
	r, err := Calloc[int64](pe, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	for i := range int64(200) {
		if err := PutNBI(pe, r, []int64{i}, (me+1)%n); err != nil {
			t.Fatal(err)
		}
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
		if got, _ := AtomicFetch(pe, &r[0], me); got != i {
			t.Fatalf("round %d: holds %d", i, got)
		}
		if err := pe.World().Sync(); err != nil {
			t.Fatal(err)
		}
	}
	Free(pe, r)
}

// checkClusterAlloc: collective allocations across nodes give one offset
// everywhere, Realloc keeps contents, Free then Malloc reuses.
func checkClusterAlloc(t *testing.T, pe *PE) {
	var held [][]int64
	for i := range 30 {
		s, err := Malloc[int64](pe, 1+i*37)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
		if i%3 == 2 {
			if err := Free(pe, held[i-1]); err != nil {
				t.Fatal(err)
			}
			held[i-1] = nil
		}
	}
	s := held[0]
	s[0] = 77
	s, err := Realloc(pe, s, 5000)
	if err != nil || s[0] != 77 {
		t.Fatalf("Realloc: %v, first %d", err, s[0])
	}
	held[0] = s
	// The same offset everywhere: a put to the next PE lands in its copy.
	if err := Put(pe, s[1:2], []int64{int64(pe.Rank())}, (pe.Rank()+1)%pe.Size()); err != nil {
		t.Fatal(err)
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	if want := int64((pe.Rank() + pe.Size() - 1) % pe.Size()); s[1] != want {
		t.Errorf("after Realloc, a put landed elsewhere: %d, want %d", s[1], want)
	}
	for _, h := range held {
		if h != nil {
			if err := Free(pe, h); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// checkClusterDiverge: PE 3 asks for a different size: ErrDiverged on
// every PE, naming PE 3, and the heaps stay usable.
func checkClusterDiverge(t *testing.T, pe *PE) {
	n := 100
	if pe.Rank() == 3 {
		n = 200
	}
	_, err := Malloc[int64](pe, n)
	if !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), "PE 3") && pe.Rank() != 3 {
		t.Fatalf("diverged Malloc: %v", err)
	}
	s, err := Malloc[int64](pe, 10)
	if err != nil {
		t.Fatal(err)
	}
	Free(pe, s)
}

// checkClusterCollectives: the world team's collectives across nodes.
func checkClusterCollectives(t *testing.T, pe *PE) {
	n, me := pe.Size(), pe.Rank()
	w := pe.World()
	src, err := Malloc[int64](pe, 3*n)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := Malloc[int64](pe, 3*n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range src {
		src[i] = int64(me*1000 + i)
	}
	for root := range n {
		if err := Broadcast(w, dst[:3], src[:3], root); err != nil {
			t.Fatal(err)
		}
		if dst[0] != int64(root*1000) || dst[2] != int64(root*1000+2) {
			t.Errorf("Broadcast from %d: %v", root, dst[:3])
		}
	}
	if err := FCollect(w, dst, src[:3]); err != nil {
		t.Fatal(err)
	}
	for j := range n {
		if dst[3*j] != int64(j*1000) || dst[3*j+2] != int64(j*1000+2) {
			t.Errorf("FCollect block %d: %v", j, dst[3*j:3*j+3])
		}
	}
	if err := AllToAll(w, dst, src); err != nil {
		t.Fatal(err)
	}
	for j := range n {
		if dst[3*j] != int64(j*1000+3*me) {
			t.Errorf("AllToAll block %d: %v", j, dst[3*j:3*j+3])
		}
	}
	if err := Reduce(w, dst[:3], src[:3], OpSum); err != nil {
		t.Fatal(err)
	}
	if want := int64(1000 * n * (n - 1) / 2); dst[0] != want {
		t.Errorf("Reduce sum: %d, want %d", dst[0], want)
	}
	copy(dst, src)
	if err := Reduce(w, dst[:3], dst[:3], OpMax); err != nil || dst[1] != int64((n-1)*1000+1) {
		t.Errorf("Reduce max in place: %v %v", dst[:3], err)
	}
	// Floating-point sums depend on the order of the additions: every PE
	// gets the rank-order fold, bit for bit (one node's result reaches
	// its other PE through the node step).
	fsrc, _ := Malloc[float64](pe, 1)
	fdst, _ := Malloc[float64](pe, 1)
	vals := []float64{1e16, 1.5, -1e16, 2.25}
	fsrc[0] = vals[me%len(vals)]
	if err := Reduce(w, fdst, fsrc, OpSum); err != nil {
		t.Fatal(err)
	}
	want := vals[0]
	for p := 1; p < n; p++ {
		want += vals[p%len(vals)]
	}
	if fdst[0] != want {
		t.Errorf("PE %d: float Reduce %v, want the rank-order fold %v", me, fdst[0], want)
	}
	if err := Free(pe, fdst); err != nil {
		t.Fatal(err)
	}
	if err := Free(pe, fsrc); err != nil {
		t.Fatal(err)
	}
	f, _ := Malloc[float64](pe, 1)
	if err := Reduce(w, f, f, OpXor); !errors.Is(err, ErrBadOp) {
		t.Errorf("xor on floats: %v", err)
	}
	Free(pe, f)
	Free(pe, dst)
	Free(pe, src)
}

// checkClusterLocks: every PE increments PE 0's counter 50 times under
// the lock, with a get and a put (not an atomic): none may be lost.
func checkClusterLocks(t *testing.T, pe *PE) {
	l, err := Calloc[int64](pe, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if err := pe.SetLock(&l[0]); err != nil {
			t.Fatal(err)
		}
		v := []int64{0}
		if err := Get(pe, v, l[1:2], 0); err != nil {
			t.Fatal(err)
		}
		v[0]++
		if err := Put(pe, l[1:2], v, 0); err != nil {
			t.Fatal(err)
		}
		if err := pe.ClearLock(&l[0]); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := pe.TestLock(&l[0]); err != nil {
		t.Fatal(err)
	} else if ok {
		if err := pe.ClearLock(&l[0]); err != nil {
			t.Fatal(err)
		}
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	if pe.Rank() == 0 && (l[1] != int64(50*pe.Size()) || l[0] != 0) {
		t.Errorf("counter %d, want %d; lock word %#x, want 0", l[1], 50*pe.Size(), l[0])
	}
	Free(pe, l)
}

// checkClusterAnyMessages: non-blocking sends and receives across and
// within nodes, AnySource and AnyTag, a receive posted before the
// message, Test, and the order of receives posted for one sender.
func checkClusterAnyMessages(t *testing.T, pe *PE) {
	me, n := pe.Rank(), pe.Size()
	// Everyone sends a small and a large message to everyone else, with
	// Isend, and receives them with Irecv from AnySource, posted first.
	big := 256 << 10
	var recvs []*Request
	bufs := make([][]byte, 2*(n-1))
	for i := range bufs {
		bufs[i] = make([]byte, big)
		r, err := pe.Irecv(bufs[i], AnySource, AnyTag)
		if err != nil {
			t.Fatal(err)
		}
		recvs = append(recvs, r)
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	var sends []*Request
	payload := map[int][]byte{}
	for p := range n {
		if p == me {
			continue
		}
		small := []byte(fmt.Sprintf("from %d to %d", me, p))
		large := make([]byte, big)
		for i := range large {
			large[i] = byte(i + me*7 + p)
		}
		payload[p] = large
		for _, b := range [][]byte{small, large} {
			r, err := pe.Isend(b, p, 10+len(b)%2)
			if err != nil {
				t.Fatal(err)
			}
			sends = append(sends, r)
		}
	}
	// WaitAll, over requests of both paths (messages of this node and of
	// the other): every status, the slice cleared.
	got := map[int]int{}
	sts := make([]Status, len(recvs))
	if err := WaitAll(recvs, sts); err != nil {
		t.Fatal(err)
	}
	for i, st := range sts {
		if recvs[i] != nil {
			t.Fatalf("WaitAll left receive %d in the slice", i)
		}
		got[st.Source]++
		if st.Count == big {
			for j := range big {
				if bufs[i][j] != byte(j+st.Source*7+me) {
					t.Fatalf("large message from PE %d: byte %d differs", st.Source, j)
				}
			}
		} else if want := fmt.Sprintf("from %d to %d", st.Source, me); string(bufs[i][:st.Count]) != want {
			t.Errorf("small message from PE %d: %q", st.Source, bufs[i][:st.Count])
		}
	}
	for p := range n {
		if p != me && got[p] != 2 {
			t.Errorf("%d messages from PE %d, want 2", got[p], p)
		}
	}
	for i, r := range sends {
		for {
			done, _, err := r.Test()
			if err != nil {
				t.Fatal(err)
			}
			if done {
				break
			}
		}
		// Release, of requests of both paths: once, then refused.
		if err := r.Release(); err != nil {
			t.Fatalf("Release of send %d: %v", i, err)
		}
		if err := r.Release(); !errors.Is(err, ErrBadArg) || !strings.Contains(err.Error(), "released before") {
			t.Fatalf("second Release of send %d: %v, want ErrBadArg (released before)", i, err)
		}
	}
	// Every PE has all its messages before the next phase's messages,
	// which its AnySource receives would match too.
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	// Order: three messages from one sender with one tag, received by
	// three receives posted in order.
	peer := me ^ 2
	if me < peer {
		for i := range 3 {
			if err := pe.Send([]byte{byte(i)}, peer, 5); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		var rs []*Request
		bs := make([][]byte, 3)
		for i := range 3 {
			bs[i] = make([]byte, 1)
			r, err := pe.Irecv(bs[i], peer, 5)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
		for i := 2; i >= 0; i-- { // waited in reverse: the match is by posting order
			if _, err := rs[i].Wait(); err != nil {
				t.Fatal(err)
			}
		}
		if bs[0][0] != 0 || bs[1][0] != 1 || bs[2][0] != 2 {
			t.Errorf("receives posted in order got %v %v %v", bs[0], bs[1], bs[2])
		}
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	// The program has dropped every request: their entries in the PE's
	// table (held weakly) go too, once a collection has run their
	// cleanups.
	clear(recvs)
	clear(sends)
	for gcs := 1; ; gcs++ {
		runtime.GC()
		left := pe.far.Requests()
		if left == 0 {
			break
		}
		if gcs == 500 {
			t.Errorf("PE %d: %d message requests still in its table after %d collections since the program dropped them", me, left, gcs)
			break
		}
		time.Sleep(10 * time.Millisecond) // the cleanups run on a goroutine of their own
	}
}

// checkClusterMessages: PE p sends to PE p^2 (the other node) messages of
// 0 B to 4 MiB, in order with one tag; the receiver checks every byte;
// then AnyTag and a given tag, each with a short buffer first
// (ErrTruncated, the message stays).
func checkClusterMessages(t *testing.T, pe *PE) {
	me := pe.Rank()
	peer := me ^ 2
	exchangeSizes(t, pe, peer, 7)
	if me < peer {
		for _, tag := range []int{99, 98} {
			if err := pe.Send([]byte("0123456789"), peer, tag); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for _, c := range []struct{ ask, want int }{{AnyTag, 99}, {98, 98}} {
		short := make([]byte, 4)
		st, err := pe.Recv(short, peer, c.ask)
		if !errors.Is(err, ErrTruncated) || st.Count != 10 || st.Tag != c.want {
			t.Fatalf("short Recv with tag %d: %+v %v, want ErrTruncated, 10 B, tag %d", c.ask, st, err, c.want)
		}
		long := make([]byte, 16)
		if st, err := pe.Recv(long, peer, c.ask); err != nil || string(long[:st.Count]) != "0123456789" || st.Tag != c.want {
			t.Fatalf("Recv with tag %d after ErrTruncated: %+v %v %q", c.ask, st, err, long)
		}
	}
}

// exchangeSizes: pe and peer send each other a message of every size from
// 0 B to 4 MiB with tag, the lower rank first (a large message waits for
// its receiver), and check what arrives. It returns how many each sent.
func exchangeSizes(t *testing.T, pe *PE, peer, tag int) int {
	me := pe.Rank()
	sizes := []int{0, 1, 8, 100, 4096, 8192, 65536, 1 << 20, 4 << 20}
	fill := func(b []byte, s, from int) {
		for i := range b {
			b[i] = byte(i*31 + s + 3*from)
		}
	}
	send := func() {
		for _, s := range sizes {
			b := make([]byte, s)
			fill(b, s, me)
			if err := pe.Send(b, peer, tag); err != nil {
				t.Fatalf("Send of %d B to PE %d: %v", s, peer, err)
			}
		}
	}
	recv := func() {
		for _, s := range sizes {
			b := make([]byte, 4<<20)
			st, err := pe.Recv(b, peer, tag)
			if err != nil {
				t.Fatalf("Recv of %d B from PE %d: %v", s, peer, err)
			}
			want := make([]byte, s)
			fill(want, s, peer)
			if st.Count != s || st.Source != peer || st.Tag != tag || string(b[:s]) != string(want) {
				t.Fatalf("Recv from PE %d: status %+v, want %d B with tag %d, data equal: %v", peer, st, s, tag, string(b[:s]) == string(want))
			}
		}
	}
	if me < peer {
		send()
		recv()
	} else {
		recv()
		send()
	}
	return len(sizes)
}

// checkClusterNodeMessages: messages between the two PEs of a node
// (me^1) take the node's shared-memory queues, as on one node: sizes 0 B
// to 4 MiB arrive whole and in order, and the PE's message counters
// (which only internal/msg moves) count them. Then the order of matching
// when a receive from AnySource is pending: it still gets the first
// message that both it and a later receive from the node's other PE
// match; and a receive from the other PE posted before one from
// AnySource gets the first.
func checkClusterNodeMessages(t *testing.T, pe *PE) {
	me := pe.Rank()
	peer := me ^ 1
	before := pe.stats.MsgEager.Load() + pe.stats.MsgSingleCopy.Load() + pe.stats.MsgKernel.Load() + pe.stats.MsgBounce.Load()
	n := exchangeSizes(t, pe, peer, 21)
	if after := pe.stats.MsgEager.Load() + pe.stats.MsgSingleCopy.Load() + pe.stats.MsgKernel.Load() + pe.stats.MsgBounce.Load(); after-before < uint64(n) {
		t.Errorf("PE %d: the node's queues carried %d messages to PE %d, want %d (they went through UCX?)", me, after-before, peer, n)
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}

	// A pending receive from AnySource, then one from the node's other
	// PE: messages "A" then "B" from it go to them in that order. Then a
	// receive from the other PE before one from AnySource.
	matchOrder(t, pe, 0, [2]bool{false, true}, 22, [2]string{"A", "B"})
	matchOrder(t, pe, 1, [2]bool{true, false}, 24, [2]string{"C", "D"})
}

// matchOrder: the PE of the node's pair whose rank has parity recv posts
// two receives with tag, the first and second from the pair's other PE
// (fromPeer) or from AnySource; the other PE then sends m[0] and m[1]:
// the first receive must get m[0], the second m[1].
func matchOrder(t *testing.T, pe *PE, recv int, fromPeer [2]bool, tag int, m [2]string) {
	me, peer := pe.Rank(), pe.Rank()^1
	if me%2 == recv {
		var bufs [2][]byte
		var reqs [2]*Request
		for i := range reqs {
			src := AnySource
			if fromPeer[i] {
				src = peer
			}
			bufs[i] = make([]byte, 8)
			r, err := pe.Irecv(bufs[i], src, tag)
			if err != nil {
				t.Fatal(err)
			}
			reqs[i] = r
		}
		if err := pe.Send([]byte("go"), peer, tag+1); err != nil {
			t.Fatal(err)
		}
		for i, r := range reqs {
			st, err := r.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if string(bufs[i][:st.Count]) != m[i] || st.Source != peer {
				t.Errorf("PE %d: receive %d of tag %d (from the other PE: %v) got %q from PE %d, want %q from PE %d", me, i, tag, fromPeer[i], bufs[i][:st.Count], st.Source, m[i], peer)
			}
		}
	} else {
		if _, err := pe.Recv(make([]byte, 8), peer, tag+1); err != nil {
			t.Fatal(err)
		}
		for _, x := range m {
			if err := pe.Send([]byte(x), peer, tag); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
}

// checkClusterStat: what symheap stat reads of a node's segment (package
// inspect, as the command uses it): the job spans two nodes, this is the
// PE's node, its PEs are attached with their figures, the other node's
// are named as such.
func checkClusterStat(t *testing.T, pe *PE) {
	if pe.Rank()%2 == 0 { // one PE per node looks
		v, err := inspect.Open(pe.seg.Path())
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		ji := v.Info()
		if ji.Nodes != 2 || ji.Node != pe.Node(pe.Rank()) || len(ji.PEs) != pe.Size() {
			t.Errorf("PE %d: inspect sees %d nodes, this one %d, %d PEs; want 2, %d, %d", pe.Rank(), ji.Nodes, ji.Node, len(ji.PEs), pe.Node(pe.Rank()), pe.Size())
		}
		for _, p := range ji.PEs {
			n := pe.Node(p.Rank)
			switch {
			case p.Node != n:
				t.Errorf("PE %d: inspect puts PE %d on node %d, want %d", pe.Rank(), p.Rank, p.Node, n)
			case n != ji.Node && p.State != fmt.Sprintf("on node %d", n):
				t.Errorf("PE %d: PE %d of node %d is %q", pe.Rank(), p.Rank, n, p.State)
			case n == ji.Node && (p.State != "attached" || p.Pid == 0 || p.Heap.Size == 0):
				t.Errorf("PE %d: PE %d of this node: %q, pid %d, heap %d B", pe.Rank(), p.Rank, p.State, p.Pid, p.Heap.Size)
			}
		}
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
}

// checkGlobalExit: PE 3 calls GlobalExit(7) while the others wait in
// barriers (PEs 0 and 1 on the other node): every PE exits with 7.
func checkGlobalExit(t *testing.T, pe *PE) {
	faultJob = true
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	if pe.Rank() == 3 {
		time.Sleep(100 * time.Millisecond)
		pe.GlobalExit(7)
	}
	for start := time.Now(); time.Since(start) < 30*time.Second; {
		if err := pe.Barrier(); err != nil {
			t.Errorf("PE %d: %v", pe.Rank(), err)
			return
		}
	}
	t.Errorf("PE %d did not exit", pe.Rank())
}

func TestClusterGlobalExit(t *testing.T) { overTransports(t, testClusterGlobalExit) }

func testClusterGlobalExit(t *testing.T, tr string) {
	exited := regexp.MustCompile(`PE-EXIT rank=(\d) status=(\d+)`)
	r := clusterJobWith(t, tr, cluster.Job{Hosts: 2, PerHost: 2, Timeout: 180 * time.Second,
		MPIArgs: []string{"--enable-recovery"},
		// Each PE's exit status, as a shell sees it.
		Argv:  []string{"/bin/sh", "-c", `"$@"; echo "PE-EXIT rank=$OMPI_COMM_WORLD_RANK status=$?"`, "sh"},
		Until: func(out []byte) bool { return len(exited.FindAll(out, -1)) == 4 },
	}, "exit")
	ms := exited.FindAllSubmatch(r.Output, -1)
	if len(ms) != 4 {
		t.Fatalf("%d of 4 PEs exited", len(ms))
	}
	for _, m := range ms {
		if string(m[2]) != "7" {
			t.Errorf("PE %s exited with %s, want 7", m[1], m[2])
		}
	}
}

// checkClusterTeams: teams made by Split that span nodes ({0, 2}, and
// {3, 1} in reverse), one within a node ({0, 1}), a nested team of one;
// their ranks, Sync, collectives, Destroy.
func checkClusterTeams(t *testing.T, pe *PE) {
	me := pe.Rank()
	w := pe.World()
	src, err := Malloc[int64](pe, 4)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := Malloc[int64](pe, 4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range src {
		src[i] = int64(100*me + i)
	}
	even, err := w.Split(0, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	odd, err := w.Split(3, -2, 2)
	if err != nil {
		t.Fatal(err)
	}
	node0, err := w.Split(0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	mine, other := even, odd
	if me%2 == 1 {
		mine, other = odd, even
	}
	if other != nil || mine == nil {
		t.Fatalf("PE %d: even %v, odd %v", me, even != nil, odd != nil)
	}
	if (node0 != nil) != (me < 2) {
		t.Fatalf("PE %d: node-0 team %v", me, node0 != nil)
	}
	wantRank := map[int]int{0: 0, 2: 1, 3: 0, 1: 1}[me]
	if mine.Size() != 2 || mine.Rank() != wantRank || mine.WorldRank(wantRank) != me || mine.TeamRank(me) != wantRank || mine.TeamRank(me^1) != -1 {
		t.Errorf("PE %d: team size %d rank %d (want %d), WorldRank %d, TeamRank %d", me, mine.Size(), mine.Rank(), wantRank, mine.WorldRank(wantRank), mine.TeamRank(me))
	}
	for range 50 {
		if err := mine.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	mate := mine.WorldRank(1 - mine.Rank())
	if err := Broadcast(mine, dst[:2], src[:2], 1); err != nil {
		t.Fatal(err)
	}
	if root := mine.WorldRank(1); dst[0] != int64(100*root) || dst[1] != int64(100*root+1) {
		t.Errorf("team Broadcast: %v", dst[:2])
	}
	if err := Reduce(mine, dst[:2], src[:2], OpSum); err != nil {
		t.Fatal(err)
	}
	if dst[0] != int64(100*(me+mate)) {
		t.Errorf("team Reduce: %v, want %d", dst[:2], 100*(me+mate))
	}
	if err := FCollect(mine, dst, src[:2]); err != nil {
		t.Fatal(err)
	}
	if dst[0] != int64(100*mine.WorldRank(0)) || dst[2] != int64(100*mine.WorldRank(1)) {
		t.Errorf("team FCollect: %v", dst)
	}
	if err := AllToAll(mine, dst, src); err != nil {
		t.Fatal(err)
	}
	r := mine.Rank()
	if dst[0] != int64(100*mine.WorldRank(0)+2*r) || dst[2] != int64(100*mine.WorldRank(1)+2*r) {
		t.Errorf("team AllToAll: %v", dst)
	}
	one, err := mine.Split(1, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if (one != nil) != (mine.Rank() == 1) || (one != nil && (one.Size() != 1 || one.WorldRank(0) != me)) {
		t.Errorf("PE %d: nested team of one: %v", me, one != nil)
	}
	if one != nil {
		if err := one.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := one.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	// A team's Sync is a barrier: a count every member adds to before
	// it, on a PE of the team, reads full after it. Within node 0 (its
	// members meet in shared memory only), and for all four PEs in
	// reverse order (two per node: the node's members, then the nodes'
	// leaders).
	count, err := Calloc[int64](pe, 1)
	if err != nil {
		t.Fatal(err)
	}
	syncs := func(name string, tm *Team, owner int) {
		for i := range 100 {
			if _, err := AtomicFetchAdd(pe, &count[0], 1, owner); err != nil {
				t.Fatal(err)
			}
			if err := tm.Sync(); err != nil {
				t.Fatalf("%s Sync %d: %v", name, i, err)
			}
			if v, err := AtomicFetch(pe, &count[0], owner); err != nil || v < int64(tm.Size()*(i+1)) {
				t.Fatalf("%s Sync %d: PE %d passed with %d arrivals, want %d (%v)", name, i, me, v, tm.Size()*(i+1), err)
			}
			if err := tm.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if node0 != nil {
		syncs("node-0 team", node0, 1)
		if err := node0.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	count[0] = 0
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	rev, err := w.Split(3, -1, 4)
	if err != nil {
		t.Fatal(err)
	}
	if rev.Rank() != 3-me {
		t.Errorf("PE %d: rank %d in the reversed team", me, rev.Rank())
	}
	syncs("reversed team", rev, 2)
	if err := rev.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := Free(pe, count); err != nil {
		t.Fatal(err)
	}
	if err := mine.Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Split(0, 1, 5); !errors.Is(err, ErrBadArg) {
		t.Errorf("Split larger than the world: %v, want ErrBadArg", err)
	}
	Free(pe, dst)
	Free(pe, src)
}
