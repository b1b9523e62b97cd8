// Command symcc compiles and links C OpenSHMEM programs against libsymheap,
// as Open MPI's oshcc does for its library: it runs the C compiler with
// its arguments, adding the include directory of shmem.h and, when it
// links, libsymheap and an rpath to it. The programs it builds run under
// shrun like Go PEs:
//
//	symcc -O2 -o prog prog.c
//	shrun -n 4 ./prog
//
// Installed as symc++ (a link to symcc), it is the C++ wrapper: the same
// flags and library, the C++ compiler.
//
// symcc --showme prints the command instead of running it (--showme:compile
// and --showme:link print only the flags added, --showme:command the
// compiler); --version prints symheap's version and the compiler's.
// --symheap-static links the static library (libsymheap.a, which holds
// the Go runtime) instead of the shared one. --shared-malloc defines the
// symbol symheap_shared_malloc in the program (the linker's --defsym),
// which makes the C library serve malloc from the local shared heap
// (capi/smalloc.c), as SYMHEAP_SHARED_MALLOC=1 does.
//
// # The compiler
//
// symcc runs the first of $SYMHEAP_CC, $SYMCC_CC (the older name), $CC,
// then cc, gcc and clang found in PATH (symc++: $SYMHEAP_CXX, $CXX, then
// c++, g++, clang++). A candidate that is symcc itself (the same file,
// after following symlinks, as configure CC=symcc makes $CC) is skipped:
// symcc never runs itself. A compiler that runs symcc again some other way
// (a script) is stopped after a few rounds with a message instead of
// looping. A variable may hold arguments too (CC="gcc -std=c11").
//
// # Where the library is
//
// symcc finds shmem.h in ../include beside its own directory (an installed
// prefix: PREFIX/bin/symcc, PREFIX/include; the source tree: .bin/symcc,
// include/) or in include/ beside it, and libsymheap in ../lib (a prefix)
// or its own directory (make build's .bin). $SYMHEAP_INCLUDE and
// $SYMHEAP_LIB override them. The rpath is the library's directory.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/manpage"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// lang is what distinguishes symcc from symc++.
type lang struct {
	name     string   // the wrapper's name: symcc, symc++
	what     string   // "C", "C++"
	vars     []string // the environment variables naming the compiler, in order
	defaults []string // the compilers looked for in PATH, in order
}

var (
	langC   = lang{"symcc", "C", []string{"SYMHEAP_CC", "SYMCC_CC", "CC"}, []string{"cc", "gcc", "clang"}}
	langCXX = lang{"symc++", "C++", []string{"SYMHEAP_CXX", "CXX"}, []string{"c++", "g++", "clang++"}}
)

// langOf picks the language from the name symcc was run by.
func langOf(arg0 string) lang {
	if strings.Contains(filepath.Base(arg0), "++") || strings.HasSuffix(filepath.Base(arg0), "cxx") {
		return langCXX
	}
	return langC
}

// depthVar counts the symcc processes in a chain: symcc sets it for the
// compiler it runs, so a compiler that runs symcc again is seen.
const (
	depthVar = "SYMHEAP_SYMCC_DEPTH"
	maxDepth = 3
)

// options are symcc's own options (everything else goes to the compiler).
var options = []manpage.Option{
	{Name: "--showme", Text: "print the command symcc would run, with the compiler it chose, instead of running it (without other arguments: the command of a link)"},
	{Name: "--showme:compile", Text: "print only the flags symcc adds when compiling (the include directory)"},
	{Name: "--showme:link", Text: "print only the flags symcc adds when linking (library directory, rpath, library)"},
	{Name: "--showme:command", Text: "print only the compiler symcc runs, as an absolute path, with the arguments its variable holds"},
	{Name: "--shared-malloc", Text: "serve the program's malloc, free, calloc, realloc and the aligned forms from its PE's part of the node's shared heap after shmem_init (as SYMHEAP_SHARED_MALLOC=1 does; docs/c.md, «Shared malloc»)"},
	{Name: "--symheap-static", Text: "link libsymheap.a (which holds the Go runtime) instead of libsymheap.so"},
	{Name: "--version", Text: "print symheap's version and the compiler symcc chose, then run the compiler with --version"},
	{Name: "--help", Text: "print this list"},
	{Name: "--man", Text: "print this manual page in roff (man -l - renders it)"},
}

