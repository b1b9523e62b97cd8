package tcp_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/tcp"
	"github.com/symheap/symheap/internal/transport"
)

// The tests of this file run PEs in child processes: the test binary
// re-executed (helper), which joins the parent's job, says "ready" and
// serves until its standard input closes (then leaves in order), or a
// signal ends it.

// helper runs this process as a child PE when SYMHEAP_TCP_HELPER is set;
// it reports false otherwise.
func helper() bool {
	if os.Getenv("SYMHEAP_TCP_HELPER") == "" {
		return false
	}
	rank, _ := strconv.Atoi(os.Getenv("SYMHEAP_TCP_HELPER_RANK"))
	size, _ := strconv.Atoi(os.Getenv("SYMHEAP_TCP_HELPER_SIZE"))
	b, err := tcp.Rendezvous(os.Getenv("SYMHEAP_TCP_HELPER_BOOT"), rank, size, os.Getenv("SYMHEAP_TCP_HELPER_JOB"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	n, err := tcp.Open(transport.Config{Boot: b, Regions: regions()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	n.Close()
	b.Close()
	os.Exit(0)
	return true
}

// child is a child PE.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr *lockedBuffer
	once   sync.Once
	err    error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startChild starts rank of a job of size PEs whose rendezvous is at
// addr. It is ended (and waited for) when the test ends, if not before.
func startChild(t *testing.T, addr string, rank, size int, job string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SYMHEAP_TCP_HELPER=1",
		"SYMHEAP_TCP_HELPER_RANK="+strconv.Itoa(rank), "SYMHEAP_TCP_HELPER_SIZE="+strconv.Itoa(size),
		"SYMHEAP_TCP_HELPER_JOB="+job, "SYMHEAP_TCP_HELPER_BOOT="+addr)
	c := &child{cmd: cmd, stderr: &lockedBuffer{}}
	cmd.Stderr = c.stderr
	var err error
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.out = bufio.NewReader(out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.stdin.Close()
		done := make(chan struct{})
		go func() {
			c.wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(guard):
			cmd.Process.Kill()
			<-done
		}
	})
	return c
}

func (c *child) wait() error {
	c.once.Do(func() { c.err = c.cmd.Wait() })
	return c.err
}

// ready waits for the child's "ready".
func (c *child) ready(t *testing.T) {
	t.Helper()
	line, err := c.out.ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("child PE: %q, %v\n%s", line, err, c.stderr)
	}
}

// signal sends sig to the child.
func (c *child) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// stop stops the child (SIGSTOP) and waits until every thread of it is
// stopped: the signal is delivered asynchronously, and a thread still
// running could answer one more request.
func (c *child) stop(t *testing.T) {
	t.Helper()
	c.signal(t, syscall.SIGSTOP)
	deadline := time.Now().Add(guard)
	for !c.stopped(t) {
		if time.Now().After(deadline) {
			t.Fatal("the child PE never stopped")
		}
		time.Sleep(time.Millisecond)
	}
}

// stopped reports whether every thread of the child is stopped
// (/proc/PID/task/TID/stat's state T).
func (c *child) stopped(t *testing.T) bool {
	dir := fmt.Sprintf("/proc/%d/task", c.cmd.Process.Pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("cannot see whether the child PE stopped: %v", err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/stat")
		if err != nil {
			return false
		}
		// The state follows the command's closing parenthesis.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

// kill kills the child and waits for it.
func (c *child) kill(t *testing.T) {
	t.Helper()
	c.signal(t, syscall.SIGKILL)
	c.wait()
}

// parentJob opens the PEs of ranks 0 to k-1 of a job of size PEs in this
// process, rank 0's rendezvous on l; the other ranks are children.
func parentJob(t *testing.T, l net.Listener, k, size int, job string, mod func(*transport.Config)) ([]transport.Net, []transport.Bootstrap) {
	t.Helper()
	bs := make([]transport.Bootstrap, k)
	nets := make([]transport.Net, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for r := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bs[r], errs[r] = join(l, r, size, job)
			if errs[r] != nil {
				return
			}
			c := transport.Config{Boot: bs[r], Regions: regions(), PeerErrors: true}
			if mod != nil {
				mod(&c)
			}
			nets[r], errs[r] = tcp.Open(c)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, n := range nets {
			if n != nil {
				n.Close()
			}
		}
		for _, b := range bs {
			if b != nil {
				b.Close()
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return nets, bs
}

func listen(t *testing.T) (net.Listener, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l, fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
}

// peerErr checks that err is a PeerError on peer wrapping ErrPeer (and
// cause, if not nil).
func peerErr(t *testing.T, what string, err error, peer int, cause error) {
	t.Helper()
	var pe *transport.PeerError
	if !errors.As(err, &pe) || pe.Peer != peer || !errors.Is(err, transport.ErrPeer) || (cause != nil && !errors.Is(err, cause)) {
		t.Fatalf("%s: %v; want a PeerError on peer %d wrapping ErrPeer and %v", what, err, peer, cause)
	}
}

// TestPeerKilled: a PE killed with SIGKILL is reported by Failed, Check,
// a blocked Recv from it, a Recv from it of a PE that never talked to it,
// and by every rendezvous bootstrap's Lost.
func TestPeerKilled(t *testing.T) {
	noLeaks(t)
	l, job := listen(t)
	ch := startChild(t, l.Addr().String(), 2, 3, job)
	nets, bs := parentJob(t, l, 2, 3, job, nil)
	ch.ready(t)
	if err := nets[1].Get(make([]byte, 8), 2, 0, 0); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, _, err := nets[1].Recv(make([]byte, 8), 99, ^uint64(0), 2, nil)
		got <- err
	}()
	ch.kill(t)
	select {
	case err := <-got:
		peerErr(t, "Recv from the killed PE", err, 2, nil)
	case <-time.After(guard):
		t.Fatal("Recv from a killed PE still waits")
	}
	p, err := nets[1].Failed()
	if p != 2 {
		t.Fatalf("Failed: %d, %v; want 2", p, err)
	}
	peerErr(t, "Failed", err, 2, nil)
	peerErr(t, "Check(2)", nets[1].Check(2), 2, nil)
	if err := nets[1].Check(0); err != nil {
		t.Fatalf("Check of a live PE: %v", err)
	}
	_, _, err = nets[0].Recv(nil, 99, ^uint64(0), 2, nil)
	peerErr(t, "Recv from the killed PE by a PE that never talked to it", err, 2, nil)
	for _, b := range bs {
		deadline := time.Now().Add(guard)
		for {
			if r, st, ok := b.Lost(); ok {
				if r != 2 || st == "" {
					t.Fatalf("rank %d's bootstrap: Lost %d (%s)", b.Rank(), r, st)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rank %d's bootstrap never reported the killed PE", b.Rank())
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// TestPeerLeaves: a PE that closes in order is not lost, but a wait on
// it ends.
func TestPeerLeaves(t *testing.T) {
	noLeaks(t)
	l, job := listen(t)
	ch := startChild(t, l.Addr().String(), 1, 2, job)
	nets, bs := parentJob(t, l, 1, 2, job, nil)
	ch.ready(t)
	if err := nets[0].Put(1, 0, 0, []byte("hello"), false); err != nil {
		t.Fatal(err)
	}
	if err := nets[0].Flush(); err != nil {
		t.Fatal(err)
	}
	ch.stdin.Close()
	if err := ch.wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, ch.stderr)
	}
	_, _, err := nets[0].Recv(nil, 1, ^uint64(0), 1, nil)
	peerErr(t, "Recv from a PE that left", err, 1, nil)
	if !strings.Contains(err.Error(), "closed") {
		t.Errorf("error %q does not say the peer closed", err)
	}
	if p, err := nets[0].Failed(); p >= 0 {
		t.Fatalf("Failed after an orderly close: %d, %v", p, err)
	}
	if err := nets[0].Check(1); err != nil {
		t.Fatalf("Check after an orderly close: %v", err)
	}
	if r, st, ok := bs[0].Lost(); ok {
		t.Fatalf("Lost after an orderly close: %d (%s)", r, st)
	}
}

// TestPeerStopped: operations on a PE stopped with SIGSTOP fail with
// ErrTimeout after Config.Timeout, before and after a connection exists,
// and the stopped PE is not taken for lost.
func TestPeerStopped(t *testing.T) {
	noLeaks(t)
	l, job := listen(t)
	ch := startChild(t, l.Addr().String(), 1, 2, job)
	nets, _ := parentJob(t, l, 1, 2, job, func(c *transport.Config) { c.Timeout = 500 * time.Millisecond })
	ch.ready(t)
	defer ch.kill(t) // before the Nets close: a stopped peer holds up their goodbyes
	n := nets[0]
	buf := make([]byte, 8)
	ch.stop(t)
	peerErr(t, "Get before any connection", n.Get(buf, 1, 0, 0), 1, transport.ErrTimeout)
	ch.signal(t, syscall.SIGCONT)
	deadline := time.Now().Add(guard)
	for err := n.Get(buf, 1, 0, 0); err != nil; err = n.Get(buf, 1, 0, 0) {
		if !errors.Is(err, transport.ErrTimeout) || time.Now().After(deadline) {
			t.Fatalf("Get from a continued PE: %v", err)
		}
	}
	ch.stop(t)
	peerErr(t, "Get", n.Get(buf, 1, 0, 0), 1, transport.ErrTimeout)
	_, err := n.Atomic(transport.AMOFetchAdd, 1, 0, 0, 8, 1, 0)
	peerErr(t, "fetch-add", err, 1, transport.ErrTimeout)
	if err := n.Put(1, 0, 0, buf, true); err != nil {
		t.Fatalf("nbi Put: %v", err)
	}
	peerErr(t, "Flush", n.Flush(), 1, transport.ErrTimeout)
	if p, err := n.Failed(); p >= 0 {
		t.Fatalf("a stopped PE is taken for lost: %d, %v", p, err)
	}
}
