package symheap

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/unix"
)

// The launcher tests run the test binary as their helper processes
// (TestLauncherHelper), in the part launcherRole names:
//
//	middle  a launcher as mpirun's daemon is one: it starts LAUNCHER_TEST_N
//	        PEs with Open MPI's variables and no parent-death signal, prints
//	        their pids, and sleeps until killed
//	pe      joins the job (Init), sends what the runtime writes to os.Stderr
//	        to LAUNCHER_TEST_DIR/pe-<rank>.err, prints "ready <job> <pid>",
//	        and sleeps until killed
const launcherRole = "SYMHEAP_LAUNCHER_TEST"

func TestLauncherHelper(t *testing.T) {
	switch os.Getenv(launcherRole) {
	case "":
		t.Skip("a helper process of the launcher tests")
	case "middle":
		os.Exit(launcherMiddle())
	case "pe":
		os.Exit(launcherPE())
	}
}

func launcherMiddle() int {
	n, _ := strconv.Atoi(os.Getenv("LAUNCHER_TEST_N"))
	job := os.Getenv("LAUNCHER_TEST_JOB")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SYMHEAP_JOB=") && !strings.HasPrefix(kv, "SYMHEAP_PE=") &&
			!strings.HasPrefix(kv, "SYMHEAP_NPES=") && !strings.HasPrefix(kv, "SYMHEAP_LAUNCHER=") {
			env = append(env, kv)
		}
	}
	var pids []string
	for r := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLauncherHelper$")
		cmd.Env = append(env, launcherRole+"=pe", "OMPI_MCA_ess_base_jobid="+job,
			fmt.Sprintf("OMPI_COMM_WORLD_RANK=%d", r), fmt.Sprintf("OMPI_COMM_WORLD_SIZE=%d", n),
			fmt.Sprintf("OMPI_COMM_WORLD_LOCAL_RANK=%d", r), fmt.Sprintf("OMPI_COMM_WORLD_LOCAL_SIZE=%d", n))
		// Each PE's stderr goes to a file of its own, set here rather
		// than by the PE after Init (whose launcher watch may write to
		// os.Stderr at any time).
		errFile, err := os.Create(filepath.Join(os.Getenv("LAUNCHER_TEST_DIR"), fmt.Sprintf("pe-%d.err", r)))
		if err != nil {
			fmt.Println("middle:", err)
			return 1
		}
		cmd.Stdout, cmd.Stderr = os.Stdout, errFile
		err = cmd.Start()
		errFile.Close()
		if err != nil {
			fmt.Println("middle:", err)
			return 1
		}
		pids = append(pids, strconv.Itoa(cmd.Process.Pid))
	}
	fmt.Println("pids", strings.Join(pids, " "))
	for {
		time.Sleep(time.Hour)
	}
}

func launcherPE() int {
	pe, err := Init(Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pe:", err)
		return 1
	}
	fmt.Printf("ready %s %d\n", pe.Job(), os.Getpid())
	for {
		time.Sleep(time.Hour)
	}
}

// TestLauncherDeath: the PEs of a launcher that does not use package
// launch (here one like Open MPI's daemon: their parent, no parent-death
// signal) leave the job and exit when it dies, saying so; the last one
// out removes the segment. So do they when the launcher ends the job with
// SIGTERM, as mpirun does when a PE failed or its --timeout ran out. The
// bound on the wait is generous; the time it took is logged.
func TestLauncherDeath(t *testing.T) {
	t.Run("launcher-killed", func(t *testing.T) { testLauncherEnd(t, false) })
	t.Run("SIGTERM", func(t *testing.T) { testLauncherEnd(t, true) })
}

func testLauncherEnd(t *testing.T, term bool) {
	t.Parallel()
	const n = 2
	dir := t.TempDir()
	ompiJob := fmt.Sprintf("launchertest-%d-%d", os.Getpid(), time.Now().UnixNano())
	job := "ompi-" + ompiJob
	t.Cleanup(func() { os.Remove(segment.Path(unix.Getuid(), job)) })
	middle := exec.Command(os.Args[0], "-test.run=^TestLauncherHelper$")
	middle.Env = append(os.Environ(), launcherRole+"=middle", "LAUNCHER_TEST_N="+strconv.Itoa(n),
		"LAUNCHER_TEST_JOB="+ompiJob, "LAUNCHER_TEST_DIR="+dir)
	middle.Stderr = os.Stderr
	out, err := middle.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := middle.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	t.Cleanup(func() {
		middle.Process.Kill()
		middle.Wait()
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	sc := bufio.NewScanner(out)
	ready := 0
	for (pids == nil || ready < n) && sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == n+1 && f[0] == "pids":
			for _, s := range f[1:] {
				pid, _ := strconv.Atoi(s)
				pids = append(pids, pid)
			}
		case len(f) == 3 && f[0] == "ready" && f[1] == job:
			ready++
		}
	}
	if pids == nil || ready < n {
		t.Fatalf("%d PEs ready: %v", ready, sc.Err())
	}
	if _, err := os.Stat(segment.Path(unix.Getuid(), job)); err != nil {
		t.Fatalf("the job's segment is missing while its PEs run: %v", err)
	}
	if term {
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		if err := middle.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		middle.Wait()
	}
	start := time.Now()
	const bound = 20 * time.Second
	for {
		_, statErr := os.Stat(segment.Path(unix.Getuid(), job))
		var running []int
		for _, pid := range pids {
			if st, err := unix.ProcessState(pid); err == nil && st != 'Z' {
				running = append(running, pid)
			}
		}
		if os.IsNotExist(statErr) && len(running) == 0 {
			break
		}
		if time.Since(start) > bound {
			t.Fatalf("%v after their launcher was killed: PEs %v of %v still run, segment stat: %v", bound, running, pids, statErr)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("segment and PEs gone %v after the signal", time.Since(start).Round(time.Millisecond))
	for r := range n {
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("pe-%d.err", r)))
		want := fmt.Sprintf("PE %d of job %q: its launcher (pid %d) is gone: left the job, exiting with status %d", r, job, middle.Process.Pid, launcherGoneStatus)
		if term {
			want = fmt.Sprintf("PE %d of job %q: its launcher (pid %d) ended the job (SIGTERM): left the job, exiting with status %d", r, job, middle.Process.Pid, 128+int(syscall.SIGTERM))
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("PE %d wrote %q, want it to say %q", r, b, want)
		}
	}
}

