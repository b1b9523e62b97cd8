package symheap

// The transports and bootstraps that join nodes register themselves
// (internal/transport): these imports link them in. TCP and its
// rendezvous are in every build; internal/ucx and internal/pmix are empty
// without the ucx build tag.
import (
	_ "github.com/symheap/symheap/internal/pmix"
	_ "github.com/symheap/symheap/internal/tcp"
	_ "github.com/symheap/symheap/internal/ucx"
)
