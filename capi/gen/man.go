package main

// The C API's manual pages (section 3), from the same tables as the
// headers: gen -man DIR renders the headers as main does, reads every
// prototype back out of them, groups the routines into families and
// writes one page per family plus a one-line page (.so) for every other
// routine name, so that man shmem_long_put finds shmem_put's page.
//
// A routine's family is its name with the parts the tables multiply
// taken out, in this order:
//
//  1. the context: shmem_ctx_X belongs to shmem_X when shmem_X exists
//     (shmem_ctx_create has no shmem_create and is its own family);
//  2. the type: shmem_TYPENAME_X belongs to shmem_X, for the TYPENAMEs
//     of tables.go (longest first, so longlong is not long);
//  3. the size or mem form: shmem_put64, shmem_putmem, shmem_iget32,
//     shmem_broadcastmem, shmem_broadcast32 belong to shmem_put,
//     shmem_iget, shmem_broadcast.
//
// A page's synopsis shows each form once: the typed ones with TYPE and
// TYPENAME (written from one member, the types listed below it), the
// sized ones with SIZE, the others as declared, then the C11 generic
// name when the header defines one. The pages carry no date, so the
// same tables give the same pages; make install writes them into
// share/man/man3.

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/symheap/symheap/internal/manpage"
)

var manDir = flag.String("man", "", "write the C API's manual pages (section 3) into `dir` and exit")

// manHook runs from main once the flags are parsed: with -man it writes
// the pages and exits.
func manHook() {
	if *manDir != "" {
		os.Exit(writeMan(*manDir, os.Stderr))
	}
}

// writeMan writes the pages into dir; it returns the exit status.
func writeMan(dir string, stderr io.Writer) int {
	pages, err := manPages()
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	for name, data := range pages {
		if err != nil {
			break
		}
		err = os.WriteFile(filepath.Join(dir, name), data, 0o644)
	}
	if err != nil {
		fmt.Fprintf(stderr, "gen -man: %v\n", err)
		return 1
	}
	return 0
}

// proto is one declared routine.
type proto struct {
	ret, name, params, attr string
	section                 string // the header's section comment above it
	header                  string // shmem.h or shmemx.h
}

var (
	protoRE   = regexp.MustCompile(`^([A-Za-z_][A-Za-z_0-9 ]*?[ *]+)(_?[A-Za-z_][A-Za-z_0-9]*)\((.*)\)((?: __attribute__\(\(\w+\)\))?);$`)
	sectionRE = regexp.MustCompile(`^/\* (.*?)\.? \*/$`)
	genericRE = regexp.MustCompile(`^#define (shmem_[a-z_0-9]+)\(`)
	sizedRE   = regexp.MustCompile(`^shmem_(i?b?(?:put|get))(8|16|32|64|128)(_.*)?$`)
	memRE     = regexp.MustCompile(`^shmem_(put|get|broadcast|collect|fcollect|alltoall|alltoalls)mem(_.*)?$`)
	setRE     = regexp.MustCompile(`^shmem_(broadcast|collect|fcollect|alltoall|alltoalls)(32|64)$`)
)

// parseHeader returns the prototypes of a header in order, and the names
// its C11 generic selections define.
func parseHeader(name, text string) (protos []proto, generics map[string]bool) {
	generics = map[string]bool{}
	section := ""
	var pending string
	for _, l := range strings.Split(text, "\n") {
		if m := genericRE.FindStringSubmatch(l); m != nil {
			generics[m[1]] = true
			continue
		}
		if pending != "" {
			l = pending + " " + strings.TrimSpace(l)
			pending = ""
		}
		if m := sectionRE.FindStringSubmatch(l); m != nil {
			section = m[1]
			continue
		}
		if strings.HasSuffix(l, ",") && !strings.HasPrefix(l, "#") && strings.Contains(l, "(") {
			pending = l
			continue
		}
		if m := protoRE.FindStringSubmatch(l); m != nil {
			protos = append(protos, proto{ret: strings.TrimSpace(m[1]), name: m[2], params: m[3], attr: m[4], section: section, header: name})
		}
	}
	return protos, generics
}

// member is a routine as a member of its family.
type member struct {
	proto
	ctx   bool
	typ   *typ   // its type, for a typed routine
	sized string // its size, for a sized routine
}

// family is one page's routines.
type family struct {
	name    string
	members []member
}

