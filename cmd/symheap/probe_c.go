package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/symheap/symheap/launch"
)

// probeCHooks runs the C library's memory-monitor self-test as a C
// program's shmem_init does: it builds a one-line OpenSHMEM program with
// the symcc beside this executable and runs it as a job of one PE with
// SYMHEAP_CDEBUG=1, whose "C hooks:" line says which releases the hooks
// deliver (FREE, CHUNK, MUNMAP, REMOVE) and why any is missing.
func probeCHooks() string {
	exe, err := os.Executable()
	if err != nil {
		return "not probed: " + err.Error()
	}
	symcc := filepath.Join(filepath.Dir(exe), "symcc")
	if _, err := os.Stat(symcc); err != nil {
		return "not probed: no symcc beside " + exe + " (make build makes it)"
	}
	dir, err := os.MkdirTemp("", "symheap-cprobe")
	if err != nil {
		return "not probed: " + err.Error()
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "probe.c")
	prog := filepath.Join(dir, "probe")
	if err := os.WriteFile(src, []byte("#include <shmem.h>\nint main(void) { shmem_init(); shmem_finalize(); return 0; }\n"), 0o644); err != nil {
		return "not probed: " + err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, symcc, "-o", prog, src).CombinedOutput(); err != nil {
		return fmt.Sprintf("not probed: symcc failed (%v): %s", err, strings.TrimSpace(string(out)))
	}
	var out bytes.Buffer
	res, err := launch.Run(ctx, launch.Options{
		N: 1, Heap: "2m", Timeout: 20 * time.Second, Stdout: &out, Stderr: &out,
		Env: []string{"SYMHEAP_SHARED_SIZE=1m", "SYMHEAP_CDEBUG=1"},
	}, prog)
	if err != nil || res.Status != 0 {
		return fmt.Sprintf("probe failed (%v): %s", err, strings.TrimSpace(out.String()))
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if _, after, ok := strings.Cut(l, "C hooks: "); ok {
			return strings.ReplaceAll(after, ";", "\n")
		}
	}
	return "no report from the probe (the memory monitor is off: SYMHEAP_MEMHOOK_DISABLE)"
}