// run runs (execs) the compiler, or prints what an option asks, and
// returns the exit status when it does not exec.
func run(args []string, stdout, stderr io.Writer) int {
	return runAs(langOf(os.Args[0]), args, stdout, stderr)
}

func runAs(l lang, args []string, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, l.name+": "+format+"\n", a...)
		return 2
	}
	if len(args) == 1 {
		switch args[0] {
		case "--help", "-help":
			usage(l, stdout)
			return 0
		case "--man":
			if err := page(l).Write(stdout); err != nil {
				return fail("%v", err)
			}
			return 0
		}
	}
	depth, _ := strconv.Atoi(os.Getenv(depthVar))
	if depth >= maxDepth {
		return fail("the compiler it ran has run %s again %d times (%s=%d): a compiler variable or PATH names a script that runs %s; set %s to a real %s compiler",
			l.name, depth, depthVar, depth, l.name, l.vars[0], l.what)
	}
	inc, lib, err := locate()
	if err != nil {
		return fail("%v", err)
	}
	cc, err := choose(l)
	if err != nil {
		return fail("%v", err)
	}
	showme, static, version, smalloc := "", false, false, false
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
		case a == "--shared-malloc":
			smalloc = true
			continue
		case a == "--version":
			version = true
		case a == "-c" || a == "-S" || a == "-E" || a == "-M" || a == "-MM":
			link = false
		}
		user = append(user, a)
	}
	if !hasInput(user) { // --version, -v, -dumpversion, -print-*: nothing to link
		link = false
	}
	compileFlags := []string{"-I" + inc}
	linkFlags := []string{"-L" + lib, "-Wl,-rpath," + lib, "-lsymheap"}
	if static {
		a := filepath.Join(lib, "libsymheap.a")
		if _, err := os.Stat(a); err != nil {
			return fail("--symheap-static: %s not found (make build makes it; make install installs it)", a)
		}
		linkFlags = []string{a, "-lpthread", "-lm", "-ldl", "-lresolv"}
	}
	if smalloc {
		// A symbol the library looks for (only its address: capi/smalloc.c).
		linkFlags = append(linkFlags, "-Wl,--defsym=symheap_shared_malloc=1")
	}
	argv := append(append([]string{cc.path}, cc.args...), compileFlags...)
	argv = append(argv, user...)
	if link {
		argv = append(argv, linkFlags...)
	}
	switch showme {
	case "--showme:compile":
		fmt.Fprintln(stdout, strings.Join(compileFlags, " "))
		return 0
	case "--showme:link":
		fmt.Fprintln(stdout, strings.Join(linkFlags, " "))
		return 0
	case "--showme:command":
		fmt.Fprintln(stdout, strings.Join(append([]string{cc.path}, cc.args...), " "))
		cc.explain(l, stderr)
		return 0
	case "--showme":
		if len(user) == 0 { // as oshcc: the whole command for a link
			argv = append(argv, linkFlags...)
		}
		fmt.Fprintln(stdout, strings.Join(argv, " "))
		cc.explain(l, stderr)
		return 0
	case "":
	default:
		return fail("unknown option %s (use --showme, --showme:compile, --showme:link or --showme:command)", showme)
	}
	if version {
		fmt.Fprintf(stdout, "%s (symheap) %s\n", l.name, config.Version)
		fmt.Fprintf(stdout, "%s compiler: %s (%s)\n", l.what, strings.Join(append([]string{cc.path}, cc.args...), " "), cc.from)
	}
	if len(user) == 0 {
		return fail("no input files (%s [%s compiler arguments...]; %s --showme prints the command, --help lists its options)", l.name, l.what, l.name)
	}
	if f, ok := stdout.(*os.File); ok {
		f.Sync() // the --version line comes before the compiler's
	}
	env := append(os.Environ(), fmt.Sprintf("%s=%d", depthVar, depth+1))
	// Replace symcc by the compiler: its exit status and signals are ours.
	if err := syscall.Exec(cc.path, argv, env); err != nil {
		return fail("exec %s: %v", cc.path, err)
	}
	return 0
}

