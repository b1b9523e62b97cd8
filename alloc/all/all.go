// Package all registers every built-in allocator component (buddy,
// dlmalloc, tlsf) with package alloc. Import it for its side effect:
//
//	import _ "github.com/symheap/symheap/alloc/all"
package all

import (
	_ "github.com/symheap/symheap/alloc/buddy"
	_ "github.com/symheap/symheap/alloc/dlmalloc"
	_ "github.com/symheap/symheap/alloc/tlsf"
)
