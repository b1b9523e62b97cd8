package symheap

import (
	"testing"

	"github.com/symheap/symheap/internal/core"
)

// TestLayoutSizes: the structs laid out in shared memory have the sizes
// the layout reserves for them (once compile-time checks in the files
// that imported unsafe). The team area's are checked in internal/team.
func TestLayoutSizes(t *testing.T) {
	if s := core.SizeOf[control](); s > core.ControlSize {
		t.Errorf("control is %d bytes, more than the %d reserved", s, core.ControlSize)
	}
}
