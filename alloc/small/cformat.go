package small

import "reflect"

// The front end's formats as the C library's shared malloc reads and
// writes them too (capi/smalloc.c; foreign.go): the region header, the
// span header (its bitmaps and slots follow at the offsets ClassTable
// gives), the arena header and their constants, generated into
// capi/shmemi_formats.h (internal/cabi, capi/gen). The root package
// registers them (cabi_small.go): this package stays below internal/cabi.

// CStruct is a Go type of the front end's formats and its C name.
type CStruct struct {
	Name string
	Type reflect.Type
	Doc  string
}

// CConst is a constant of the front end's formats and its C name.
type CConst struct {
	Name  string
	Value uint64
	Doc   string
}

// CFormats returns the front end's structs and constants that the C
// library reads and writes too.
func CFormats() ([]CStruct, []CConst) {
	structs := []CStruct{
		{"small_header", reflect.TypeFor[header](), "the small-block front end's header, the span table follows (alloc/small, small.go)"},
		{"small_span", reflect.TypeFor[spanHdr](), "a span's header: the bitmaps A and R, then the slots follow (alloc/small, small.go)"},
		{"small_arena", reflect.TypeFor[arenaHdr](), "the C front end's arena header, the page map follows (alloc/small, foreign.go)"},
	}
	var consts []CConst
	for _, c := range []struct {
		name string
		v    uint64
		doc  string
	}{
		{"SMALL_SPAN_SHIFT", SpanShift, "log2 of a span's bytes"},
		{"SMALL_MAX", MaxSmall, "the largest request served from a size class"},
		{"SMALL_PAGE_SHIFT", PageShift, "log2 of the span table's granularity, the spans' alignment and the arena's page"},
		{"SMALL_MAGIC", magic, "small_header.magic of a formatted front end"},
		{"SMALL_SPAN_MAGIC", spanMagic, "the high half of small_span.class"},
		{"SMALL_HDR_FIXED", hdrFixed, "bytes of small_header before the span table"},
		{"SMALL_SPAN_FIXED", spanFixed, "bytes of small_span before the bitmaps"},
		{"SMALL_COLOUR_STEP", colourStep, "a span colour's unit"},
		{"SMALL_NCLASSES", uint64(nClasses), "size classes (ClassTable's rows)"},
		{"SMALL_ARENA_MAGIC", arenaMagic, "small_arena.magic of a formatted arena"},
		{"SMALL_ARENA_FIXED", arenaFixed, "bytes of small_arena before the page map"},
		{"SMALL_PAGE_USED", pageUsed, "page map: the run is allocated"},
		{"SMALL_PAGE_HEAD", pageHead, "page map: the run's first page"},
	} {
		consts = append(consts, CConst{c.name, c.v, c.doc + " (alloc/small)"})
	}
	return structs, consts
}