// compiler is the compiler chosen.
type compiler struct {
	path    string   // absolute
	args    []string // the arguments its variable held after the name
	from    string   // where it was named: "$CC=gcc", "PATH: cc"
	skipped []string // candidates that were symcc itself
}

func (c compiler) explain(l lang, w io.Writer) {
	for _, s := range c.skipped {
		fmt.Fprintf(w, "%s: skipped %s: it is %s itself\n", l.name, s, l.name)
	}
}

// choose picks the compiler: the first variable of l.vars that is set,
// else the first of l.defaults in PATH, skipping symcc itself.
func choose(l lang) (compiler, error) {
	self, err := selfInfo()
	if err != nil {
		return compiler{}, err
	}
	var c compiler
	isSelf := func(path string) bool {
		if r, err := filepath.EvalSymlinks(path); err == nil {
			path = r
		}
		fi, err := os.Stat(path)
		return err == nil && os.SameFile(fi, self)
	}
	for _, v := range l.vars {
		val := os.Getenv(v)
		words := strings.Fields(val)
		if len(words) == 0 {
			continue
		}
		path, err := exec.LookPath(words[0])
		if err != nil {
			return compiler{}, fmt.Errorf("the %s compiler $%s=%q: %v (install one, or set %s)", l.what, v, val, err, l.vars[0])
		}
		name := fmt.Sprintf("$%s=%s", v, val)
		if isSelf(path) {
			c.skipped = append(c.skipped, name)
			continue
		}
		if path, err = filepath.Abs(path); err != nil {
			return compiler{}, err
		}
		c.path, c.args, c.from = path, words[1:], name
		return c, nil
	}
	for _, d := range l.defaults {
		path, err := exec.LookPath(d)
		if err != nil {
			continue
		}
		name := "PATH: " + d
		if isSelf(path) {
			c.skipped = append(c.skipped, name+" ("+path+")")
			continue
		}
		if path, err = filepath.Abs(path); err != nil {
			return compiler{}, err
		}
		c.path, c.from = path, name
		return c, nil
	}
	tried := strings.Join(l.defaults, ", ")
	if len(c.skipped) > 0 {
		tried += "; skipped " + strings.Join(c.skipped, ", ") + " (" + l.name + " itself)"
	}
	return compiler{}, fmt.Errorf("no %s compiler found (looked for %s in PATH; %s): install one (gcc), or set %s", l.what, strings.Join(l.defaults, ", "), tried, l.vars[0])
}

// selfInfo is the file of symcc's own executable.
func selfInfo() (os.FileInfo, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find its own executable: %v", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return os.Stat(exe)
}

// hasInput reports whether args name an input file: a word that is not
// an option nor the value of one.
func hasInput(args []string) bool {
	takesValue := map[string]bool{"-o": true, "-x": true, "-I": true, "-L": true, "-include": true, "-isystem": true,
		"-iquote": true, "-idirafter": true, "-MF": true, "-MT": true, "-MQ": true, "-Xlinker": true, "-Xpreprocessor": true,
		"-Xassembler": true, "-u": true, "-D": true, "-U": true, "-l": true, "-T": true, "-z": true, "-e": true, "-aux-info": true}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case takesValue[a]:
			i++
		case a == "-" || !strings.HasPrefix(a, "-"):
			return true
		}
	}
	return false
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
	lib = os.Getenv("SYMHEAP_LIB")
	if lib == "" {
		for _, d := range []string{filepath.Join(dir, "..", "lib"), dir} {
			if _, err := os.Stat(filepath.Join(d, "libsymheap.so")); err == nil {
				lib = filepath.Clean(d)
				break
			}
		}
	}
	if lib == "" {
		return "", "", fmt.Errorf("libsymheap.so not found in %s or %s (run make build or make install, or set SYMHEAP_LIB)",
			filepath.Clean(filepath.Join(dir, "..", "lib")), dir)
	}
	if _, err := os.Stat(filepath.Join(lib, "libsymheap.so")); err != nil {
		return "", "", fmt.Errorf("libsymheap.so not found in $SYMHEAP_LIB=%s", lib)
	}
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
	return inc, lib, nil
}

