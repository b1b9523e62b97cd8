// Command smallocpe is the Go half of a job of one Go and one C PE that
// free each other's shared blocks (capi/tests/m_smalloc.c is the C half,
// whose malloc is the C library's shared malloc: read the two side by
// side). Run by capi/tests/mixed (TestSharedMalloc):
//
//	SYMHEAP_SHARED_MALLOC=1 shrun -n 1 ./smallocpe : -n 1 ./m_smalloc
//
// The Go PE allocates a small and a large block with SharedAlloc and puts
// their addresses into the C PE's symmetric words 0 and 1; the C PE
// mallocs a small and a large block and puts theirs into the Go PE's
// words 2 and 3. After a barrier each reads the other's blocks in place
// and frees them: the Go PE with SharedFree, the C PE with free.
package main

import (
	"fmt"
	"os"

	"github.com/symheap/symheap"
)

const (
	goSmall, goLarge = 100, 100000 // the Go PE's blocks: bytes 0xA1, 0xA2
	cSmall, cLarge   = 48, 2000000 // the C PE's: bytes 0xC1, 0xC2
)

func main() {
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fail := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "smallocpe: PE %d (go): %s\n", pe.Rank(), fmt.Sprintf(format, a...))
		pe.GlobalExit(1)
	}
	if pe.Size() != 2 {
		fail("run with one C PE (%d PEs)", pe.Size())
	}
	other := 1 - pe.Rank()
	words, err := symheap.Malloc[int64](pe, 8) // the C PE's shmem_malloc(8 * sizeof(long))
	if err != nil {
		fail("%v", err)
	}
	small, err := symheap.SharedAlloc[byte](pe, goSmall)
	if err != nil {
		fail("%v", err)
	}
	large, err := symheap.SharedAlloc[byte](pe, goLarge)
	if err != nil {
		fail("%v", err)
	}
	for i := range small {
		small[i] = 0xA1
	}
	for i := range large {
		large[i] = 0xA2
	}
	ps, err := symheap.SharedPtrOf(pe, small)
	if err != nil {
		fail("%v", err)
	}
	pl, err := symheap.SharedPtrOf(pe, large)
	if err != nil {
		fail("%v", err)
	}
	if err := symheap.Put(pe, words[0:2], []int64{int64(ps), int64(pl)}, other); err != nil {
		fail("%v", err)
	}
	if err := pe.Barrier(); err != nil {
		fail("%v", err)
	}
	for _, b := range []struct {
		word, n int
		want    byte
	}{{2, cSmall, 0xC1}, {3, cLarge, 0xC2}} {
		s, err := symheap.SharedAt[byte](pe, symheap.SharedPtr(words[b.word]), b.n)
		if err != nil {
			fail("the C PE's block of %d bytes at %#x: %v", b.n, words[b.word], err)
		}
		for i, v := range s {
			if v != b.want {
				fail("the C PE's block of %d bytes: byte %d is %#x, want %#x", b.n, i, v, b.want)
			}
		}
		if err := symheap.SharedFree(pe, s); err != nil {
			fail("SharedFree of the C PE's block of %d bytes: %v", b.n, err)
		}
	}
	if err := pe.Barrier(); err != nil {
		fail("%v", err)
	}
	// The C PE freed this PE's blocks: the same sizes are served again.
	if _, err := symheap.SharedAlloc[byte](pe, goLarge); err != nil {
		fail("after the C PE's frees: %v", err)
	}
	fmt.Printf("smallocpe: PE %d (go): read and freed the C PE's malloc blocks\n", pe.Rank())
	if err := symheap.Free(pe, words); err != nil {
		fail("%v", err)
	}
	if err := pe.Close(); err != nil {
		fail("%v", err)
	}
}