// manPages returns the pages by file name.
func manPages() (map[string][]byte, error) {
	files, err := render()
	if err != nil {
		return nil, err
	}
	var protos []proto
	generics := map[string]bool{}
	for _, h := range []string{"include/shmem.h", "include/shmemx.h"} {
		p, g := parseHeader(filepath.Base(h), string(files[h]))
		protos = append(protos, p...)
		for k := range g {
			generics[k] = true
		}
	}
	if len(protos) == 0 {
		return nil, fmt.Errorf("no prototypes found in the headers")
	}
	fams := families(protos)
	out := map[string][]byte{}
	for _, f := range fams {
		var b strings.Builder
		if err := f.page(generics[f.name]).Write(&b); err != nil {
			return nil, err
		}
		out[f.name+".3"] = []byte(b.String())
	}
	for _, f := range fams {
		for _, m := range f.members {
			if _, ok := out[m.name+".3"]; !ok {
				out[m.name+".3"] = []byte(".so man3/" + f.name + ".3\n")
			}
		}
	}
	return out, nil
}

// typeNames are the TYPENAMEs, longest first.
func typeNames() []string {
	var names []string
	for n := range allTypes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if len(names[i]) != len(names[j]) {
			return len(names[i]) > len(names[j])
		}
		return names[i] < names[j]
	})
	return names
}

// families groups the routines; families keep the order of their first
// routine in the headers.
func families(protos []proto) []*family {
	declared := map[string]bool{}
	for _, p := range protos {
		declared[p.name] = true
	}
	tnames := typeNames()
	byName := map[string]*family{}
	var order []*family
	for _, p := range protos {
		m := member{proto: p}
		name := p.name
		if rest, ok := strings.CutPrefix(name, "shmem_ctx_"); ok && declared["shmem_"+rest] {
			m.ctx, name = true, "shmem_"+rest
		}
		if rest, ok := strings.CutPrefix(name, "shmem_"); ok {
			for _, tn := range tnames {
				if x, ok := strings.CutPrefix(rest, tn+"_"); ok && x != "" {
					t := allTypes[tn]
					m.typ, name = &t, "shmem_"+x
					break
				}
			}
		}
		if s := sizedRE.FindStringSubmatch(name); s != nil {
			m.sized, name = s[2], "shmem_"+s[1]+s[3]
		} else if s := memRE.FindStringSubmatch(name); s != nil {
			name = "shmem_" + s[1] + s[2]
		} else if s := setRE.FindStringSubmatch(name); s != nil {
			m.sized, name = s[2], "shmem_"+s[1]
		}
		f := byName[name]
		if f == nil {
			f = &family{name: name}
			byName[name] = f
			order = append(order, f)
		}
		f.members = append(f.members, m)
	}
	return order
}

// pattern writes a typed member's declaration with TYPE and TYPENAME.
func pattern(m member) (ret, name, params string) {
	c := regexp.MustCompile(`\b` + regexp.QuoteMeta(m.typ.c) + `\b`)
	ret = c.ReplaceAllString(m.ret, "TYPE")
	params = c.ReplaceAllString(m.params, "TYPE")
	name = strings.Replace(m.name, "_"+m.typ.name+"_", "_TYPENAME_", 1)
	return ret, name, params
}

// representative picks the member a typed form is written from: one
// whose C type is a word no other parameter has.
func representative(ms []member) member {
	for _, want := range []string{"double", "int64", "longlong", "float"} {
		for _, m := range ms {
			if m.typ.name == want {
				return m
			}
		}
	}
	return ms[0]
}

func decl(ret, name, params, attr string) string {
	sep := " "
	if strings.HasSuffix(ret, "*") {
		sep = ""
	}
	return ret + sep + name + "(" + params + ")" + attr + ";"
}

