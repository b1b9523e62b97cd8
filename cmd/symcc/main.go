// Command symcc compiles and links C OpenSHMEM programs against libsymheap,
// as Open MPI's oshcc does for its library: it runs the C compiler with
// its arguments, adding the include directory of shmem.h and, when it
// links, libsymheap and an rpath to it. The programs it builds run under
// shrun like Go PEs:
//
//	symcc -O2 -o prog prog.c
//	shrun -n 4 ./prog
//
// symcc --showme prints the command instead of running it (--showme:compile
// and --showme:link print only the flags added). --symheap-static links
// the static library (libsymheap.a, which holds the Go runtime) instead of
// the shared one. The compiler is $SYMCC_CC, else $CC, else cc.
//
// symcc finds the library beside itself (make build puts both in .bin)
// and the headers in include/ of the directory above it (the source tree)
// or beside it; $SYMHEAP_INCLUDE and $SYMHEAP_LIB override them.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout))
}

// run runs (execs) the compiler, or prints what --showme asks on stdout,
// and returns the exit status when it does not exec.
func run(args []string, stdout io.Writer) int {
	inc, lib, err := locate()
	if err != nil {
		fmt.Fprintf(os.Stderr, "symcc: %v\n", err)
		return 2
	}
	cc := first(os.Getenv("SYMCC_CC"), os.Getenv("CC"), "cc")
	showme, static := "", false
	var user []string
	link := true
	for _, a := range args {
		switch {
		case a == "--showme" || strings.HasPrefix(a, "--showme:"):
			showme = a
			continue
		case a == "--symheap-static":
			static = true
			continue
		case a == "-c" || a == "-S" || a == "-E" || a == "-M" || a == "-MM":
			link = false
		}
		user = append(user, a)
	}
	compileFlags := []string{"-I" + inc}
	linkFlags := []string{"-L" + lib, "-Wl,-rpath," + lib, "-lsymheap"}
	if static {
		linkFlags = []string{filepath.Join(lib, "libsymheap.a"), "-lpthread", "-lm", "-ldl", "-lresolv"}
	}
	argv := append([]string{cc}, compileFlags...)
	argv = append(argv, user...)
	if link && len(user) > 0 {
		argv = append(argv, linkFlags...)
	}
	switch showme {
	case "--showme:compile":
		fmt.Fprintln(stdout, strings.Join(compileFlags, " "))
		return 0
	case "--showme:link":
		fmt.Fprintln(stdout, strings.Join(linkFlags, " "))
		return 0
	case "--showme":
		if len(user) == 0 { // as oshcc: the whole command for a link
			argv = append(argv, linkFlags...)
		}
		fmt.Fprintln(stdout, strings.Join(argv, " "))
		return 0
	case "":
	default:
		fmt.Fprintf(os.Stderr, "symcc: unknown option %s (use --showme, --showme:compile or --showme:link)\n", showme)
		return 2
	}
	if len(user) == 0 {
		fmt.Fprintln(os.Stderr, "symcc: no input files (symcc [cc arguments...]; symcc --showme prints the command)")
		return 2
	}
	path, err := exec.LookPath(cc)
	if err != nil {
		fmt.Fprintf(os.Stderr, "symcc: the C compiler %q is not in PATH: %v (install gcc, or set SYMCC_CC)\n", cc, err)
		return 2
	}
	// Replace symcc by the compiler: its exit status and signals are ours.
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		fmt.Fprintf(os.Stderr, "symcc: exec %s: %v\n", path, err)
		return 2
	}
	return 0
}

// locate finds the directory of shmem.h and of libsymheap.
func locate() (inc, lib string, err error) {
	exe, err := os.Executable()
	if err != nil {
		return "", "", fmt.Errorf("cannot find its own executable: %v", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	dir := filepath.Dir(exe)
	lib = first(os.Getenv("SYMHEAP_LIB"), dir)
	inc = os.Getenv("SYMHEAP_INCLUDE")
	if inc == "" {
		for _, d := range []string{filepath.Join(dir, "..", "include"), filepath.Join(dir, "include")} {
			if _, err := os.Stat(filepath.Join(d, "shmem.h")); err == nil {
				inc = filepath.Clean(d)
				break
			}
		}
	}
	if inc == "" {
		return "", "", errors.New("shmem.h not found in ../include or include beside " + dir + " (set SYMHEAP_INCLUDE)")
	}
	if _, err := os.Stat(filepath.Join(lib, "libsymheap.so")); err != nil {
		return "", "", fmt.Errorf("libsymheap.so not found in %s (run make build, or set SYMHEAP_LIB)", lib)
	}
	return inc, lib, nil
}

func first(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
