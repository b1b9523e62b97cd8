// Package cluster runs a job on fake hosts on one machine, for the tests
// and demonstrations of symheap's multi-node build: Open MPI's mpirun
// starts the job on hosts named host0, host1, ... through an rsh agent
// (agent.sh) that runs each host's daemon here in an IPC namespace and a
// /dev/shm of its own, so that the hosts share nothing but the network.
// PMIx then reports one node per fake host, and UCX joins them over TCP.
//
// It needs mpirun (Open MPI 4 or newer), unshare and the right to mount a
// tmpfs in a new mount namespace (root, or a user namespace that allows
// it). Available says what is missing.
package cluster

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

//go:embed agent.sh
var agent []byte

// ErrUnavailable says this machine cannot run fake hosts; the message
// says why.
var ErrUnavailable = errors.New("cluster: fake hosts unavailable")

// Available reports whether fake-host jobs can run here.
func Available() error {
	for _, p := range []string{"mpirun", "unshare"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("%w: %s not found (install openmpi-bin and util-linux)", ErrUnavailable, p)
		}
	}
	if err := exec.Command("unshare", "--ipc", "--mount", "true").Run(); err != nil {
		return fmt.Errorf("%w: unshare --ipc --mount fails (%v): needs root or user namespaces", ErrUnavailable, err)
	}
	return nil
}

// Job is a job on fake hosts.
type Job struct {
	Hosts   int      // fake hosts
	PerHost int      // PEs on each
	Argv    []string // the program and its arguments
	Env     []string // NAME=value set in every PE (UCX_TLS=tcp,self is added unless given)
	Timeout time.Duration
	MPIArgs []string // extra mpirun arguments
	// Until, if set, ends the job (mpirun gets SIGTERM) as soon as it
	// holds for the output so far: for jobs that mpirun would not end by
	// itself (a PE lost under --enable-recovery).
	Until func(out []byte) bool
}

// Result is what a job printed, and how it ended.
type Result struct {
	Output    []byte // stdout and stderr of every PE, and mpirun's
	Err       error  // nil if every PE exited 0
	Leftovers []string
	Elapsed   time.Duration
}

var leftover = regexp.MustCompile(`fakehost (\S+): leftover (\S+)`)

// Run runs j and waits for it.
func Run(ctx context.Context, j Job) Result {
	dir, err := os.MkdirTemp("", "symheap-cluster-")
	if err != nil {
		return Result{Err: err}
	}
	defer os.RemoveAll(dir)
	ag := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(ag, agent, 0o755); err != nil {
		return Result{Err: err}
	}
	var hf strings.Builder
	for h := range j.Hosts {
		fmt.Fprintf(&hf, "host%d slots=%d\n", h, j.PerHost)
	}
	hostfile := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hostfile, []byte(hf.String()), 0o644); err != nil {
		return Result{Err: err}
	}
	args := []string{"--hostfile", hostfile, "--mca", "plm_rsh_agent", ag, "--bind-to", "none",
		"--map-by", "slot", "-np", fmt.Sprint(j.Hosts * j.PerHost), "--mca", "btl", "self,tcp",
		"--mca", "osc", "^ucx",
		// The daemons share the topology through a file mapped in an address
		// hole; under the agent's namespaces that crashes the second one.
		"--mca", "rtc", "^hwloc"}
	if !setsMCA(j.MPIArgs, "pml") {
		// MPI's messages over Open MPI's own TCP transport (its UCX PML
		// leaves TCP alone unless told: pml_ucx_tls), unless the caller
		// chooses the PML.
		args = append(args, "--mca", "pml", "ob1")
	}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	env := j.Env
	if !hasVar(env, "UCX_TLS") {
		env = append(env, "UCX_TLS=tcp,self")
	}
	for _, e := range env {
		args = append(args, "-x", e)
	}
	args = append(args, j.MPIArgs...)
	args = append(args, j.Argv...)
	if j.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, j.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, "mpirun", args...)
	cmd.Env = os.Environ()
	cmd.Env = append(cmd.Env, env...)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Result{Err: err}
	}
	done := make(chan struct{})
	if j.Until != nil {
		go func() {
			t := time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					if j.Until(out.Bytes()) {
						cmd.Process.Signal(syscall.SIGTERM)
						return
					}
				}
			}
		}()
	}
	err = cmd.Wait()
	close(done)
	r := Result{Output: out.Bytes(), Err: err, Elapsed: time.Since(start)}
	if ctx.Err() != nil {
		r.Err = fmt.Errorf("cluster: job timed out after %v: %w", j.Timeout, ctx.Err())
	}
	for _, m := range leftover.FindAllSubmatch(r.Output, -1) {
		r.Leftovers = append(r.Leftovers, string(m[1])+":"+string(m[2]))
	}
	return r
}

// syncBuffer is a bytes.Buffer that Until may read while mpirun writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}

func hasVar(env []string, name string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, name+"=") {
			return true
		}
	}
	return false
}

// setsMCA reports whether mpirun arguments args set MCA parameter name.
func setsMCA(args []string, name string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--mca" && args[i+1] == name {
			return true
		}
	}
	return false
}