// page is the family's manual page; generic says whether the header
// defines a C11 generic selection of the family's name.
func (f *family) page(generic bool) *manpage.Page {
	header := f.members[0].header
	syn := []string{"#include <" + header + ">", ""}
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			syn = append(syn, s)
		}
	}
	// Typed forms, plain then context, each written once.
	var typedGroups [2][]member
	var types []string
	typeSeen := map[string]bool{}
	var sizes []string
	sizeSeen := map[string]bool{}
	var sections []string
	sectionSeen := map[string]bool{}
	for _, m := range f.members {
		if !sectionSeen[m.section] && m.section != "" {
			sectionSeen[m.section] = true
			sections = append(sections, m.section)
		}
		if m.typ != nil {
			typedGroups[b2i(m.ctx)] = append(typedGroups[b2i(m.ctx)], m)
			if !typeSeen[m.typ.name] {
				typeSeen[m.typ.name] = true
				types = append(types, fmt.Sprintf("%-20s %s", m.typ.c, m.typ.name))
			}
		}
	}
	var generics []string
	for _, g := range typedGroups {
		if len(g) == 0 {
			continue
		}
		ret, name, params := pattern(representative(g))
		add(decl(ret, name, params, g[0].attr))
		if generic {
			generics = append(generics, decl(ret, f.name, params, g[0].attr))
		}
	}
	for _, m := range f.members {
		switch {
		case m.typ != nil:
		case m.sized != "":
			if !sizeSeen[m.sized] {
				sizeSeen[m.sized] = true
				sizes = append(sizes, m.sized)
			}
			add(decl(m.ret, strings.Replace(m.name, m.sized, "SIZE", 1), m.params, m.attr))
		default:
			add(decl(m.ret, m.name, m.params, m.attr))
		}
	}
	if len(generics) > 0 {
		syn = append(syn, "", "/* C11 generic selection (C only, not C++) */")
		syn = append(syn, generics...)
	}
	summary := summaries[f.name]
	if summary == "" {
		summary = strings.Join(sections, "; ")
	}
	desc := []string{
		fmt.Sprintf("The %s routine%s of OpenSHMEM 1.6 as libsymheap implements %s, declared in <%s> (its part \"%s\"). "+
			"Semantics are those of the OpenSHMEM 1.6 specification; docs/c.md of symheap says what runs in C and what calls into its Go runtime.",
			f.name, plural(len(f.members) > 1, "s"), plural(len(f.members) > 1, "them", "it"), header, strings.Join(sections, "; ")),
		"Build programs with symcc(1) (or pkg-config --cflags --libs symheap) and run them with shrun(1).",
	}
	if header == "shmemx.h" {
		desc[0] = fmt.Sprintf("%s is one of symheap's extensions, declared in <shmemx.h>; it is not part of OpenSHMEM.", f.name)
	}
	var extra []manpage.Section
	if len(types) > 0 {
		lines := []string{"TYPE is one of these C types, TYPENAME its name in the routine's name:", fmt.Sprintf("\t%-20s %s", "TYPE", "TYPENAME")}
		lines[1] += "\n\t" + strings.Join(types, "\n\t")
		extra = append(extra, manpage.Section{Title: "Types", Paragraphs: lines})
	}
	if len(sizes) > 0 {
		extra = append(extra, manpage.Section{Title: "Sizes", Paragraphs: []string{
			"SIZE is the element size in bits: " + strings.Join(sizes, ", ") + "."}})
	}
	var names []string
	for _, m := range f.members {
		names = append(names, m.name)
	}
	extra = append(extra, manpage.Section{Title: "Routines", Paragraphs: []string{
		fmt.Sprintf("This page covers %d routine%s: %s.", len(names), plural(len(names) > 1, "s"), strings.Join(names, ", "))}})
	return &manpage.Page{
		Name:        f.name,
		Section:     3,
		Summary:     summary,
		Synopsis:    syn,
		Description: desc,
		Sections:    extra,
		SeeAlso:     seeAlso(f.name),
	}
}

func seeAlso(name string) []string {
	out := []string{"symcc(1)", "shrun(1)"}
	if name != "shmem_init" {
		out = append(out, "shmem_init(3)")
	}
	return out
}

