package main

import (
	"fmt"
	"reflect"
	"strings"

	_ "github.com/symheap/symheap" // registers the control block's format (cabi.go)
	"github.com/symheap/symheap/internal/cabi"
	"github.com/symheap/symheap/internal/calls"
	_ "github.com/symheap/symheap/internal/team" // registers the post lines' format
)

// The C library's own words in symmetric memory, which no Go code reads:
// written as Go types so that one generator lays out every format the C
// sources share (capi/coll.c).

// cSync is an active set's pSync (OpenSHMEM 1.4: SHMEM_SYNC_SIZE longs,
// SHMEM_SYNC_VALUE between calls) and the head of the world's scratch
// block: the counters of the C library's barrier, collect and broadcast.
type cSync struct {
	Barrier int64    // the barrier's arrivals: added by the others, subtracted by the owner
	Collect int64    // collect: the member's byte count + 1 during a call
	Bcast   [2]int64 // the broadcast's tickets: [0] from the root, [1] to the root
}

// cScratch is the world's symmetric scratch block, one cache line: the
// world team's counters and the collectives' own wake-up channel (a futex
// word and its sleepers, apart from the signal that puts wake).
type cScratch struct {
	Sync         cSync
	_            [2]uint64
	CollWord     uint32
	_            uint32
	CollSleepers uint32
	_            uint32
}

// cFormats are the C library's own formats.
var cFormats = []cabi.Struct{
	{Name: "sync", Type: reflect.TypeFor[cSync](), Doc: "an active set's pSync and the head of the world's scratch block (capi/coll.c)"},
	{Name: "scratch", Type: reflect.TypeFor[cScratch](), Doc: "the world's scratch block of the collectives (capi/coll.c)"},
}

// syncSize is SHMEM_SYNC_SIZE, the longs of a pSync.
func syncSize() int { return int(reflect.TypeFor[cSync]().Size() / 8) }

// formatsH is capi/shmemi_formats.h: every format the C library shares,
// as C structs with the Go types' offsets, and their constants.
func formatsH() (string, error) {
	if err := checkCalls(); err != nil {
		return "", err
	}
	sum, err := cabi.Sum()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, `//go:build symheap_capi

%s

/*
 * shmemi_formats.h - the records the C library shares with the Go
 * runtime, laid out from their Go types: every struct here has each field
 * at the Go type's offset and the Go type's size, asserted below, so that
 * C and Go read one format. The owners of the types register them with
 * internal/cabi (the root's control block, internal/team's post lines,
 * internal/calls' call words); the C library's own words (pSync, the
 * world's scratch block) are Go types in capi/gen/formats.go. Change the
 * Go types, then run go generate ./capi/gen.
 */
#ifndef SHMEMI_FORMATS_H
#define SHMEMI_FORMATS_H

#include <stddef.h>
#include <stdint.h>

/* The digest of the runtime's formats (internal/cabi.Sum): shmem_init
 * refuses to run with a runtime whose formats are not these. */
#define SHMEMI_FORMATS_SUM UINT64_C(%#x)

`, generatedLine, sum)
	for _, c := range cabi.Consts() {
		fmt.Fprintf(&b, "#define SHMEMI_%s %s /* %s */\n", c.Name, cConst(c.Value), c.Doc)
	}
	ls, err := cabi.CStructs(append(cabi.Structs(), cFormats...))
	if err != nil {
		return "", err
	}
	for _, l := range ls {
		writeStruct(&b, l)
	}
	b.WriteString("\n#endif\n")
	return b.String(), nil
}

// cConst writes v as a C integer constant.
func cConst(v uint64) string {
	if v <= 1<<31-1 {
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("UINT64_C(%#x)", v)
}

// writeStruct writes one struct and the assertions of its layout.
func writeStruct(b *strings.Builder, l *cabi.CStruct) {
	if t, ok := strings.CutPrefix(l.GoType, "main."); ok {
		l.GoType = t + " (capi/gen/formats.go)"
	}
	fmt.Fprintf(b, "\n/* struct shmemi_%s: %s, %d bytes", l.Name, l.GoType, l.Size)
	if l.Doc != "" {
		fmt.Fprintf(b, ":\n * %s", l.Doc)
	}
	b.WriteString(". */\n")
	fmt.Fprintf(b, "struct shmemi_%s {\n", l.Name)
	for _, f := range l.Fields {
		name := f.Name
		if name == "" {
			name = fmt.Sprintf("pad_%d", f.Off)
		}
		dims := ""
		for _, d := range f.Dims {
			dims += fmt.Sprintf("[%d]", d)
		}
		fmt.Fprintf(b, "\t%s %s%s; /* %d */\n", f.Elem, name, dims, f.Off)
	}
	b.WriteString("};\n")
	what := fmt.Sprintf("struct shmemi_%s is not %s: run go generate ./capi/gen", l.Name, l.GoType)
	fmt.Fprintf(b, "_Static_assert(sizeof(struct shmemi_%s) == %d, \"%s\");\n", l.Name, l.Size, what)
	for _, f := range l.Fields {
		if f.Name != "" {
			fmt.Fprintf(b, "_Static_assert(offsetof(struct shmemi_%s, %s) == %d, \"%s\");\n", l.Name, f.Name, f.Off, what)
		}
	}
}

// checkCalls: the offsets internal/calls gives for the call words
// (shmemi_calls.h) are those of its Area.
func checkCalls() error {
	t := reflect.TypeFor[calls.Area]()
	for _, c := range []struct {
		field string
		off   uint64
	}{{"word", calls.WordOff}, {"counts", calls.CountsOff}, {"args", calls.ArgsOff}} {
		f, ok := t.FieldByName(c.field)
		if !ok || uint64(f.Offset) != c.off {
			return fmt.Errorf("gen: internal/calls gives offset %d for Area.%s, which lies at %d", c.off, c.field, f.Offset)
		}
	}
	return nil
}
