package symheap

import (
	"github.com/symheap/symheap/alloc/small"
	"github.com/symheap/symheap/internal/cabi"
)

// The local shared heap's small-block format, which the C library's
// shared malloc reads and writes too (capi/smalloc.c), registered for
// capi/shmemi_formats.h (alloc/small, cformat.go).
func init() {
	structs, consts := small.CFormats()
	for _, s := range structs {
		cabi.RegisterStruct(cabi.Struct{Name: s.Name, Type: s.Type, Doc: s.Doc})
	}
	for _, c := range consts {
		cabi.RegisterConst(c.Name, c.Value, c.Doc)
	}
}
