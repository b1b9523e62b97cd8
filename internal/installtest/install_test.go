package installtest

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/config"
)

// work is this test binary's scratch directory: the build (BIN), the
// prefix, the programs. TestMain removes it.
var work string

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "symheap-installtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	work = d
	code := m.Run()
	os.RemoveAll(work)
	os.Exit(code)
}

// guard bounds every command: the bug these tests keep away (symcc
// running itself) was a hang, which must fail the test, not stall it.
// It is a limit, not a measurement.
const guard = 5 * time.Minute

var (
	installOnce sync.Once
	prefix      string
	installErr  error
	root        string
)

// installed runs make install into a temporary prefix once, building
// into a temporary BIN so that the source tree is not written, and
// returns the prefix.
func installed(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: make install builds the tools and the library")
	}
	for _, tool := range []string{"make", "gcc", "install"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	installOnce.Do(func() {
		root, installErr = filepath.Abs("../..")
		if installErr != nil {
			return
		}
		prefix = filepath.Join(work, "prefix")
		out, err := makeIn(root, "install", "PREFIX="+prefix, "BIN="+filepath.Join(work, "build"))
		if err != nil {
			installErr = fmt.Errorf("make install: %v\n%s", err, out)
		}
	})
	if installErr != nil {
		t.Fatal(installErr)
	}
	return prefix
}

func makeIn(dir string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", append([]string{"-C", dir, "--no-print-directory"}, args...)...)
	return cmd.CombinedOutput()
}

// userEnv is a C user's environment: the prefix's bin first in PATH,
// then the system's; nothing of the build tree nor of symheap's
// variables. extra are added.
func userEnv(extra ...string) []string {
	env := []string{
		"PATH=" + filepath.Join(prefix, "bin") + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + work,
		"TMPDIR=" + work,
		"LC_ALL=C",
		"SHMEM_SYMMETRIC_SIZE=8m",
		"SYMHEAP_SHARED_SIZE=1m",
	}
	return append(env, extra...)
}

// result is a finished command.
type result struct {
	out string // stdout and stderr
	pid int
}

// runIn runs a command in dir with the user's environment.
func runIn(t *testing.T, dir string, env []string, name string, args ...string) (result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s did not end within %v (a loop?): %w", name, guard, ctx.Err())
	}
	r := result{out: out.String()}
	if cmd.Process != nil {
		r.pid = cmd.Process.Pid
	}
	return r, err
}

func mustRun(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	r, err := runIn(t, dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, r.out)
	}
	return r.out
}

// shrun runs a job with the installed shrun and checks that it left no
// segment in /dev/shm (every job's segment is named after its shrun's pid).
func shrun(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	r, err := runIn(t, dir, env, filepath.Join(prefix, "bin", "shrun"), args...)
	if r.pid != 0 {
		left, _ := filepath.Glob(fmt.Sprintf("/dev/shm/symheap-%d-j%d-*", os.Getuid(), r.pid))
		for _, f := range left {
			os.Remove(f)
		}
		if len(left) > 0 {
			t.Errorf("shrun %v left %q in /dev/shm", args, left)
		}
	}
	if err != nil {
		t.Fatalf("shrun %s: %v\n%s", strings.Join(args, " "), err, r.out)
	}
	return r.out
}

