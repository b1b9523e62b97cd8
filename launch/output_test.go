package launch

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestLineWriter(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	lw := &lineWriter{mu: &mu, w: &out, prefix: []byte("[pe 3] ")}
	for _, s := range []string{"ab", "c\nde", "f\n\ng\nh", "", "i"} {
		lw.Write([]byte(s))
	}
	if got, want := out.String(), "[pe 3] abc\n[pe 3] def\n[pe 3] \n[pe 3] g\n"; got != want {
		t.Fatalf("before flush: %q, want %q", got, want)
	}
	lw.flush()
	if got, want := out.String(), "[pe 3] abc\n[pe 3] def\n[pe 3] \n[pe 3] g\n[pe 3] hi\n"; got != want {
		t.Fatalf("after flush: %q, want %q", got, want)
	}

	// A line held back longer than maxLine is cut, each piece tagged.
	out.Reset()
	long := strings.Repeat("y", 2*maxLine+10)
	lw.Write([]byte(long[:maxLine-1]))
	lw.Write([]byte(long[maxLine-1:]))
	lw.Write([]byte("\n"))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 || len(lines[0]) != len("[pe 3] ")+maxLine || lines[2] != "[pe 3] "+strings.Repeat("y", 10) {
		t.Fatalf("long line cut into %d pieces of lengths %v", len(lines), lengths(lines))
	}

	// Untagged output passes through unchanged, the last partial line too.
	out.Reset()
	lw = &lineWriter{mu: &mu, w: &out}
	lw.Write([]byte("x\ny"))
	lw.flush()
	if out.String() != "x\ny" {
		t.Fatalf("untagged: %q", out.String())
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	f.n++
	return 0, bytes.ErrTooLarge
}

// TestLineWriterError: once the destination fails, output is dropped but
// the PE's writes still succeed.
func TestLineWriterError(t *testing.T) {
	var mu sync.Mutex
	fw := &failWriter{}
	lw := &lineWriter{mu: &mu, w: fw}
	for range 3 {
		if n, err := lw.Write([]byte("line\n")); n != 5 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if fw.n != 1 {
		t.Fatalf("destination written %d times after failing, want 1", fw.n)
	}
}

func lengths(ss []string) []int {
	var n []int
	for _, s := range ss {
		n = append(n, len(s))
	}
	return n
}

func TestPEEnv(t *testing.T) {
	o := &Options{N: 2, Heap: "1g", Env: []string{"A=2", "SHMEM_SYMMETRIC_SIZE=5m"}}
	inherited := []string{"A=1", "PMI_RANK=3", "PMIX_NAMESPACE=x", "OMPI_COMM_WORLD_SIZE=4", "SLURM_PROCID=1",
		"SLURM_NTASKS=4", "SLURM_JOB_ID=9", "SYMHEAP_PE=7", "SYMHEAP_JOB=old", "SYMHEAP_NPES=8", "B=x=y", "PMI=keep"}
	got := peEnv(baseEnv(inherited, o, "job1"), 1)
	want := []string{"A=2", "SLURM_JOB_ID=9", "B=x=y", "PMI=keep", "SHMEM_SYMMETRIC_SIZE=1g",
		"SYMHEAP_JOB=job1", "SYMHEAP_NPES=2", "SYMHEAP_LAUNCHER=" + strconv.Itoa(os.Getpid()), "SYMHEAP_PE=1"}
	if !slices.Equal(got, want) {
		t.Fatalf("peEnv:\n got %q\nwant %q", got, want)
	}
}