// summaries are the NAME lines of the main families (the others show
// their part of the header).
var summaries = map[string]string{
	"shmem_init":                "allocate and initialise the resources of the OpenSHMEM library",
	"shmem_init_thread":         "initialise the library with a level of thread support",
	"shmem_finalize":            "release the library's resources and leave the job",
	"shmem_global_exit":         "end every PE of the job with a status",
	"shmem_my_pe":               "the number of the calling PE",
	"shmem_n_pes":               "the number of PEs in the job",
	"shmem_pe_accessible":       "whether a PE is accessible",
	"shmem_addr_accessible":     "whether an address is accessible on a PE",
	"shmem_ptr":                 "a direct pointer to a symmetric object on a PE",
	"shmem_malloc":              "allocate symmetric memory (collective)",
	"shmem_calloc":              "allocate zeroed symmetric memory (collective)",
	"shmem_realloc":             "resize symmetric memory (collective)",
	"shmem_align":               "allocate aligned symmetric memory (collective)",
	"shmem_free":                "free symmetric memory (collective)",
	"shmem_malloc_with_hints":   "allocate symmetric memory with usage hints (collective)",
	"shmem_put":                 "copy contiguous data to a remote PE",
	"shmem_get":                 "copy contiguous data from a remote PE",
	"shmem_put_nbi":             "copy contiguous data to a remote PE, complete at the next quiet",
	"shmem_get_nbi":             "copy contiguous data from a remote PE, complete at the next quiet",
	"shmem_p":                   "store one element on a remote PE",
	"shmem_g":                   "load one element from a remote PE",
	"shmem_iput":                "copy strided data to a remote PE",
	"shmem_iget":                "copy strided data from a remote PE",
	"shmem_ibput":               "copy strided blocks to a remote PE",
	"shmem_ibget":               "copy strided blocks from a remote PE",
	"shmem_put_signal":          "copy data to a remote PE, then update a signal there",
	"shmem_put_signal_nbi":      "copy data to a remote PE, then update a signal there, complete at the next quiet",
	"shmem_signal_fetch":        "read a local signal word",
	"shmem_signal_wait_until":   "wait until a local signal word satisfies a comparison",
	"shmem_signal_add":          "add to a signal word on a remote PE",
	"shmem_signal_set":          "write a signal word on a remote PE",
	"shmem_pe_quiet":            "complete the outstanding operations to some PEs",
	"shmem_ctx_session_start":   "start a session of a context: a hint that its operations may be batched",
	"shmem_ctx_session_stop":    "stop a context's session",
	"shmem_query_initialized":   "whether the library is initialised",
	"shmem_team_ptr":            "a direct pointer to a symmetric object on a PE of a team",
	"shmem_sum_inscan":          "inclusive prefix sums of arrays across the PEs of a team",
	"shmem_sum_exscan":          "exclusive prefix sums of arrays across the PEs of a team",
	"shmem_atomic_fetch":        "atomically read a remote object",
	"shmem_atomic_set":          "atomically write a remote object",
	"shmem_atomic_swap":         "atomically swap a remote object",
	"shmem_atomic_compare_swap": "atomically compare and swap a remote object",
	"shmem_atomic_fetch_inc":    "atomically increment a remote object, returning its old value",
	"shmem_atomic_inc":          "atomically increment a remote object",
	"shmem_atomic_fetch_add":    "atomically add to a remote object, returning its old value",
	"shmem_atomic_add":          "atomically add to a remote object",
	"shmem_wait_until":          "wait until a local object satisfies a comparison",
	"shmem_test":                "test whether a local object satisfies a comparison",
	"shmem_quiet":               "complete every outstanding put, AMO and non-blocking operation",
	"shmem_fence":               "order the puts and AMOs to each PE",
	"shmem_barrier_all":         "complete outstanding operations and synchronise every PE",
	"shmem_sync_all":            "synchronise every PE",
	"shmem_set_lock":            "acquire a distributed lock",
	"shmem_clear_lock":          "release a distributed lock",
	"shmem_test_lock":           "acquire a distributed lock if it is free",
	"shmem_ctx_create":          "create a communication context",
	"shmem_ctx_destroy":         "destroy a communication context",
	"shmem_team_split_strided":  "make a team of a strided subset of a team's PEs",
	"shmem_team_split_2d":       "split a team into the rows and columns of a grid",
	"shmem_team_sync":           "synchronise the PEs of a team",
	"shmem_team_destroy":        "destroy a team",
	"shmem_team_my_pe":          "the calling PE's number in a team",
	"shmem_team_n_pes":          "the number of PEs in a team",
	"shmem_broadcast":           "copy a block from a root PE to the other PEs of a team",
	"shmem_collect":             "concatenate blocks of varying sizes from every PE of a team",
	"shmem_fcollect":            "concatenate blocks of one size from every PE of a team",
	"shmem_alltoall":            "exchange a block between every pair of PEs of a team",
	"shmem_alltoalls":           "exchange strided blocks between every pair of PEs of a team",
	"shmem_sum_reduce":          "sum arrays across the PEs of a team",
	"shmem_prod_reduce":         "multiply arrays across the PEs of a team",
	"shmem_max_reduce":          "element-wise maximum of arrays across the PEs of a team",
	"shmem_min_reduce":          "element-wise minimum of arrays across the PEs of a team",
	"shmem_and_reduce":          "bitwise AND of arrays across the PEs of a team",
	"shmem_or_reduce":           "bitwise OR of arrays across the PEs of a team",
	"shmem_xor_reduce":          "bitwise XOR of arrays across the PEs of a team",
	"shmemx_heap_base":          "the address of a PE's symmetric heap in this PE (symheap extension)",
	"shmemx_same_address":       "whether the segment is mapped at the same address in every PE (symheap extension)",
	"shmemx_reg_get":            "register memory through the PE's registration cache (symheap extension)",
	"shmemx_reg_valid":          "whether no release of a registration's memory has been heard (symheap extension)",
	"shmemx_reg_put":            "give a registration of the PE's registration cache back (symheap extension)",
	"shmemx_wait_stats":         "counts of this process's waits: yields, sleeps, stops of yielding, moves (symheap extension)",
}

// plural is s[0] when many, else s[1] (or "").
func plural(many bool, s ...string) string {
	if many {
		return s[0]
	}
	if len(s) > 1 {
		return s[1]
	}
	return ""
}