// TestLauncherWatchLifetime: Init watches the launcher of a job that a
// launcher describes, and Close stops the watch; a lone PE (whose parent
// may be a shell that goes away under nohup) is not watched, nor a PE
// whose job variables were set by hand.
func TestLauncherWatchLifetime(t *testing.T) {
	if os.Getenv("SYMHEAP_JOB") != "" || os.Getenv("SYMHEAP_LAUNCHER") != "" {
		t.Skip("the test process is itself a PE")
	}
	state := func() (parent int, pe *PE) {
		watch.mu.Lock()
		defer watch.mu.Unlock()
		return watch.parent, watch.pe
	}
	id := fmt.Sprintf("watchtest-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, env := range []map[string]string{nil, {"SYMHEAP_JOB": id, "SYMHEAP_PE": "0", "SYMHEAP_NPES": "1"}} {
		for k, v := range env {
			t.Setenv(k, v)
		}
		pe, err := Init(Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if parent, w := state(); parent != 0 || w != nil {
			t.Errorf("%v: watched (parent %d, PE %p)", env, parent, w)
		}
		pe.Close()
		for k := range env {
			os.Unsetenv(k)
		}
	}

	// Open MPI's variables: the parent is its daemon.
	t.Setenv("OMPI_COMM_WORLD_RANK", "0")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "1")
	t.Setenv("OMPI_MCA_ess_base_jobid", id)
	pe, err := Init(Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if parent, w := state(); parent != os.Getppid() || w != pe {
		t.Errorf("a launched PE: watch of %d for %p, want of %d for %p", parent, w, os.Getppid(), pe)
	}
	done := watch.done
	if err := pe.Close(); err != nil {
		t.Fatal(err)
	}
	if parent, w := state(); parent != 0 || w != nil {
		t.Errorf("after Close: watch of %d for %p, want none", parent, w)
	}
	select {
	case <-done:
	default:
		t.Error("the watch goroutine runs on after Close")
	}
}

// TestInitSweepsDeadJobs: Init removes the segment a dead job of this user
// left on the node (its PE killed, as mpirun's SIGKILL does; made
// segment.SweepAge ago), and never one of a live job.
func TestInitSweepsDeadJobs(t *testing.T) {
	if os.Getenv("SYMHEAP_JOB") != "" || os.Getenv("SYMHEAP_LAUNCHER") != "" {
		t.Skip("the test process is itself a PE")
	}
	dir := t.TempDir()
	start := func(job string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestLauncherHelper$")
		cmd.Env = append(os.Environ(), launcherRole+"=pe", "LAUNCHER_TEST_DIR="+dir,
			"SYMHEAP_JOB="+job, "SYMHEAP_PE=0", "SYMHEAP_NPES=1")
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			os.Remove(segment.Path(unix.Getuid(), job))
		})
		if line, err := bufio.NewReader(out).ReadString('\n'); !strings.HasPrefix(line, "ready "+job) {
			t.Fatalf("PE of job %s: %q, %v", job, line, err)
		}
		return cmd
	}
	base := fmt.Sprintf("sweeptest-%d-%d", os.Getpid(), time.Now().UnixNano())
	deadJob, liveJob := base+"-dead", base+"-live"
	dead := start(deadJob)
	start(liveJob)
	dead.Process.Kill()
	dead.Wait()
	// Made long enough ago for a job's start to sweep it.
	long := time.Now().Add(-2 * segment.SweepAge)
	if err := os.Chtimes(segment.Path(unix.Getuid(), deadJob), long, long); err != nil {
		// Any job's start on this machine may sweep: one was quicker.
		t.Skipf("another process's Init removed the killed PE's segment first: %v", err)
	}
	pe, err := Init(Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	pe.Close()
	if _, err := os.Stat(segment.Path(unix.Getuid(), deadJob)); !os.IsNotExist(err) {
		t.Errorf("Init left the dead job's segment: %v", err)
	}
	if _, err := os.Stat(segment.Path(unix.Getuid(), liveJob)); err != nil {
		t.Errorf("Init removed a live job's segment: %v", err)
	}
}
