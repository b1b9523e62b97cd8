package rcache

// The built-in allocator components, for the heaps the tests use.
import _ "github.com/symheap/symheap/alloc/all"
