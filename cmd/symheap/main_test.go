package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/inspect"
	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/unix"
)

var bin string // directory holding symheap and holdjob, built once

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "symheap-cmd-test")
	if err != nil {
		panic(err)
	}
	for pkg, name := range map[string]string{".": "symheap", "./testdata/holdjob": "holdjob", "../shrun": "shrun"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	bin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func symheapCmd(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(bin, "symheap"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("symheap %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestInfo(t *testing.T) {
	out := symheapCmd(t, "info")
	for _, want := range []string{"tlsf", "SHMEM_SYMMETRIC_SIZE", "same-address mapping: yes", "/dev/shm:", "memlock limit:", "memory monitor:", "FREE", "C library hooks:"} {
		if !strings.Contains(out, want) {
			t.Errorf("info lacks %q:\n%s", want, out)
		}
	}
	var rep inspect.Report
	if err := json.Unmarshal([]byte(symheapCmd(t, "info", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	chosen := 0
	for _, c := range rep.Components {
		if c.Chosen {
			chosen++
		}
	}
	if len(rep.Components) == 0 || chosen != 1 || rep.ShmTotal == 0 {
		t.Errorf("info --json: %+v", rep)
	}
	// A parameter from the environment is reported with its source.
	cmd := exec.Command(filepath.Join(bin, "symheap"), "info")
	cmd.Env = append(os.Environ(), "SHMEM_SYMMETRIC_SIZE=512m")
	o, _ := cmd.CombinedOutput()
	if !strings.Contains(string(o), "512m") || !strings.Contains(string(o), "environment") {
		t.Errorf("info does not show the environment's value:\n%s", o)
	}
}

// startJob starts n holdjob PEs by hand, as a launcher that does not stop
// the others when one dies would, and waits until each says ready.
func startJob(t *testing.T, n int) (job string, procs []*exec.Cmd) {
	t.Helper()
	job = fmt.Sprintf("cmdtest-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
		os.Remove(segment.Path(unix.Getuid(), job))
	})
	ready := make(chan string, n)
	for r := 0; r < n; r++ {
		cmd := exec.Command(filepath.Join(bin, "holdjob"))
		cmd.Env = append(os.Environ(), "SYMHEAP_JOB="+job, fmt.Sprintf("SYMHEAP_PE=%d", r), fmt.Sprintf("SYMHEAP_NPES=%d", n),
			"SHMEM_SYMMETRIC_SIZE=4m", "SYMHEAP_SHARED_SIZE=1m")
		pr, pw, _ := os.Pipe()
		cmd.Stdin = pr
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_ = pw // kept open: the PE sleeps until killed
		t.Cleanup(func() { pw.Close(); pr.Close() })
		procs = append(procs, cmd)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				ready <- sc.Text()
			}
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case <-ready:
		case <-time.After(20 * time.Second):
			t.Fatal("PEs did not get ready")
		}
	}
	return job, procs
}

func TestStatCleanOnLiveAndKilledJob(t *testing.T) {
	job, procs := startJob(t, 3)
	list := symheapCmd(t, "stat")
	if !strings.Contains(list, job) {
		t.Fatalf("stat does not list the live job %s:\n%s", job, list)
	}
	out := symheapCmd(t, "stat", job)
	if !strings.Contains(out, "attached") || !strings.Contains(out, "tlsf") {
		t.Errorf("stat %s:\n%s", job, out)
	}
	var ji inspect.JobInfo
	if err := json.Unmarshal([]byte(symheapCmd(t, "stat", "--json", job)), &ji); err != nil {
		t.Fatal(err)
	}
	if ji.NPEs != 3 || len(ji.PEs) != 3 {
		t.Fatalf("stat --json: %+v", ji)
	}
	for _, p := range ji.PEs {
		if !p.Alive || p.Heap.InUse == 0 || p.SymAllocs != 8 || p.SymFrees != 1 || p.Heap.Size == 0 {
			t.Errorf("PE %d: %+v", p.Rank, p)
		}
	}
	// Heap map.
	mapFile := filepath.Join(t.TempDir(), "heap.png")
	symheapCmd(t, "stat", "--map", mapFile, job)
	f, err := os.Open(mapFile)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil || img.Bounds().Dx() < 100 {
		t.Fatalf("heap map: %v", err)
	}
	// As an SVG, with a label per PE and heap; another extension refused.
	svgFile := filepath.Join(t.TempDir(), "heap.svg")
	symheapCmd(t, "stat", "--map", svgFile, job)
	svg, err := os.ReadFile(svgFile)
	if err != nil || !strings.Contains(string(svg), "<svg") || !strings.Contains(string(svg), "PE 2 shared") {
		t.Errorf("heap map as SVG: %v, %d bytes, no label \"PE 2 shared\"", err, len(svg))
	}
	if out, err := exec.Command(filepath.Join(bin, "symheap"), "stat", "--map", filepath.Join(t.TempDir(), "heap.gif"), job).CombinedOutput(); err == nil || !strings.Contains(string(out), ".png or .svg") {
		t.Errorf("stat --map heap.gif: %v\n%s", err, out)
	}
	// clean never touches a live job.
	symheapCmd(t, "clean")
	if _, err := os.Stat(segment.Path(unix.Getuid(), job)); err != nil {
		t.Fatalf("clean removed a live job: %v", err)
	}
	// Kill PE 1: stat shows it dead, the others alive.
	procs[1].Process.Signal(syscall.SIGKILL)
	procs[1].Wait()
	if err := json.Unmarshal([]byte(symheapCmd(t, "stat", "--json", job)), &ji); err != nil {
		t.Fatal(err)
	}
	if ji.PEs[1].Alive || !strings.HasPrefix(ji.PEs[1].State, "dead") || !ji.PEs[0].Alive || !ji.PEs[2].Alive {
		t.Errorf("after kill -9 of PE 1: %+v", ji.PEs)
	}
	if out := symheapCmd(t, "stat", job); !strings.Contains(out, "dead") {
		t.Errorf("stat after the kill does not show a dead PE:\n%s", out)
	}
	// All gone: the segment is stale, and clean removes it.
	for _, p := range procs {
		p.Process.Signal(syscall.SIGKILL)
		p.Wait()
	}
	out = symheapCmd(t, "clean")
	if !strings.Contains(out, job) {
		t.Errorf("clean did not report the dead job:\n%s", out)
	}
	if _, err := os.Stat(segment.Path(unix.Getuid(), job)); !os.IsNotExist(err) {
		t.Errorf("segment of a dead job survived clean: %v", err)
	}
}

func TestCleanLeavesOtherUsers(t *testing.T) {
	if unix.Getuid() != 0 {
		t.Skip("needs root to make a file owned by another user")
	}
	path := segment.Path(65534, fmt.Sprintf("otheruser-%d", os.Getpid()))
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(path, 65534, 65534)
	defer os.Remove(path)
	symheapCmd(t, "clean")
	if _, err := os.Stat(path); err != nil {
		t.Errorf("clean removed another user's segment: %v", err)
	}
}

func TestUsage(t *testing.T) {
	err := exec.Command(filepath.Join(bin, "symheap"), "frobnicate").Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("unknown command: %v, want exit status 2", err)
	}
	if out, err := exec.Command(filepath.Join(bin, "symheap"), "stat", "no-such-job").CombinedOutput(); err == nil || !strings.Contains(string(out), "no-such-job") {
		t.Errorf("stat of a missing job: %v\n%s", err, out)
	}
}

// TestStatOnShrunJob: stat sees a job that shrun started, and after one of
// its PEs is killed, shrun ends the job and stat shows nothing left of it.
func TestStatOnShrunJob(t *testing.T) {
	cmd := exec.Command(filepath.Join(bin, "shrun"), "-n", "2", "--heap", "4m", filepath.Join(bin, "holdjob"))
	cmd.Env = append(os.Environ(), "SYMHEAP_SHARED_SIZE=1m", "HOLDJOB_FOREVER=1")
	pr, pw, _ := os.Pipe()
	defer pw.Close()
	cmd.Stdin = pr
	out, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	job := ""
	for i := 0; i < 2 && sc.Scan(); i++ {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "ready" {
			job = f[2]
		}
	}
	if job == "" {
		t.Fatal("shrun's PEs did not get ready")
	}
	var ji inspect.JobInfo
	if err := json.Unmarshal([]byte(symheapCmd(t, "stat", "--json", job)), &ji); err != nil {
		t.Fatal(err)
	}
	if ji.NPEs != 2 || !ji.PEs[0].Alive || !ji.PEs[1].Alive {
		t.Fatalf("stat of the shrun job: %+v", ji)
	}
	syscall.Kill(ji.PEs[1].Pid, syscall.SIGKILL)
	start := time.Now()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 137 {
		t.Errorf("shrun after kill -9 of a PE: %v, want status 137", err)
	}
	// Ended because of the kill: shrun names the killed PE and its
	// signal. A shrun that never ends the job meets the test's timeout;
	// the time is logged, not bounded.
	if want := fmt.Sprintf("PE 1 (pid %d) killed by signal 9", ji.PEs[1].Pid); !strings.Contains(stderr.String(), want) {
		t.Errorf("shrun's stderr does not say %q:\n%s", want, stderr.String())
	}
	t.Logf("shrun ended the job %v after the kill", time.Since(start))
	if list := symheapCmd(t, "stat"); strings.Contains(list, job) {
		t.Errorf("stat still lists the ended job:\n%s", list)
	}
	if _, err := os.Stat(segment.Path(unix.Getuid(), job)); !os.IsNotExist(err) {
		t.Errorf("segment left after shrun ended the job: %v", err)
	}
}

// TestInfoRefusedVariable: info leads with the error of a variable Init
// would refuse, still lists the variable in its table, and exits non-zero,
// with JSON too.
func TestInfoRefusedVariable(t *testing.T) {
	for _, kv := range []string{"SHMEM_SYMMETRIC_SIZE=12q", "SHMEM_SYMMETRIC_SIZE=0", "SYMHEAP_PEER_TIMEOUT=soon"} {
		name, value, _ := strings.Cut(kv, "=")
		for _, args := range [][]string{{"info"}, {"info", "--json"}} {
			cmd := exec.Command(filepath.Join(bin, "symheap"), args...)
			cmd.Env = append(os.Environ(), kv)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
				t.Errorf("%s symheap %v: %v, want a non-zero exit", kv, args, err)
			}
			if !strings.HasPrefix(stderr.String(), "symheap: "+name) {
				t.Errorf("%s symheap %v: stderr does not lead with the variable's error:\n%s", kv, args, stderr.String())
			}
			if len(args) == 1 {
				listed := false
				for _, l := range strings.Split(stdout.String(), "\n") {
					f := strings.Fields(l)
					listed = listed || len(f) >= 3 && f[0] == name && f[1] == value && strings.Contains(l, "refused")
				}
				if !listed {
					t.Errorf("%s symheap info: the table does not list the refused variable:\n%s", kv, stdout.String())
				}
				continue
			}
			var rep inspect.Report
			if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil || !strings.Contains(rep.ParamError, name) {
				t.Errorf("%s symheap info --json: %v, ParamError %q", kv, err, rep.ParamError)
			}
		}
	}
}
