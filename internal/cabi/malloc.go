package cabi

// The kinds of allocation the C library asks of the runtime
// (symheapc_go_malloc in capi/export_unsafe.go), generated into
// capi/shmemi_formats.h as SHMEMI_GO_MALLOC_*.
const (
	MallocPlain = iota // shmem_malloc
	MallocCalloc
	MallocAlign
	MallocHints
)

func init() {
	RegisterConst("GO_MALLOC_PLAIN", MallocPlain, "symheapc_go_malloc: shmem_malloc")
	RegisterConst("GO_MALLOC_CALLOC", MallocCalloc, "symheapc_go_malloc: shmem_calloc")
	RegisterConst("GO_MALLOC_ALIGN", MallocAlign, "symheapc_go_malloc: shmem_align")
	RegisterConst("GO_MALLOC_HINTS", MallocHints, "symheapc_go_malloc: shmem_malloc_with_hints")
}
