package alloc_test

import (
	"testing"

	"github.com/symheap/symheap/alloc/alloctest"
)

// TestMain checks, after all tests, that none left a shared-memory file
// behind (the remote-free test creates one per component).
func TestMain(m *testing.M) { alloctest.MainNoLeftovers(m, "symheap-alloctest") }