// program writes a C (or C++) program into a fresh directory.
func program(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(helloSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// helloSrc is C and C++ both: every PE stores into its right neighbour's
// static copy, and prints the greeting shrun -x exported.
const helloSrc = `#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>

static long inbox;

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	shmem_long_p(&inbox, me, (me + 1) % n);
	shmem_barrier_all();
	const char *g = getenv("HELLO_GREETING");
	printf("PE %d of %d: inbox holds %ld (%s)\n", me, n, inbox, g ? g : "none");
	shmem_finalize();
	return 0;
}
`

func checkHello(t *testing.T, out string, tagged bool) {
	t.Helper()
	for pe := 0; pe < 2; pe++ {
		want := fmt.Sprintf("PE %d of 2: inbox holds %d (hi there)", pe, 1-pe)
		if tagged {
			want = fmt.Sprintf("[pe %d] ", pe) + want
		}
		if !strings.Contains(out, want+"\n") {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestInstallTree: the files make install promises, the soname, the
// links, and a manifest that lists exactly what is there.
func TestInstallTree(t *testing.T) {
	p := installed(t)
	for _, f := range []string{"bin/symcc", "bin/symc++", "bin/shrun", "bin/symheap", "lib/libsymheap.so", "lib/libsymheap.so.0",
		"lib/libsymheap.so." + config.Version, "lib/libsymheap.a", "include/shmem.h", "include/shmemx.h", "lib/pkgconfig/symheap.pc",
		"share/man/man1/symcc.1", "share/man/man1/symc++.1", "share/man/man1/shrun.1", "share/man/man1/symheap.1",
		"share/man/man3/shmem_put.3", "share/man/man3/shmem_long_put.3", "share/man/man3/shmem_init.3"} {
		if _, err := os.Stat(filepath.Join(p, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if l, err := os.Readlink(filepath.Join(p, "bin", "symc++")); err != nil || l != "symcc" {
		t.Errorf("bin/symc++ links to %q (%v), want symcc", l, err)
	}
	lib, err := elf.Open(filepath.Join(p, "lib", "libsymheap.so"))
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	if so, err := lib.DynString(elf.DT_SONAME); err != nil || len(so) != 1 || so[0] != "libsymheap.so.0" {
		t.Errorf("soname %q (%v), want libsymheap.so.0", so, err)
	}
	data, err := os.ReadFile(filepath.Join(p, "share", "symheap", "install-manifest"))
	if err != nil {
		t.Fatal(err)
	}
	listed := strings.Fields(string(data))
	sort.Strings(listed)
	var present []string
	filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			present = append(present, path)
		}
		return err
	})
	sort.Strings(present)
	if strings.Join(listed, "\n") != strings.Join(present, "\n") {
		t.Errorf("the manifest lists %d files, the prefix holds %d", len(listed), len(present))
	}
	pc, _ := os.ReadFile(filepath.Join(p, "lib", "pkgconfig", "symheap.pc"))
	if !strings.Contains(string(pc), "prefix="+p+"\n") || !strings.Contains(string(pc), "Version: "+config.Version+"\n") {
		t.Errorf("symheap.pc:\n%s", pc)
	}
}

// TestShowmeUsesPrefix: the installed wrappers use the prefix's headers
// and library and nothing of the build tree.
func TestShowmeUsesPrefix(t *testing.T) {
	p := installed(t)
	inc, lib := filepath.Join(p, "include"), filepath.Join(p, "lib")
	for _, w := range []string{"symcc", "symc++"} {
		out := mustRun(t, work, userEnv(), filepath.Join(p, "bin", w), "--showme", "-o", "prog", "prog.c")
		for _, want := range []string{" -I" + inc + " ", " -L" + lib + " ", " -Wl,-rpath," + lib + " ", " -lsymheap"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s --showme lacks %q: %s", w, want, out)
			}
		}
		if strings.Contains(out, root) {
			t.Errorf("%s --showme names the build tree %s: %s", w, root, out)
		}
		compiler := strings.Fields(out)[0]
		if strings.HasPrefix(compiler, p) {
			t.Errorf("%s chose %s, in the prefix (itself?)", w, compiler)
		}
	}
}

// TestBuildAndRun: a C program built with PREFIX/bin/symcc runs under
// PREFIX/bin/shrun -np 2 with -x and --tag-output; the same source as
// C++ with symc++.
func TestBuildAndRun(t *testing.T) {
	p := installed(t)
	dir := program(t, "hello.c")
	mustRun(t, dir, userEnv(), filepath.Join(p, "bin", "symcc"), "-O2", "-o", "hello", "hello.c")
	exe, err := elf.Open(filepath.Join(dir, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	defer exe.Close()
	if rp, _ := exe.DynString(elf.DT_RUNPATH); len(rp) != 1 || rp[0] != filepath.Join(p, "lib") {
		t.Errorf("runpath %q, want %s", rp, filepath.Join(p, "lib"))
	}
	checkHello(t, shrun(t, dir, userEnv(), "-np", "2", "--tag-output", "-x", "HELLO_GREETING=hi there", "./hello"), true)
	checkHello(t, shrun(t, dir, userEnv("HELLO_GREETING=hi there"), "-np", "2", "-x", "HELLO_GREETING", "./hello"), false)

	if _, err := exec.LookPath("g++"); err != nil {
		t.Skipf("g++ is not installed: symc++ not tried (%v)", err)
	}
	dir = program(t, "hello.cpp")
	mustRun(t, dir, userEnv(), filepath.Join(p, "bin", "symc++"), "-O2", "-Wall", "-o", "hello", "hello.cpp")
	checkHello(t, shrun(t, dir, userEnv(), "-np", "2", "-x", "HELLO_GREETING=hi there", "./hello"), false)
}

// TestPkgConfig: pkg-config --cflags --libs symheap builds the program
// with plain gcc.
func TestPkgConfig(t *testing.T) {
	p := installed(t)
	if _, err := exec.LookPath("pkg-config"); err != nil {
		t.Skipf("pkg-config is not installed: %v", err)
	}
	env := userEnv("PKG_CONFIG_PATH=" + filepath.Join(p, "lib", "pkgconfig"))
	flags := strings.Fields(mustRun(t, work, env, "pkg-config", "--cflags", "--libs", "symheap"))
	if len(flags) == 0 || flags[0] != "-I"+filepath.Join(p, "include") {
		t.Errorf("pkg-config: %q", flags)
	}
	if v := strings.TrimSpace(mustRun(t, work, env, "pkg-config", "--modversion", "symheap")); v != config.Version {
		t.Errorf("pkg-config --modversion: %q, want %s", v, config.Version)
	}
	dir := program(t, "hello.c")
	mustRun(t, dir, env, "gcc", append([]string{"-o", "hello", "hello.c"}, flags...)...)
	checkHello(t, shrun(t, dir, env, "-np", "2", "-x", "HELLO_GREETING=hi there", "./hello"), false)
}

// TestManPages: man renders an installed page of each section, and finds
// a routine's page through its .so line.
func TestManPages(t *testing.T) {
	p := installed(t)
	if _, err := exec.LookPath("man"); err != nil {
		t.Skipf("man is not installed: the pages were installed but not rendered (%v)", err)
	}
	env := userEnv("MANWIDTH=100", "MANPAGER=cat", "PAGER=cat")
	man := filepath.Join(p, "share", "man")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-l", filepath.Join(man, "man1", "shrun.1")}, []string{"SHRUN(1)", "-np N", "--tag-output", "--timeout DURATION", "-x VAR[=value]"}},
		{[]string{"-l", filepath.Join(man, "man1", "symcc.1")}, []string{"SYMCC(1)", "--showme:command", "SYMHEAP_CC"}},
		{[]string{"-l", filepath.Join(man, "man3", "shmem_put.3")}, []string{"SHMEM_PUT(3)", "#include <shmem.h>",
			"void shmem_TYPENAME_put(TYPE *dest, const TYPE *source, size_t nelems, int pe);", "longlong"}},
		{[]string{"-M", man, "shmem_long_put"}, []string{"SHMEM_PUT(3)"}},
	} {
		out := mustRun(t, work, env, "man", append([]string{"--warnings"}, c.args...)...)
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("man %v lacks %q:\n%s", c.args, w, out)
			}
		}
		if strings.Contains(out, "warning:") {
			t.Errorf("man %v warns:\n%s", c.args, out)
		}
	}
}

// TestVersions: every tool says symheap's version; symcc also the
// compiler's.
func TestVersions(t *testing.T) {
	p := installed(t)
	for _, tool := range []string{"symcc", "symc++", "shrun", "symheap"} {
		out := mustRun(t, work, userEnv(), filepath.Join(p, "bin", tool), "--version")
		if first, _, _ := strings.Cut(out, "\n"); !strings.Contains(first, config.Version) {
			t.Errorf("%s --version: %q", tool, out)
		}
		if tool == "symcc" && !strings.Contains(out, "C compiler: /") {
			t.Errorf("symcc --version does not name the compiler: %q", out)
		}
	}
}

// TestRecursionGuard: symcc named as the compiler, in every way configure
// or a user does it, compiles instead of running itself forever.
func TestRecursionGuard(t *testing.T) {
	p := installed(t)
	symcc := filepath.Join(p, "bin", "symcc")
	links := t.TempDir()
	if err := os.Symlink(symcc, filepath.Join(links, "cc")); err != nil {
		t.Fatal(err)
	}
	dir := program(t, "hello.c")
	for _, env := range [][]string{
		userEnv("CC=symcc"),
		userEnv("CC=" + symcc),
		userEnv("SYMHEAP_CC=symcc", "CC=symcc"),
		userEnv("CXX=symc++"),
		append(userEnv("CC="+filepath.Join(links, "cc")), "PATH="+links+":"+filepath.Join(p, "bin")+":/usr/bin:/bin"),
	} {
		mustRun(t, dir, env, symcc, "-c", "-o", "hello.o", "hello.c")
		out := mustRun(t, dir, env, symcc, "--showme:command")
		if c := strings.Fields(out)[0]; strings.HasPrefix(c, p) || strings.HasPrefix(c, links) {
			t.Errorf("%q: chose %s", env, out)
		}
	}
}

// TestConfigure: an autoconf configure (or, without autoconf, a POSIX
// sh one that does what AC_PROG_CC does: compile conftest.c with $CC,
// run it) completes with CC=symcc and CXX=symc++.
func TestConfigure(t *testing.T) {
	p := installed(t)
	dir := t.TempDir()
	env := userEnv()
	if _, err := exec.LookPath("autoconf"); err == nil {
		if err := os.WriteFile(filepath.Join(dir, "configure.ac"), []byte(configureAC), 0o644); err != nil {
			t.Fatal(err)
		}
		mustRun(t, dir, append(env, "PATH=/usr/bin:/bin"), "autoconf")
	} else {
		t.Logf("autoconf is not installed: a hand-written configure instead (%v)", err)
		if err := os.WriteFile(filepath.Join(dir, "configure"), []byte(configureSh), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := mustRun(t, dir, env, "/bin/sh", "./configure", "CC=symcc", "CXX=symc++")
	for _, want := range []string{"checking whether the C compiler works... yes", "checking for shmem_init... yes"} {
		if !strings.Contains(out, want) {
			t.Errorf("configure lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "checking whether we are cross compiling... no") {
		t.Errorf("configure did not run conftest:\n%s", out)
	}
	_ = p
}

const configureAC = `AC_INIT([symheap-conftest], [1.0])
AC_PROG_CC
AC_PROG_CXX
AC_LANG([C])
AC_CHECK_HEADERS([shmem.h], [], [AC_MSG_ERROR([shmem.h not found])])
AC_MSG_CHECKING([for shmem_init])
AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <shmem.h>]], [[shmem_init(); shmem_finalize();]])],
  [AC_MSG_RESULT([yes])], [AC_MSG_RESULT([no]); AC_MSG_ERROR([cannot link an OpenSHMEM program])])
AC_OUTPUT
`

// configureSh does what autoconf's compiler checks do, in POSIX sh.
const configureSh = `#!/bin/sh
for a in "$@"; do case $a in CC=*) CC=${a#CC=};; CXX=*) CXX=${a#CXX=};; esac; done
: "${CC:=cc}"
printf 'checking whether the C compiler works... '
printf 'int main(void) { return 0; }\n' >conftest.c
if $CC -o conftest conftest.c >config.log 2>&1; then echo yes; else echo no; cat config.log; exit 77; fi
printf 'checking whether we are cross compiling... '
if ./conftest; then echo no; else echo yes; exit 1; fi
printf 'checking for shmem_init... '
printf '#include <shmem.h>\nint main(void) { shmem_init(); shmem_finalize(); return 0; }\n' >conftest.c
if $CC -o conftest conftest.c >>config.log 2>&1; then echo yes; else echo no; cat config.log; exit 1; fi
rm -f conftest conftest.c
`

// TestUninstall: make uninstall takes away every file make install put
// into a prefix.
func TestUninstall(t *testing.T) {
	installed(t)
	p2 := filepath.Join(t.TempDir(), "prefix")
	build := "BIN=" + filepath.Join(work, "build")
	if out, err := makeIn(root, "install", "PREFIX="+p2, build); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	if out, err := makeIn(root, "uninstall", "PREFIX="+p2, build); err != nil {
		t.Fatalf("make uninstall: %v\n%s", err, out)
	}
	var left []string
	filepath.WalkDir(p2, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, path)
		}
		return err
	})
	if len(left) > 0 {
		t.Errorf("make uninstall left %d files: %q", len(left), left[:min(len(left), 10)])
	}
	if out, err := makeIn(root, "uninstall", "PREFIX="+p2, build); err == nil || !strings.Contains(string(out), "no symheap install") {
		t.Errorf("a second make uninstall: %v, %s; want a failure saying there is nothing", err, out)
	}
}
