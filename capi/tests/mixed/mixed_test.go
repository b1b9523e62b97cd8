// Package mixed runs jobs of Go and C PEs: the conformance pair
// (examples/mixed and capi/tests/m_mixed.c) under shrun and under Open
// MPI's mpirun, the C library's refusals of what a Go PE cannot take part
// in, and a PE whose formats differ from the job's.
//
// It uses the tools and library of `make build` (the module's .bin, or
// SYMHEAP_BIN): without them it skips, saying so, unless
// SYMHEAP_REQUIRE_MIXED is set (make test-c sets it), when it fails.
package mixed

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/cabi"
	"github.com/symheap/symheap/internal/cabi/cabitest"
)

// peEnv makes the test binary a PE whose formats are not the job's
// (TestFormatsDisagree): it registers one more constant before Init.
const peEnv = "SYMHEAP_MIXED_TEST_PE"

func TestMain(m *testing.M) {
	if os.Getenv(peEnv) != "" {
		cabi.RegisterConst("MIXED_TEST_EXTRA", 1, "a format only this PE has")
		pe, err := symheap.Init(symheap.Config{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		pe.Close()
		os.Exit(0)
	}
	code := m.Run()
	if built != nil {
		os.RemoveAll(filepath.Dir(built.goProg))
	}
	os.Exit(code)
}

// progs are the built halves and the tools.
type progs struct {
	shrun, goProg, cProg string
}

var built *progs

func build(t *testing.T) *progs {
	t.Helper()
	if built != nil {
		return built
	}
	root := cabitest.Root(t)
	bin := os.Getenv("SYMHEAP_BIN")
	if bin == "" {
		bin = filepath.Join(root, ".bin")
	}
	for _, f := range []string{"shrun", "symcc", "libsymheap.so"} {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			msg := fmt.Sprintf("%s is missing: run make build (or set SYMHEAP_BIN to its directory)", filepath.Join(bin, f))
			if os.Getenv("SYMHEAP_REQUIRE_MIXED") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	dir, err := os.MkdirTemp("", "symheap-mixed-")
	if err != nil {
		t.Fatal(err)
	}
	p := &progs{shrun: filepath.Join(bin, "shrun"), goProg: filepath.Join(dir, "mixed"), cProg: filepath.Join(dir, "m_mixed")}
	run := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run("go", "build", "-o", p.goProg, "./examples/mixed")
	run(filepath.Join(bin, "symcc"), "-std=gnu11", "-O2", "-Wall", "-Werror", "-o", p.cProg, "capi/tests/m_mixed.c")
	built = p
	return p
}

// job runs a command with the heap sizes of the C tests and returns its
// exit status and output.
func job(t *testing.T, name string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "SHMEM_SYMMETRIC_SIZE=32m", "SYMHEAP_SHARED_SIZE=4m")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("%s: %v", name, err)
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// passed checks that every PE of a job of goPEs and cPEs said it passed,
// and that the first C PE read the first Go PE's shared block.
func passed(t *testing.T, status int, out string, goPEs, cPEs int) {
	t.Helper()
	if status != 0 {
		t.Fatalf("status %d:\n%s", status, out)
	}
	tail := fmt.Sprintf("mixed conformance passed (%d PEs: %d Go, %d C)", goPEs+cPEs, goPEs, cPEs)
	if g, c := strings.Count(out, "(go): "+tail), strings.Count(out, "(c): "+tail); g != goPEs || c != cPEs {
		t.Errorf("%d Go and %d C PEs passed, want %d and %d:\n%s", g, c, goPEs, cPEs, out)
	}
	if !strings.Contains(out, "read the Go PE's shared block") {
		t.Errorf("no C PE read the Go PE's shared block:\n%s", out)
	}
}

// TestShrun: 2 Go + 2 C PEs, the other way round, and 3 + 3, under shrun.
func TestShrun(t *testing.T) {
	p := build(t)
	status, out := job(t, p.shrun, "--timeout", "100s", "-n", "2", p.goProg, ":", "-n", "2", p.cProg)
	passed(t, status, out, 2, 2)
	status, out = job(t, p.shrun, "--timeout", "100s", "-n", "1", p.cProg, ":", "-n", "2", p.goProg, ":", "-n", "1", p.cProg)
	passed(t, status, out, 2, 2)
	// More than 4 PEs: the C collectives run the Go runtime's trees.
	status, out = job(t, p.shrun, "--timeout", "100s", "-n", "3", p.goProg, ":", "-n", "3", p.cProg)
	passed(t, status, out, 3, 3)
}

// TestMpirun: 2 Go + 2 C PEs under Open MPI's mpirun (make test installs
// it with the peers).
func TestMpirun(t *testing.T) {
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("Open MPI's mpirun is not installed (make peers or make cluster-deps installs it): the mixed job under mpirun is not run")
	}
	p := build(t)
	status, out := job(t, "timeout", "100", mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "2", p.goProg, ":", "-n", "2", p.cProg)
	passed(t, status, out, 2, 2)
}

// TestRefusals: what a Go PE cannot take part in ends the job with one
// message saying why: a put into a Go PE's copy of a C static variable,
// and shmem_collect (which the runtime has not) over a team with Go PEs.
func TestRefusals(t *testing.T) {
	p := build(t)
	for _, c := range []struct{ mode, want string }{
		{"static", "runs a Go program: static data are symmetric among the job's C PEs only"},
		{"collect", "runs a Go program, which has no such collective"},
	} {
		status, out := job(t, p.shrun, "--timeout", "100s", "-n", "2", p.goProg, c.mode, ":", "-n", "2", p.cProg, c.mode)
		if status != 1 || !strings.Contains(out, c.want) || strings.Contains(out, "took the bad call") {
			t.Errorf("%s: status %d; want 1 and %q:\n%s", c.mode, status, c.want, out)
		}
	}
}

// TestFormatsDisagree: a PE whose shared formats differ from the job's
// (here a Go PE with one more registered constant, as a program built
// from another version of symheap would have) is refused at Init with
// both digests, whichever PE created the segment.
func TestFormatsDisagree(t *testing.T) {
	p := build(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, order := range [][]string{
		{"-n", "1", p.cProg, ":", "-n", "1", self},
		{"-n", "1", self, ":", "-n", "1", p.cProg},
	} {
		args := append([]string{"--timeout", "100s", "-x", peEnv + "=1"}, order...)
		status, out := job(t, p.shrun, args...)
		if status == 0 || !strings.Contains(out, "formats shared by Go and C: the job's digest is") {
			t.Errorf("shrun %q: status %d; want a refusal naming the formats' digests:\n%s", args, status, out)
		}
	}
}

// TestSharedMalloc: a Go PE and a C PE whose malloc is the shared malloc
// (capi/smalloc.c) read and free each other's blocks, small and large,
// in both orders of ranks (smallocpe and capi/tests/m_smalloc.c).
func TestSharedMalloc(t *testing.T) {
	p := build(t)
	dir := filepath.Dir(p.goProg)
	goProg, cProg := filepath.Join(dir, "smallocpe"), filepath.Join(dir, "m_smalloc")
	root := cabitest.Root(t)
	for _, c := range [][]string{
		{"go", "build", "-o", goProg, "./capi/tests/mixed/smallocpe"},
		{filepath.Join(filepath.Dir(p.shrun), "symcc"), "-std=gnu11", "-O2", "-Wall", "-Werror", "-o", cProg, "capi/tests/m_smalloc.c"},
	} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	t.Setenv("SYMHEAP_SHARED_MALLOC", "1")
	for _, order := range [][]string{{goProg, cProg}, {cProg, goProg}} {
		status, out := job(t, p.shrun, "--timeout", "100s", "-n", "1", order[0], ":", "-n", "1", order[1])
		if status != 0 || !strings.Contains(out, "(go): read and freed the C PE's malloc blocks") ||
			!strings.Contains(out, "(c): read and freed the Go PE's SharedAlloc blocks; reused the block it freed") {
			t.Errorf("%s first: status %d:\n%s", filepath.Base(order[0]), status, out)
		}
	}
}