func usage(l lang, w io.Writer) {
	fmt.Fprintf(w, "usage: %s [options] [%s compiler arguments...]\n\n", l.name, l.what)
	fmt.Fprintf(w, "Runs the %s compiler with shmem.h's directory and, when it links, libsymheap and an rpath.\n", l.what)
	fmt.Fprintf(w, "The compiler: $%s, else cc-like names in PATH (%s), never %s itself.\n\n", strings.Join(l.vars, ", else $"), strings.Join(l.defaults, ", "), l.name)
	for _, o := range options {
		fmt.Fprintf(w, "  %s\n    \t%s\n", o.Name, o.Text)
	}
}

// page is the wrapper's manual page, from its options.
func page(l lang) *manpage.Page {
	other := "symc++(1)"
	if l.name == langCXX.name {
		other = "symcc(1)"
	}
	return &manpage.Page{
		Name:    l.name,
		Section: 1,
		Summary: "compile and link " + l.what + " OpenSHMEM programs against libsymheap",
		Synopsis: []string{
			l.name + " [--symheap-static] [--shared-malloc] [" + l.what + " compiler arguments...]",
			l.name + " --showme[:compile|:link|:command] [arguments...]",
			l.name + " --version",
		},
		Description: []string{
			l.name + " runs the " + l.what + " compiler with its arguments, adding the directory of shmem.h (-I) and, when it links, " +
				"libsymheap with its directory (-L), an rpath to it and -lsymheap, as Open MPI's oshcc does for its library. " +
				"Programs it builds run under shrun(1).",
			"\t" + l.name + " -O2 -o prog prog.c\n\tshrun -np 4 ./prog",
			"The compiler is the first of $" + strings.Join(l.vars, ", $") + " that is set, else the first of " +
				strings.Join(l.defaults, ", ") + " found in PATH. A candidate that is " + l.name + " itself (the same file after following symlinks, " +
				"as configure CC=" + l.name + " makes it) is skipped, so " + l.name + " never runs itself; --showme names the compiler chosen and what was skipped.",
			"shmem.h is looked for in ../include beside " + l.name + "'s own directory, then in include/ beside it; libsymheap in ../lib, then " +
				l.name + "'s own directory. An installed " + l.name + " (PREFIX/bin) therefore uses PREFIX/include and PREFIX/lib, " +
				"wherever the prefix has been moved.",
		},
		Sections: []Section{
			{Title: "Options", Paragraphs: []string{"Options other than these go to the compiler unchanged."}, Options: options},
			{Title: "Environment", Options: []manpage.Option{
				{Name: "SYMHEAP_CC, SYMCC_CC, CC", Text: "the C compiler symcc runs, in this order (a value may hold arguments: CC=\"gcc -std=c11\")"},
				{Name: "SYMHEAP_CXX, CXX", Text: "the C++ compiler symc++ runs"},
				{Name: "SYMHEAP_INCLUDE", Text: "the directory of shmem.h, instead of the one found beside the wrapper"},
				{Name: "SYMHEAP_LIB", Text: "the directory of libsymheap.so and libsymheap.a"},
				{Name: "PKG_CONFIG_PATH", Text: "not read by " + l.name + "; pkg-config --cflags --libs symheap gives the same flags to other build systems"},
			}},
		},
		SeeAlso: []string{other, "shrun(1)", "symheap(1)", "shmem_init(3)", "pkg-config(1)"},
	}
}

// Section is manpage.Section (shorter in the table above).
type Section = manpage.Section
