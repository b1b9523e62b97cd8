package symheap

// The transports and bootstraps that join nodes register themselves
// (internal/transport): these imports link them in. internal/ucx and
// internal/pmix are empty without the ucx build tag.
import (
	_ "github.com/symheap/symheap/internal/pmix"
	_ "github.com/symheap/symheap/internal/ucx"
)
